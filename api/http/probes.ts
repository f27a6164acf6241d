import http from "node:http";
import { retryAfterSeconds } from "../indexing/gate.ts";
import type { IndexState } from "../indexing/state.ts";

const PROBES = Symbol.for("celo-reputation.probes");

type Answer = { status: number; body: unknown; headers?: Record<string, string> };

const PROBE_PATHS = new Set(["/health", "/ready"]);

/**
 * Liveness and readiness as a load balancer reads them, in JSON. `/health`: the process answers.
 * `/ready`: 200 only when paid routes answer (the index is complete and current), else 503 with
 * where indexing stands and Retry-After.
 */
async function probe(path: string, index: IndexState): Promise<Answer> {
  if (path === "/health") return { status: 200, body: { status: "ok", checkedAt: new Date().toISOString() } };
  const status = await index.status();
  return status.current ? { status: 200, body: status } : { status: 503, body: status, headers: { "Retry-After": String(retryAfterSeconds(status)) } };
}

/**
 * Ponder serves `/health` and `/ready` itself, before our app, with empty bodies and its own idea
 * of ready (the backfill is done, however far behind the head). Every server created from now on
 * answers those two paths (GET) from `index` instead.
 */
export function answerProbesOnNewServers(index: IndexState): void {
  const create = http.createServer as typeof http.createServer & { [PROBES]?: { index: IndexState } };
  // `ponder dev` reloads this module: the newest index state answers.
  if (create[PROBES]) return void (create[PROBES].index = index);
  const state = { index };
  const wrapped = ((...args: unknown[]) => {
    const at = args.findIndex((a) => typeof a === "function");
    if (at >= 0) {
      const handler = args[at] as http.RequestListener;
      args[at] = (req: http.IncomingMessage, res: http.ServerResponse) => {
        const path = (req.url ?? "/").split("?")[0]!;
        if (!PROBE_PATHS.has(path) || (req.method !== "GET" && req.method !== "HEAD")) return handler(req, res);
        probe(path, state.index).then(
          (answer) => {
            const body = JSON.stringify(answer.body);
            res.writeHead(answer.status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), "cache-control": "no-store", ...answer.headers });
            res.end(req.method === "HEAD" ? undefined : body);
          },
          () => handler(req, res),
        );
      };
    }
    return (create as (...a: unknown[]) => http.Server)(...args);
  }) as typeof http.createServer;
  // Keep what other wrappers marked on the function (client-errors.ts, data-listener.ts check their flags).
  http.createServer = Object.assign(wrapped, create, { [PROBES]: state });
}
