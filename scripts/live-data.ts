import { existsSync } from "node:fs";
import { PGlite } from "@electric-sql/pglite";
import type { IndexTarget } from "../config/target.ts";
import { guardIndexedSettings } from "./indexed-settings.ts";

/**
 * Prepares live Celo data before Ponder starts: the schema is only resumed with the settings it
 * was indexed with, and on PGlite a backfill stopped part way starts over.
 */
export async function prepareLiveData(target: IndexTarget): Promise<void> {
  if (target.network !== "celo") throw new Error("devnet data is prepared by prepareDevnetData");
  await guardIndexedSettings(target);
  if (await restartInterruptedPgliteBackfill(target))
    console.log("The previous backfill was stopped part way: on PGlite it starts over (the RPC cache is kept).");
}

/**
 * On PGlite, a backfill that was stopped part way is started over instead of resumed.
 *
 * Ponder 0.17 shares PGlite's single session between its indexing transaction and its RPC sync
 * store, whose own BEGIN/COMMIT can commit an indexing batch half done. A stopped backfill can then
 * leave rows past its checkpoint, and resuming fails on a duplicate key. Postgres gives each its own
 * connection, so there a backfill resumes from its checkpoint. The RPC cache (`ponder_sync`) is
 * kept, so starting over refetches nothing on a live chain.
 */
export async function restartInterruptedPgliteBackfill(target: IndexTarget): Promise<boolean> {
  if (target.database.kind !== "pglite" || !existsSync(target.database.directory)) return false;
  const db = new PGlite(target.database.directory);
  try {
    const meta = await db
      .query<{ ready: number }>(
        `select (value->>'is_ready')::int as ready from "${target.schema}"._ponder_meta where key = 'app'`,
      )
      .catch(() => ({ rows: [] as { ready: number }[] })); // no schema yet: nothing to restart
    if (meta.rows[0]?.ready !== 0) return false;
    await db.exec(`drop schema "${target.schema}" cascade`);
    return true;
  } finally {
    await db.close();
  }
}
