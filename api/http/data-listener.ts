import http from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import type { Hono } from "hono";
import { errorBody } from "../../shared/errors.ts";

/**
 * Paths served only on the data listener (GraphQL, SQL over HTTP, Prometheus metrics): the indexed
 * tables in bulk and the process's internals, for the operator's own data team. On every other
 * server of the process (the public API) they answer a JSON 404, as any path no route serves.
 */
const DATA_PATHS = ["/graphql", "/sql", "/metrics"] as const;

export function isDataPath(url: string | undefined): boolean {
  const path = (url ?? "/")
    .split("?")[0]!
    .replace(/\/{2,}/g, "/")
    .toLowerCase();
  let decoded = path;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    /* malformed escapes: match the raw path */
  }
  return DATA_PATHS.some((p) => decoded === p || decoded.startsWith(`${p}/`));
}

/** Marks the data listener's server options, so that the host's server hooks tell it from the public server. */
const DATA_SERVER = Symbol.for("celo-reputation.dataServer");

/** Whether http.createServer's options are the data listener's. */
export const isDataServer = (options: unknown): boolean =>
  typeof options === "object" && options !== null && DATA_SERVER in options;

/** On every server but the data listener (the host puts this in front of its handler): the data paths answer a JSON 404. */
export function answerDataPathNotFound(req: http.IncomingMessage, res: http.ServerResponse) {
  const path = (req.url ?? "/").split("?")[0];
  const body = JSON.stringify(errorBody("not_found", `No route ${req.method} ${path}.`));
  res.writeHead(404, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

/**
 * Whether this process opens the data listener: as DATA_LISTENER says, else only the indexer
 * (`ponder start`, `ponder dev`). A replica (`ponder serve`) serves the same tables the indexer's
 * listener does, and replicas on one host would all claim one DATA_PORT.
 */
export function opensDataListener(setting: "on" | "off" | undefined, ponderCommand: string | undefined): boolean {
  return setting ? setting === "on" : ponderCommand !== "serve";
}

export type DataListener = { url: string; port: number; close: () => Promise<void> };

// One listener per process: `ponder dev` reloads the API module, the new app replaces the old one.
const KEY = Symbol.for("celo-reputation.dataListener");
const globals = globalThis as {
  [KEY]?: { server: http.Server; app: { fetch: Hono["fetch"] }; ready: Promise<DataListener> };
};

/**
 * The data listener: a second HTTP server in the API's process (so it works on PGlite, whose
 * database only this process may open), bound to `host` (default 127.0.0.1). Port 0 takes a free
 * port; the URL is logged as `[data] listening on http://…` and returned.
 */
export function startDataListener(
  app: { fetch: Hono["fetch"] },
  options: { port: number; host: string },
): Promise<DataListener> {
  const existing = globals[KEY];
  if (existing) {
    existing.app = app;
    return existing.ready;
  }
  let resolveReady!: (listener: DataListener) => void;
  let rejectReady!: (error: Error) => void;
  const ready = new Promise<DataListener>((resolve, reject) => {
    resolveReady = resolve;
    rejectReady = reject;
  });
  const state = { app, ready } as NonNullable<(typeof globals)[typeof KEY]>;
  const server = serve(
    {
      fetch: (request, env) => state.app.fetch(request, env),
      hostname: options.host,
      port: options.port,
      serverOptions: { [DATA_SERVER]: true } as http.ServerOptions,
      createServer: http.createServer,
    },
    (info: AddressInfo) => {
      const host = info.family === "IPv6" ? `[${info.address}]` : info.address;
      const url = `http://${host}:${info.port}`;
      console.log(`[data] listening on ${url} (GraphQL /graphql, SQL over HTTP /sql, Prometheus /metrics)`);
      resolveReady({ url, port: info.port, close: () => new Promise((r) => server.close(() => r())) });
    },
  ) as http.Server;
  server.on("error", (error: Error) => {
    console.error(`[data] cannot listen on ${options.host}:${options.port}: ${error.message}`);
    rejectReady(error);
  });
  state.server = server;
  globals[KEY] = state;
  return ready;
}
