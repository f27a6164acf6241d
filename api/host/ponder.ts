import { existsSync, readFileSync } from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import { join } from "node:path";
import type { Hono } from "hono";
import type { Hex } from "viem";
import { log } from "../../shared/log.ts";
import { answerClientErrorsAsJson } from "../http/client-errors.ts";
import {
  answerDataPathNotFound,
  isDataPath,
  isDataServer,
  opensDataListener,
  startDataListener,
} from "../http/data-listener.ts";
import { answerProbe } from "../http/probes.ts";
import type { IndexState } from "../indexing/state.ts";
import { holdRelayerLock } from "../payments/relayer-lock.ts";
import { type GracefulShutdown, shutdownGracefully, trackServer } from "./shutdown.ts";

/**
 * Everything the service does to live under Ponder, in one place: the app itself (api/app.ts)
 * knows nothing of Ponder. Ponder loads src/api/index.ts, then creates its HTTP server with
 * `http.createServer`; one wrapper of that function (installed here) puts the probes, the data
 * paths' 404 and the JSON client errors in front of Ponder's handler and tracks the server for the
 * graceful shutdown, which takes over Ponder's signal handlers. Ponder's private globals are read
 * here only. Each of these leans on Ponder's internals, hence the version check.
 */

/** The Ponder release this module was written and tested against. */
export const PONDER_VERSION = "0.17.7";

/** What to check in a new Ponder before PONDER_VERSION is moved to it. */
const WHAT_TO_CHECK = [
  "its server is still made by http.createServer, after the API module loaded (server/index.js)",
  "it still answers /health, /ready and /metrics itself before the app",
  "globalThis.PONDER_COMMON (options.command, metrics) and PONDER_NAMESPACE_BUILD (schema) still exist",
  "its SIGTERM/SIGINT handlers are installed before the API module loads and close the server, then exit",
  "its build still reads vite.config.ts and runs src/ through vite-node 1.0.2's ViteNodeServer, its shouldExternalize and _transformRequest as they were (api/host/ponder-build.ts)",
  "its metrics still sample the event loop through perf_hooks.monitorEventLoopDelay, and how often (api/host/event-loop-monitor.mjs)",
];

/** The directory of the `ponder` package this process resolves (its package.json is not exported, so not resolvable itself). */
export function installedPonderDirectory(): string | undefined {
  return createRequire(import.meta.url)
    .resolve.paths("ponder")
    ?.map((dir) => join(dir, "ponder"))
    .find((dir) => existsSync(join(dir, "package.json")));
}

/** The version of the `ponder` package this process resolves, read from its package.json. */
export function installedPonderVersion(): string | undefined {
  const dir = installedPonderDirectory();
  return dir ? (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { version: string }).version : undefined;
}

class PonderVersionMismatch extends Error {
  override name = "PonderVersionMismatch";
  constructor(installed: string | undefined) {
    super(
      `api/host/ponder.ts was written for Ponder ${PONDER_VERSION}, but Ponder ${installed ?? "(not found)"} is installed. ` +
        `Check in the new version that ${WHAT_TO_CHECK.join("; that ")}; then set PONDER_VERSION to ${installed ?? "it"}.`,
    );
  }
}

/** Throws PonderVersionMismatch unless `installed` is the version this module was written for. */
export function checkPonderVersion(installed = installedPonderVersion()): void {
  if (installed !== PONDER_VERSION) throw new PonderVersionMismatch(installed);
}

// Ponder's own globals (build/index.js sets them before it loads the API module).
type PonderGlobals = {
  PONDER_COMMON?: { options: { command: string }; metrics: { getMetrics: () => Promise<string> } };
  PONDER_NAMESPACE_BUILD?: { schema: string };
};
const ponder = globalThis as PonderGlobals;

/** The Ponder command running this process: "start", "dev", "serve"… (undefined outside Ponder). */
const ponderCommand = (): string | undefined => ponder.PONDER_COMMON?.options.command;

/** Whether this process indexes (`ponder start`, `dev`), not a replica serving another's tables (`ponder serve`). */
export const indexesHere = (): boolean => ponderCommand() !== "serve";

/** The database schema Ponder indexes into or serves from, when Ponder says. */
export const ponderSchema = (): string | undefined => ponder.PONDER_NAMESPACE_BUILD?.schema;

/** Ponder's Prometheus metrics, as its /metrics would answer them. */
export const ponderMetrics = (): Promise<string> => ponder.PONDER_COMMON!.metrics.getMetrics();

export type PonderHost = {
  /** Where indexing stands: /health and /ready answer from it (the newest one after `ponder dev` reloads). */
  index: IndexState;
  shutdown: GracefulShutdown;
  /** The data listener (GraphQL, SQL, metrics): opened when `setting` says so, else in the indexer only. */
  data: { setting: "on" | "off" | undefined; app: () => { fetch: Hono["fetch"] }; port: number; host: string };
  /** A self-settling process on Postgres holds its relayer's lock; without it the process exits. */
  relayer?: { connectionString: string; address: Hex };
};

/**
 * Installs the service under Ponder: call once while src/api/index.ts loads. Throws on another
 * Ponder version; on a relayer key another process holds, exits (1) with the reason.
 */
export function hostOnPonder(host: PonderHost): void {
  checkPonderVersion();
  shutdownGracefully(host.shutdown);
  hookServers(host.index);
  if (opensDataListener(host.data.setting, ponderCommand())) {
    void startDataListener(host.data.app(), { port: host.data.port, host: host.data.host }).catch(() => {}); // logged by the listener
  }
  if (host.relayer) {
    holdRelayerLock(host.relayer.connectionString, host.relayer.address).catch((error: Error) => {
      log.fatal(`[payments] ${error.message}`);
      process.exit(1);
    });
  }
}

const HOOKS = Symbol.for("celo-reputation.ponderServerHooks");
type Hooks = { index: IndexState };

/**
 * The one wrapper of http.createServer: every server created from now on (Ponder's, which it
 * creates after loading the API module, and the data listener) answers client errors as JSON and
 * is tracked for the graceful shutdown. In front of the handler of every server but the data
 * listener: the data paths answer a JSON 404, then /health and /ready answer from the index.
 */
function hookServers(index: IndexState): void {
  const create = http.createServer as typeof http.createServer & { [HOOKS]?: Hooks };
  // `ponder dev` reloads the API module: the newest index state answers.
  if (create[HOOKS]) return void (create[HOOKS].index = index);
  const hooks: Hooks = { index };
  const wrapped = ((...args: unknown[]) => {
    const at = args.findIndex((a) => typeof a === "function");
    if (at >= 0 && !isDataServer(args[0])) {
      const handler = args[at] as http.RequestListener;
      args[at] = (req: http.IncomingMessage, res: http.ServerResponse) => {
        if (isDataPath(req.url)) return answerDataPathNotFound(req, res);
        if (!answerProbe(req, res, hooks.index, handler)) handler(req, res);
      };
    }
    const server = (create as (...a: unknown[]) => http.Server)(...args);
    trackServer(server);
    answerClientErrorsAsJson(server);
    return server;
  }) as typeof http.createServer;
  http.createServer = Object.assign(wrapped, { [HOOKS]: hooks });
}
