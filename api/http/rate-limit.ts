import type { Context, MiddlewareHandler } from "hono";
import { readEnv } from "../../config/env.ts";
import { errorBody } from "../../shared/errors.ts";
import { tokenBuckets } from "../../shared/token-buckets.ts";
import type { AppEnv } from "./app-env.ts";

/**
 * A per-client token bucket: `perMinute` requests a minute, refilled continuously, with a burst of
 * `perMinute`. The client is the connection's remote address (X-Forwarded-For is not trusted: any
 * caller could set it). Past the limit: 429 `rate_limited` with Retry-After (seconds until one
 * request is allowed again). In memory, per API process.
 */
export function rateLimit(
  perMinute: number,
  now: () => number = Date.now,
  what = "verifications",
): MiddlewareHandler & { limit: number } {
  const buckets = tokenBuckets(perMinute, 60_000, now);
  const middleware: MiddlewareHandler = async (c, next) => {
    const retryAfter = buckets.take(clientOf(c));
    if (retryAfter > 0) {
      return c.json(
        errorBody("rate_limited", `At most ${perMinute} ${what} a minute per client: retry in ${retryAfter} s.`, {
          limitPerMinute: perMinute,
          retryAfterSeconds: retryAfter,
        }),
        429,
        { "Retry-After": String(retryAfter) },
      );
    }
    await next();
  };
  return Object.assign(middleware, { limit: perMinute });
}

function clientOf(c: Context): string {
  const incoming = (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming;
  return incoming?.socket?.remoteAddress ?? "unknown";
}

/**
 * The free routes' per-client limit (FREE_RATE_LIMIT_PER_MINUTE, default 120), one per app
 * (createApp), shared by its free routes: stats, the x402 config, health, the OpenAPI document and
 * /docs. Read from the environment when the app is made.
 */
export const freeRateLimiter = (perMinute = readEnv().FREE_RATE_LIMIT_PER_MINUTE): MiddlewareHandler =>
  rateLimit(perMinute, Date.now, "requests to free routes");

/** A free route's limit: its app's (route declarations are static data, the limiter is the app's). */
export const freeRateLimit: MiddlewareHandler<AppEnv> = (c, next) => c.var.freeLimit(c, next);
