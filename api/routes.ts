import type { OpenAPIHono, RouteConfig, RouteHandler } from "@hono/zod-openapi";
import type { PublicClient } from "viem";
import type { IndexTarget } from "../config/target.ts";
import { analyzeHandler, analyzeRoute } from "./analyze/route.ts";
import type { Conversations } from "./chat/conversations.ts";
import { chatHandler, chatRoute } from "./chat/route.ts";
import {
  creditStatementHandler,
  creditStatementRoute,
  purchaseHandler,
  purchaseRoute,
  reissueTokenHandler,
  reissueTokenRoute,
  revokeTokensHandler,
  revokeTokensRoute,
} from "./credit/routes.ts";
import type { IndexDb } from "./db.ts";
import { llmsHandler, llmsRoute, wellKnownHandler, wellKnownRoute } from "./discovery/routes.ts";
import { healthHandler, healthRoute } from "./health/route.ts";
import type { AppEnv } from "./http/app-env.ts";
import { mount } from "./http/mount.ts";
import type { IndexState } from "./indexing/state.ts";
import type { IpfsNode } from "./ipfs/node.ts";
import { ipfsHandler, ipfsRoute } from "./ipfs/route.ts";
import { mcpHandler, mcpRoute } from "./mcp/route.ts";
import {
  createMonitorsHandler,
  createMonitorsRoute,
  deleteMonitorHandler,
  deleteMonitorRoute,
  listEndpointsHandler,
  listEndpointsRoute,
  listMonitorsHandler,
  listMonitorsRoute,
  monitorEventsHandler,
  monitorEventsRoute,
  readMonitorHandler,
  readMonitorRoute,
  recoverEndpointHandler,
  recoverEndpointRoute,
  renewMonitorHandler,
  renewMonitorRoute,
  rotateEndpointHandler,
  rotateEndpointRoute,
} from "./monitors/routes.ts";
import { openApiHandler, openApiRoute } from "./openapi/route.ts";
import { reportHandler, reportRoute } from "./passport/report-route.ts";
import type { ReporterClient } from "./passport/reporter.ts";
import { verifyHandler, verifyRoute } from "./passport/verify-route.ts";
import type { PaymentCore } from "./payments/core.ts";
import { screenBatchHandler, screenBatchRoute } from "./screen/batch-route.ts";
import { screenHandler, screenRoute } from "./screen/route.ts";
import { statementHandler, statementRoute } from "./statement/route.ts";
import { statsHandler, statsRoute } from "./stats/route.ts";
import type { ServiceDb } from "./store/store.ts";
import type { WalletAssessor } from "./wallet/assess.ts";
import {
  analysisHandler,
  analysisRoute,
  historyHandler,
  historyRoute,
  signalHandler,
  signalRoute,
  signalsHandler,
  signalsRoute,
} from "./wallet/routes.ts";
import { configHandler, configRoute } from "./x402/config-route.ts";

/** What handlers are built from. */
export type RouteDeps = {
  db: IndexDb;
  target: Pick<IndexTarget, "network" | "tokens" | "tracked" | "schema" | "reporters" | "sanctions"> &
    Partial<Pick<IndexTarget, "startBlock">>;
  /** Reads the chain head (index state, stats and health); never on a screening path. */
  chain?: Pick<PublicClient, "getBlock">;
  payments: PaymentCore;
  /** The service's IPFS node (passports, statements), opened by the host. */
  ipfs: Promise<IpfsNode>;
  /** Our reporter contract through the reporter key (passports); absent: the report route answers 503. */
  reporter?: ReporterClient;
  /** The service store (statements, what each pinned CID is); routes that need it fail without it. */
  store?: Promise<ServiceDb>;
  assessor: WalletAssessor;
  /** Where indexing stands (api/indexing/state.ts): paid routes refuse while it is not current. */
  index: IndexState;
  /** Chat conversations (the service store); in memory when not given. */
  conversations?: Conversations;
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
  served(screenBatchRoute, screenBatchHandler),
  served(analyzeRoute, analyzeHandler),
  served(chatRoute, chatHandler),
  served(analysisRoute, analysisHandler),
  served(signalsRoute, signalsHandler),
  served(signalRoute, signalHandler),
  served(historyRoute, historyHandler),
  served(reportRoute, reportHandler),
  served(verifyRoute, verifyHandler),
  served(statementRoute, statementHandler),
  served(ipfsRoute, ipfsHandler),
  // The monitors' fixed paths before /api/monitors/{id}, which would match them too (the first registered answers).
  served(createMonitorsRoute, () => createMonitorsHandler),
  served(listMonitorsRoute, () => listMonitorsHandler),
  served(monitorEventsRoute, () => monitorEventsHandler),
  served(listEndpointsRoute, () => listEndpointsHandler),
  served(rotateEndpointRoute, () => rotateEndpointHandler),
  served(recoverEndpointRoute, () => recoverEndpointHandler),
  served(renewMonitorRoute, () => renewMonitorHandler),
  served(readMonitorRoute, () => readMonitorHandler),
  served(deleteMonitorRoute, () => deleteMonitorHandler),
  served(purchaseRoute, () => purchaseHandler),
  served(creditStatementRoute, () => creditStatementHandler),
  served(reissueTokenRoute, () => reissueTokenHandler),
  served(revokeTokensRoute, () => revokeTokensHandler),
  served(statsRoute, statsHandler),
  served(configRoute, configHandler),
  served(healthRoute, healthHandler),
  served(openApiRoute, ({ app }) => openApiHandler(app)),
  served(mcpRoute, ({ app }) => mcpHandler(app)),
  served(wellKnownRoute, wellKnownHandler),
  served(llmsRoute, llmsHandler),
];
