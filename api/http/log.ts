import { randomUUID } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import type { Logger } from "../../shared/log.ts";
import type { AppEnv } from "./app-env.ts";

/** An incoming X-Request-Id is kept when it is this shape (no spaces, no control characters, short). */
const REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

/**
 * One line per request: request id (also answered as X-Request-Id; a well-formed incoming one is
 * kept), the declared route ("POST /api/lender/screen"), status, latency, and for a paid call the
 * payer and the units charged (from `c.var.billing`). No header value is ever logged.
 */
export function requestLog(logger: Logger, routes: readonly { method: string; path: string }[]): MiddlewareHandler<AppEnv> {
  const patterns = routes.map((r) => ({
    method: r.method.toUpperCase(),
    name: `${r.method.toUpperCase()} ${r.path}`,
    pattern: new RegExp(`^${r.path.replace(/[.]/g, "\\.").replace(/\{[^}]+\}/g, "[^/]+")}/?$`),
  }));
  const routeOf = (method: string, path: string) =>
    patterns.find((p) => p.method === method && p.pattern.test(path))?.name ?? patterns.find((p) => p.pattern.test(path))?.name ?? null;
  return async (c, next) => {
    const started = performance.now();
    const incoming = c.req.header("x-request-id");
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    try {
      await next();
    } finally {
      c.header("X-Request-Id", requestId);
      const billing = c.get("billing");
      const status = c.res?.status ?? 500;
      const line = {
        requestId,
        method: c.req.method,
        route: routeOf(c.req.method, c.req.path),
        status,
        latencyMs: Math.round((performance.now() - started) * 10) / 10,
        payer: billing?.payer ?? null,
        chargedUnits: billing ? billing.chargedUnits.toString() : null,
        token: billing?.token.symbol ?? null,
      };
      if (status >= 500) logger.error(line, "request");
      else logger.info(line, "request");
    }
  };
}
