import type { Context, MiddlewareHandler } from "hono";
import { readEnv } from "../../config/env.ts";
import { errorBody } from "./errors.ts";

/**
 * A per-client token bucket: `perMinute` requests a minute, refilled continuously, with a burst of
 * `perMinute`. The client is the connection's remote address (X-Forwarded-For is not trusted: any
 * caller could set it). Past the limit: 429 `rate_limited` with Retry-After (seconds until one
 * request is allowed again). In memory, per API process.
 */
export function rateLimit(perMinute: number, now: () => number = Date.now, what = "verifications"): MiddlewareHandler & { limit: number } {
  const buckets = new Map<string, { tokens: number; at: number }>();
  const ratePerMs = perMinute / 60_000;
  const middleware: MiddlewareHandler = async (c, next) => {
    const t = now();
    const key = clientOf(c);
    const b = buckets.get(key) ?? { tokens: perMinute, at: t };
    b.tokens = Math.min(perMinute, b.tokens + (t - b.at) * ratePerMs);
    b.at = t;
    if (b.tokens < 1) {
      buckets.set(key, b);
      const retryAfter = Math.max(1, Math.ceil((1 - b.tokens) / ratePerMs / 1000));
      return c.json(errorBody("rate_limited", `At most ${perMinute} ${what} a minute per client: retry in ${retryAfter} s.`, { limitPerMinute: perMinute, retryAfterSeconds: retryAfter }), 429, { "Retry-After": String(retryAfter) });
    }
    b.tokens -= 1;
    buckets.set(key, b);
    // Forget full buckets now and then, so the map holds only recent clients.
    if (buckets.size > 10_000) for (const [k, v] of buckets) if (v.tokens + (t - v.at) * ratePerMs >= perMinute) buckets.delete(k);
    await next();
  };
  return Object.assign(middleware, { limit: perMinute });
}

function clientOf(c: Context): string {
  const incoming = (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming;
  return incoming?.socket?.remoteAddress ?? "unknown";
}

/**
 * The free routes' shared per-client limit (FREE_RATE_LIMIT_PER_MINUTE, default 120): stats, the
 * x402 config, health, the OpenAPI document and /docs. Read from the environment at first use.
 */
let freeLimiter: ReturnType<typeof rateLimit> | undefined;
export const freeRateLimit: MiddlewareHandler = (c, next) => (freeLimiter ??= rateLimit(readEnv().FREE_RATE_LIMIT_PER_MINUTE, Date.now, "requests to free routes"))(c, next);
