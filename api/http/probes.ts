import type http from "node:http";
import { retryAfterSeconds } from "../indexing/gate.ts";
import type { IndexState } from "../indexing/state.ts";

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
  return status.current
    ? { status: 200, body: status }
    : { status: 503, body: status, headers: { "Retry-After": String(retryAfterSeconds(status)) } };
}

/**
 * Ponder serves `/health` and `/ready` itself, before our app, with empty bodies and its own idea
 * of ready (the backfill is done, however far behind the head). The host (api/host/ponder.ts) puts
 * this in front of Ponder's handler: those two paths (GET, HEAD) are answered from `index`; false
 * for any other request, which is left to `fallback`. A failed probe is left to it as well.
 */
export function answerProbe(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  index: IndexState,
  fallback: http.RequestListener,
): boolean {
  const path = (req.url ?? "/").split("?")[0]!;
  if (!PROBE_PATHS.has(path) || (req.method !== "GET" && req.method !== "HEAD")) return false;
  probe(path, index).then(
    (answer) => {
      const body = JSON.stringify(answer.body);
      res.writeHead(answer.status, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
        "cache-control": "no-store",
        ...answer.headers,
      });
      res.end(req.method === "HEAD" ? undefined : body);
    },
    () => fallback(req, res),
  );
  return true;
}
