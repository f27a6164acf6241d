import { PGlite } from "@electric-sql/pglite";
import { drizzle as pgDrizzle } from "drizzle-orm/node-postgres";
import { drizzle as pgliteDrizzle } from "drizzle-orm/pglite";
import pg from "pg";
import type { IndexDb } from "../api/db.ts";
import { IndexState, type IndexStateDeps } from "../api/indexing/state.ts";
import { devnetDatabaseUrl } from "../config/target.ts";
import * as schema from "../ponder.schema.ts";
import type { DatabaseSlot } from "./indexer.ts";

/**
 * The API's read path over a slot's indexed tables, in this process (as the API opens them): a
 * drizzle client with the slot's schema on the search path. PGlite admits one process at a time:
 * stop the indexer first.
 */
export async function openIndexDb(
  slot: Pick<DatabaseSlot, "kind" | "env" | "schema">,
): Promise<{ db: IndexDb; close: () => Promise<void> }> {
  if (slot.kind === "pglite") {
    const client = new PGlite(slot.env.PGLITE_DIR!);
    await client.exec(`set search_path to "${slot.schema}"`);
    return {
      db: pgliteDrizzle(client, { schema, casing: "snake_case" }) as unknown as IndexDb,
      close: () => client.close(),
    };
  }
  const pool = new pg.Pool({
    connectionString: devnetDatabaseUrl(slot.env.DATABASE_URL!),
    max: 4,
    options: `-c search_path="${slot.schema}"`,
  });
  // A connection still closing when its database is dropped (WITH (FORCE)) reports FATAL 57P01 on
  // the pool after pool.end() has resolved: nothing is lost, and unheard it would crash the process.
  pool.on("error", () => {});
  return { db: pgDrizzle(pool, { schema, casing: "snake_case" }) as unknown as IndexDb, close: () => pool.end() };
}

/**
 * The readiness gate of a benchmark that stops the indexer before it times paid calls: its reads
 * (the checkpoint, the chain head) are made and timed as in production, but no lag refuses a call.
 */
export const stoppedIndexerState = (deps: Omit<IndexStateDeps, "maxLagBlocks">) =>
  new IndexState({ ...deps, maxLagBlocks: Number.MAX_SAFE_INTEGER });

/** A readiness gate that lets every call through: for apps with no index behind them, or a benchmark of what lies behind the gate. */
export const alwaysCurrent = {
  status: async () => ({
    ready: true,
    current: true,
    startBlock: 0,
    indexedBlock: null,
    headBlock: null,
    lagBlocks: 0,
    maxLagBlocks: 0,
    percent: 100,
    blocksPerSecond: null,
    etaSeconds: 0,
  }),
} as unknown as IndexState;
