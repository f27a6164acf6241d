import { PGlite } from "@electric-sql/pglite";
import { drizzle as pgliteDrizzle } from "drizzle-orm/pglite";
import { drizzle as pgDrizzle } from "drizzle-orm/node-postgres";
import pg from "pg";
import type { IndexDb } from "../api/db.ts";
import { devnetDatabaseUrl } from "../config/target.ts";
import * as schema from "../ponder.schema.ts";
import type { DatabaseSlot } from "./indexer.ts";

/**
 * The API's read path over a slot's indexed tables, in this process (as the API opens them): a
 * drizzle client with the slot's schema on the search path. PGlite admits one process at a time:
 * stop the indexer first.
 */
export async function openIndexDb(slot: Pick<DatabaseSlot, "kind" | "env" | "schema">): Promise<{ db: IndexDb; close: () => Promise<void> }> {
  if (slot.kind === "pglite") {
    const client = new PGlite(slot.env.PGLITE_DIR!);
    await client.exec(`set search_path to "${slot.schema}"`);
    return { db: pgliteDrizzle(client, { schema, casing: "snake_case" }) as unknown as IndexDb, close: () => client.close() };
  }
  const pool = new pg.Pool({ connectionString: devnetDatabaseUrl(slot.env.DATABASE_URL!), max: 4, options: `-c search_path="${slot.schema}"` });
  pool.on("error", () => {});
  return { db: pgDrizzle(pool, { schema, casing: "snake_case" }) as unknown as IndexDb, close: () => pool.end() };
}
