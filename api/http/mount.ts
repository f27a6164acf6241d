import type { OpenAPIHono, RouteConfig, RouteHandler } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import { every } from "hono/combine";
import type { AppEnv } from "./app-env.ts";

const firstSteps = new WeakMap<RouteConfig, MiddlewareHandler<AppEnv>>();

/** A step that must run before the request is validated (the unpaid probe's 402: api/http/probe.ts). */
export function beforeValidation<R extends RouteConfig>(route: R, step: MiddlewareHandler<AppEnv>): R {
  firstSteps.set(route, step);
  return route;
}

/**
 * Serves a declared route: its OpenAPI entry and validators, then the route's own middleware, then
 * the handler. zod-openapi runs route middleware before validation; ours (the indexed-wallet check,
 * payment) must see the validated request, so that bad input is refused before any payment.
 */
export function mount<R extends RouteConfig>(app: OpenAPIHono<AppEnv>, route: R, handler: RouteHandler<R, AppEnv>) {
  const { middleware, ...declared } = route;
  const chain = [middleware ?? []].flat() as MiddlewareHandler<AppEnv>[];
  const run: MiddlewareHandler<AppEnv> = async (c) => (await handler(c as never, async () => {})) as Response;
  const first = firstSteps.get(route);
  app.openapi(
    { ...declared, ...(first ? { middleware: first } : {}) } as R,
    (async (c: Parameters<MiddlewareHandler<AppEnv>>[0]) => {
      await every(...chain, run)(c, async () => {});
      return c.res;
    }) as never,
  );
}
