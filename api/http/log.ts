import type { MiddlewareHandler } from "hono";
import { every } from "hono/combine";
import { requestId } from "hono/request-id";
import { METHOD_NAME_ALL } from "hono/router";
import { TrieRouter } from "hono/router/trie-router";
import type { Logger } from "../../shared/log.ts";
import type { AppEnv } from "./app-env.ts";

/** An incoming X-Request-Id is kept when it is this shape (no spaces, no control characters, short). */
const REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

/**
 * Hono's request id (c.var.requestId, answered as X-Request-Id) with this service's accepted shape:
 * `limitLength: 0` hands every incoming id to the generator, which keeps a well-formed one (Hono's
 * own check admits "=" and refuses ".", ":" and "@").
 */
const requestIds = requestId({
  limitLength: 0,
  generator: (c) => {
    const incoming = c.req.header("x-request-id");
    return incoming && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
  },
});

/**
 * The declared route a request is for, by Hono's router over the declared routes (OpenAPI's
 * `{address}` is Hono's `:address`): the one of the request's method, else the first with that
 * path (a 405 names the route too); a trailing slash matches as well. Null for any other path.
 */
function declaredRoute(routes: readonly { method: string; path: string }[]) {
  const router = new TrieRouter<{ method: string; name: string }>();
  for (const { method, path } of routes) {
    const route = { method: method.toUpperCase(), name: `${method.toUpperCase()} ${path}` };
    const pattern = path.replace(/\{([^}]+)\}/g, ":$1");
    for (const p of [pattern, `${pattern}/`]) router.add(METHOD_NAME_ALL, p, route);
  }
  return (method: string, path: string): string | null => {
    const found = router.match(method, path)[0].map(([route]) => route);
    return (found.find((r) => r.method === method) ?? found[0])?.name ?? null;
  };
}

/**
 * One line per request: request id (also answered as X-Request-Id; a well-formed incoming one is
 * kept), the declared route ("POST /api/lender/screen"), status, latency, and for a paid call the
 * payer and the units charged (from `c.var.billing`). No header value is ever logged.
 */
export function requestLog(
  logger: Logger,
  routes: readonly { method: string; path: string }[],
): MiddlewareHandler<AppEnv> {
  const routeOf = declaredRoute(routes);
  const line: MiddlewareHandler<AppEnv> = async (c, next) => {
    const started = performance.now();
    try {
      await next();
    } finally {
      // Again after the handler: a Response it built itself does not carry headers set before it.
      c.header("X-Request-Id", c.var.requestId);
      // Settled by now: taken, refused (no billing), or never asked for (an unpaid route).
      const billing = await c.get("billing")?.catch(() => undefined);
      const status = c.res?.status ?? 500;
      const line = {
        requestId: c.var.requestId,
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
  return every(requestIds, line);
}
