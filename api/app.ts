import { Hono } from "hono";
import { analyzeRoutes } from "./analyze/route.ts";
import { healthRoutes } from "./health/route.ts";
import { errorBody, handleError } from "./http/errors.ts";
import { openApiRoutes } from "./openapi/route.ts";
import type { Payments } from "./payments/payments.ts";
import { paymentConfigRoutes } from "./payments/route.ts";
import { screenRoutes } from "./screen/route.ts";
import { type StatsDeps, statsRoutes } from "./stats/route.ts";
import { WalletAssessor } from "./wallet/assess.ts";
import { walletRoutes } from "./wallet/routes.ts";

export type AppDeps = StatsDeps & { payments: Payments };

/** The HTTP service, independent of how it is hosted (Ponder's server in production, tests directly). */
export function createApp(deps: AppDeps) {
  const app = new Hono();
  const assessor = new WalletAssessor(deps);
  const routeDeps = { ...deps, assessor };
  app.route("/api/stats", statsRoutes(deps));
  app.route("/api/x402", paymentConfigRoutes(deps.payments.settings, deps.payments.facilitator));
  app.route("/api/health", healthRoutes(deps));
  app.route("/api", openApiRoutes());
  app.route("/api/lender", screenRoutes(routeDeps));
  app.route("/api/wallet", walletRoutes(routeDeps));
  app.route("/api/agent", analyzeRoutes(routeDeps));
  app.notFound((c) => c.json(errorBody("not_found", `No route ${c.req.method} ${c.req.path}.`), 404));
  app.onError(handleError);
  return app;
}
