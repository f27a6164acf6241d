import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { ApiError } from "../../shared/errors.ts";

/** The largest JSON body any route takes; requests are small (an address or two, a few options). */
export const BODY_LIMIT_BYTES = 16 * 1024;

/**
 * Refuses a body over the limit while it streams in (413), before it is read or parsed. The rest
 * of the body is never read, so the connection cannot carry another request: `Connection: close`
 * tells the client, and the server closes it once the answer is sent.
 */
export const limitBody: MiddlewareHandler = bodyLimit({
  maxSize: BODY_LIMIT_BYTES,
  onError: (c) => {
    c.header("Connection", "close");
    throw new ApiError(
      413,
      "body_too_large",
      `The request body is over ${BODY_LIMIT_BYTES} bytes, the most any route takes.`,
    );
  },
});

/**
 * The answer for a path no route serves with this method: 405 with `Allow` when the path exists
 * under other methods, otherwise 404.
 */
export function unrouted(routes: readonly { method: string; path: string }[]): MiddlewareHandler {
  const patterns = routes.map((r) => ({
    method: r.method.toUpperCase(),
    pattern: new RegExp(`^${r.path.replace(/\{[^}]+\}/g, "[^/]+")}/?$`),
  }));
  return async (c) => {
    const allowed = [...new Set(patterns.filter((p) => p.pattern.test(c.req.path)).map((p) => p.method))];
    // This very method matches only with a trailing slash: no such route (not a 405 naming the method used).
    if (allowed.length === 0 || allowed.includes(c.req.method))
      throw new ApiError(404, "not_found", `No route ${c.req.method} ${c.req.path}.`);
    c.header("Allow", allowed.join(", "));
    throw new ApiError(405, "method_not_allowed", `${c.req.path} answers ${allowed.join(", ")}, not ${c.req.method}.`, {
      allow: allowed,
    });
  };
}
