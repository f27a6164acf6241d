import { OpenAPIHono } from "@hono/zod-openapi";
import { readEnv } from "../config/env.ts";
import type { IndexTarget } from "../config/target.ts";
import { type Logger, log } from "../shared/log.ts";
import type { AppEnv } from "./http/app-env.ts";
import { registerPaymentSchemes } from "./http/declare.ts";
import { handleError } from "./http/errors.ts";
import { limitBody, unrouted } from "./http/limits.ts";
import { requestLog } from "./http/log.ts";
import { freeRateLimit, freeRateLimiter } from "./http/rate-limit.ts";
import { validationHook } from "./http/validation.ts";
import { IndexState } from "./indexing/state.ts";
import { type MonitorSettings, monitorSettings } from "./monitors/settings.ts";
import { docsRoutes } from "./openapi/docs.ts";
import { OPENAPI_ALIAS, openApiHandler } from "./openapi/route.ts";
import { BADGE_PATH, badgeHandler } from "./passport/verify-route.ts";
import { signInFor } from "./payments/sign-in.ts";
import { ROUTES, type RouteDeps } from "./routes.ts";
import { WalletAssessor } from "./wallet/assess.ts";

/** What the host hands the app: everything handlers are built from, less what the app makes itself. */
export type AppDeps = Omit<RouteDeps, "assessor" | "routes" | "app" | "index"> & {
  /** Where indexing stands; by default read from `db` and the chain head (`chain`, else the chain payments settle on), with `maxLagBlocks`. */
  index?: IndexState;
  /** How far behind the chain head a current index may be, for the default `index`: MAX_LAG_BLOCKS when not given. */
  maxLagBlocks?: number;
  /** The free routes' requests a minute per client: FREE_RATE_LIMIT_PER_MINUTE when not given. */
  freeRateLimitPerMinute?: number;
  /** Where the service's data lives (the API entry passes it). */
  target: RouteDeps["target"] & Partial<Pick<IndexTarget, "database">>;
  /** The JSON request log (pino); the process's logger (LOG_LEVEL) when not given. */
  logger?: Logger;
  /** The monitors' limits and SSRF setting; from the environment when not given (their store is `store`). */
  monitorSettings?: MonitorSettings;
};

/**
 * The HTTP service, independent of how it is hosted (Ponder's server in production, tests
 * directly). No side effects: what the process must do around it (server hooks, signals, the
 * relayer lock, the data listener) is the host's (api/host/ponder.ts).
 */
export function createApp(deps: AppDeps) {
  // The sign-in origin is configuration (SIGN_IN_ORIGIN, required on live Celo): checked at start, not at the first 402.
  signInFor(deps.payments);
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  const assessor = new WalletAssessor(deps);
  const index =
    deps.index ??
    new IndexState({
      ...deps,
      chain: deps.chain ?? deps.payments.chain,
      maxLagBlocks: deps.maxLagBlocks ?? readEnv().MAX_LAG_BLOCKS,
    });
  const monitors = { store: deps.store, settings: deps.monitorSettings ?? monitorSettings() };
  const freeLimit = freeRateLimiter(deps.freeRateLimitPerMinute);
  const routes = ROUTES.map((r) => r.route);
  app.use(
    requestLog(deps.logger ?? log, [
      ...routes,
      { method: "get", path: OPENAPI_ALIAS },
      { method: "get", path: "/api/agent/verify/{id}/badge.svg" },
      { method: "get", path: "/docs" },
      { method: "get", path: "/docs/scalar.js" },
    ]),
  );
  app.use(async (c, next) => {
    c.set("payments", deps.payments);
    c.set("assessor", assessor);
    c.set("index", index);
    c.set("monitors", monitors);
    c.set("freeLimit", freeLimit);
    await next();
  });
  app.use("/api/*", limitBody);
  app.use("/mcp", limitBody);

  for (const served of ROUTES) served.mount(app, { ...deps, assessor, index, routes, app });
  app.get(OPENAPI_ALIAS, freeRateLimit, openApiHandler(app) as never);
  app.use("/docs", freeRateLimit);
  app.use("/docs/*", freeRateLimit);
  app.route("/docs", docsRoutes());
  app.get(BADGE_PATH, badgeHandler({ ...deps, assessor }));
  registerPaymentSchemes(app.openAPIRegistry);

  // GraphQL, SQL over HTTP and /metrics are served on the data listener only (api/data/app.ts).
  // Last: whatever no route answered (Ponder's own /status, /ready… are matched before this app).
  app.all("*", unrouted([...routes, { method: "get", path: OPENAPI_ALIAS }]));
  app.onError(handleError);
  return app;
}
