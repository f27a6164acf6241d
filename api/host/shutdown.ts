import type http from "node:http";
import net from "node:net";
import { log } from "../../shared/log.ts";

export type GracefulShutdown = {
  /** How long, at most, the service finishes its work after the signal before the host's own shutdown runs. */
  limitMs: number;
  /**
   * Called on the signal, once the servers stopped listening: stop background work, refuse new
   * work, and resolve when the work in flight is done or `deadline` (epoch ms) has passed.
   */
  drain: (deadline: number) => Promise<void>;
  /** Called after the in-flight HTTP requests ended (or the deadline passed), before the host's shutdown: close stores. */
  close?: () => Promise<void>;
};

const SIGNALS = ["SIGTERM", "SIGINT"] as const;

type State = {
  servers: Set<http.Server>;
  /** HTTP requests whose response has not finished (or whose connection has not closed). */
  inflight: number;
  shuttingDown: boolean;
  options?: GracefulShutdown;
};

// One state per process, whatever the number of times the module is loaded (`ponder dev` reloads the API).
const KEY = Symbol.for("celo-reputation.gracefulShutdown");
const globals = globalThis as { [KEY]?: State };

/**
 * Graceful shutdown under a host that installs its own signal handlers and exits soon after them.
 * Ponder 0.17 does: on SIGTERM/SIGINT it cuts HTTP connections after 1 s (http-terminator's
 * gracefulTerminationTimeout), closes its database and calls process.exit within 5 s, whatever
 * requests are still settling their payments.
 *
 * Call it while the API module loads, after the host installed its signal handlers (Ponder does
 * that first thing), and hand it every HTTP server (`trackServer`, from api/host/ponder.ts's one
 * wrapper of http.createServer). Then the host's SIGTERM and SIGINT handlers are taken over. On
 * the signal, the servers stop listening (new connections are refused; requests on open
 * connections are still served, with `connection: close`), `drain` runs, the requests in flight
 * finish, all within `limitMs`; only then do the host's handlers run (Ponder: its own shutdown, at
 * most 5 s more, then exit). A second signal while shutting down changes nothing (a terminal's
 * Ctrl-C reaches both the launcher, which forwards it, and Ponder).
 */
export function shutdownGracefully(options: GracefulShutdown): void {
  const installed = globals[KEY];
  if (installed) {
    installed.options = options; // a reloaded API module: its own payments and stores
    return;
  }
  const state: State = { servers: new Set(), inflight: 0, shuttingDown: false, options };
  globals[KEY] = state;

  for (const signal of SIGNALS) {
    const host = process.listeners(signal);
    for (const listener of host) process.removeListener(signal, listener);
    process.on(signal, () => {
      if (state.shuttingDown) return void log.warn(`[api] ${signal}: already shutting down`);
      state.shuttingDown = true;
      void shutDown(signal, state).finally(() => {
        if (host.length === 0) process.exit(0);
        for (const listener of host) (listener as (s: NodeJS.Signals) => void).call(process, signal);
      });
    });
  }
}

/** Tracks a server's requests in flight for the graceful shutdown (nothing before shutdownGracefully ran). */
export function trackServer(server: http.Server): void {
  const state = globals[KEY];
  if (state) track(server, state);
}

function track(server: http.Server, state: State) {
  state.servers.add(server);
  server.on("request", (_req: http.IncomingMessage, res: http.ServerResponse) => {
    state.inflight++;
    res.once("close", () => state.inflight--);
    if (state.shuttingDown && !res.headersSent) res.setHeader("connection", "close");
  });
  // The host closes the server again in its own shutdown: that must not fail because we closed it first.
  const close = server.close.bind(server);
  server.close = ((callback?: (error?: Error) => void) => {
    if (server.listening) return close(callback);
    if (callback) setImmediate(() => callback());
    return server;
  }) as typeof server.close;
}

async function shutDown(signal: NodeJS.Signals, state: State) {
  const options = state.options!;
  const started = Date.now();
  const deadline = started + options.limitMs;
  // Stop listening only: http.Server#close would also drop the connections it deems idle, which
  // include those whose request has arrived but not been read yet (a busy event loop).
  for (const server of state.servers) if (server.listening) net.Server.prototype.close.call(server);
  log.warn(
    `[api] ${signal}: not accepting new connections; finishing ${state.inflight} requests in flight (at most ${options.limitMs / 1000} s)`,
  );
  try {
    await options.drain(deadline);
  } catch (error) {
    log.error(`[api] shutdown: draining failed: ${(error as Error).message}`);
  }
  while (state.inflight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  if (state.inflight > 0)
    log.warn(
      `[api] shutdown: ${state.inflight} requests still open after ${options.limitMs / 1000} s; handing over to the host's shutdown`,
    );
  try {
    await Promise.race([options.close?.(), new Promise((r) => setTimeout(r, 2_000))]);
  } catch (error) {
    log.error(`[api] shutdown: closing failed: ${(error as Error).message}`);
  }
  log.warn(`[api] shutdown: drained in ${Date.now() - started} ms`);
}
