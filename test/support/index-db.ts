import { PGlite } from "@electric-sql/pglite";
import { drizzle as pgDrizzle } from "drizzle-orm/node-postgres";
import { drizzle as pgliteDrizzle } from "drizzle-orm/pglite";
import pg from "pg";
import type { IndexDb } from "../../api/db.ts";
import { devnetDatabaseUrl } from "../../config/target.ts";
import * as schema from "../../ponder.schema.ts";
import type { DatabaseSlot } from "./indexer.ts";

/**
 * The API's read path on a drizzle client over the slot's database, as bench:screen opens it.
 * PGlite admits one process: stop the slot's indexer first.
 */
export async function withIndexDb<T>(slot: DatabaseSlot, fn: (db: IndexDb) => Promise<T>): Promise<T> {
  if (slot.kind === "pglite") {
    const client = new PGlite(slot.env.PGLITE_DIR!);
    try {
      return await fn(pgliteDrizzle(client, { schema, casing: "snake_case" }) as unknown as IndexDb);
    } finally {
      await client.close();
    }
  }
  // A pool, as the API has: the read path runs its statements concurrently.
  const pool = new pg.Pool({ connectionString: devnetDatabaseUrl(slot.env.DATABASE_URL!), max: 4 });
  try {
    return await fn(pgDrizzle(pool, { schema, casing: "snake_case" }) as unknown as IndexDb);
  } finally {
    await pool.end();
  }
}
