import type { OpenAPIHono, RouteConfig, RouteHandler } from "@hono/zod-openapi";
import type { PublicClient } from "viem";
import type { IndexTarget } from "../config/target.ts";
import { analyzeHandler, analyzeRoute } from "./analyze/route.ts";
import type { IndexDb } from "./db.ts";
import type { AppEnv } from "./http/env.ts";
import { mount } from "./http/mount.ts";
import { healthHandler, healthRoute } from "./health/route.ts";
import { openApiHandler, openApiRoute } from "./openapi/route.ts";
import { configHandler, configRoute } from "./payments/config-route.ts";
import type { IpfsNode } from "./ipfs/node.ts";
import type { PaymentCore } from "./payments/core.ts";
import { screenHandler, screenRoute } from "./screen/route.ts";
import { statsHandler, statsRoute } from "./stats/route.ts";
import type { WalletAssessor } from "./wallet/assess.ts";
import { analysisHandler, analysisRoute, historyHandler, historyRoute, signalHandler, signalRoute, signalsHandler, signalsRoute } from "./wallet/routes.ts";

/** What handlers are built from. */
export type RouteDeps = {
  db: IndexDb;
  target: Pick<IndexTarget, "network" | "tokens" | "tracked" | "schema" | "reporters">;
  chain?: Pick<PublicClient, "getBlock">;
  payments: PaymentCore;
  ipfs: Promise<IpfsNode>;
  assessor: WalletAssessor;
  routes: readonly RouteConfig[];
  app: OpenAPIHono<AppEnv>;
};

const served = <R extends RouteConfig>(route: R, handler: (deps: RouteDeps) => RouteHandler<R, AppEnv>) => ({
  route,
  mount: (app: OpenAPIHono<AppEnv>, deps: RouteDeps) => mount(app, route, handler(deps)),
});

/** Every route the service serves: its declaration and its handler. A new route is one line here. */
export const ROUTES = [
  served(screenRoute, screenHandler),
  served(analyzeRoute, analyzeHandler),
  served(analysisRoute, analysisHandler),
  served(signalsRoute, signalsHandler),
  served(signalRoute, signalHandler),
  served(historyRoute, historyHandler),
  served(statsRoute, statsHandler),
  served(configRoute, configHandler),
  served(healthRoute, healthHandler),
  served(openApiRoute, ({ app }) => openApiHandler(app)),
];
