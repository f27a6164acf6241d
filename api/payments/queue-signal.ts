import { sql } from "drizzle-orm";
import pg from "pg";
import { sleep } from "../../shared/async.ts";
import { log } from "../../shared/log.ts";
import { coalesced } from "../store/coalesce.ts";
import type { ServiceDb } from "../store/store.ts";

/**
 * A deferred answer queued by a process that runs no settlement worker (X402_SETTLEMENT_WORKER=off)
 * wakes the workers of the others at once, as a process's own queued answers wake its own worker,
 * instead of at their next look at the queue (every 500 ms): a Postgres NOTIFY on one channel,
 * LISTENed to by every process that runs a worker. On Postgres only: PGlite is one process's.
 */
const CHANNEL = "x402_payment_queued";

/** How long to wait before listening again after the connection was lost (a Postgres restart). */
const RECONNECT_MS = 1_000;

/**
 * Tells the listening workers that answers were queued: one NOTIFY at a time on the store's own
 * connections, the calls made while it runs served by the next. Never throws: a lost signal only
 * leaves the rows to the workers' next look.
 */
export function queueNotifier(store: Promise<ServiceDb>): () => void {
  const notify = coalesced(async (calls: undefined[]) => {
    await (await store)
      .execute(sql.raw(`notify ${CHANNEL}`))
      .catch((error: Error) =>
        log.warn(`[payments] could not signal queued answers (${error.message}); the workers find them on their own`),
      );
    return calls;
  });
  return () => void notify(undefined);
}

/**
 * Calls `onQueued` whenever another process signals queued answers, on a connection of its own,
 * listened to again when it is lost. `stop` ends it.
 */
export function listenForQueued(connectionString: string, onQueued: () => void): { stop: () => Promise<void> } {
  let stopped = false;
  let client: pg.Client | undefined;
  const listen = async () => {
    for (let warned = false; !stopped; await sleep(RECONNECT_MS)) {
      const next = new pg.Client({ connectionString, application_name: "x402-queue-listener" });
      next.on("error", () => {}); // a lost connection ends the client: 'end' takes it from there
      try {
        await next.connect();
        next.on("notification", () => onQueued());
        await next.query(`listen ${CHANNEL}`);
      } catch (error) {
        await next.end().catch(() => {});
        if (!warned)
          log.warn(`[payments] cannot listen for queued answers yet (${(error as Error).message}); retrying`);
        warned = true;
        continue;
      }
      if (stopped) return void (await next.end().catch(() => {}));
      client = next;
      next.once("end", () => {
        if (stopped || client !== next) return;
        // Answers queued meanwhile were missed: the worker looks now.
        onQueued();
        void listen();
      });
      return;
    }
  };
  void listen();
  return {
    async stop() {
      stopped = true;
      await client?.end().catch(() => {});
    },
  };
}
