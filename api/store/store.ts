import { mkdirSync } from "node:fs";
import { PGlite } from "@electric-sql/pglite";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { drizzle as drizzlePg } from "drizzle-orm/node-postgres";
import pg from "pg";
import type { IndexTarget } from "../../config/target.ts";
import * as schema from "./schema.ts";

export type ServiceDb = PgDatabase<PgQueryResultHKT, typeof schema>;

export type ServiceStore = { db: ServiceDb; kind: "pglite" | "postgres"; close: () => Promise<void> };

export type ServiceStoreLocation = { kind: "pglite"; directory: string } | { kind: "postgres"; connectionString: string };

/**
 * Where the service store lives for an index target: beside the indexer's data, apart from it.
 * Postgres: schema `service` in the indexer's database (so devnet payments stay in the devnet
 * database). PGlite: a directory of its own next to the indexer's, `<pglite dir>-service`.
 */
export function serviceStoreLocation(database: IndexTarget["database"]): ServiceStoreLocation {
  return database.kind === "postgres" ? database : { kind: "pglite", directory: `${database.directory}-service` };
}

/** Opens the store and creates its tables if they are missing. */
export async function openServiceStore(location: ServiceStoreLocation): Promise<ServiceStore> {
  if (location.kind === "pglite") {
    mkdirSync(location.directory, { recursive: true });
    const client = new PGlite(location.directory);
    await client.exec(schema.SERVICE_DDL);
    return { db: drizzlePglite(client, { schema }) as unknown as ServiceDb, kind: "pglite", close: () => client.close() };
  }
  const pool = new pg.Pool({ connectionString: location.connectionString, max: 10 });
  // An idle connection the server closes (restart, failover) is replaced on next use; without a
  // listener its error would crash the process.
  pool.on("error", (error) => console.warn(`[store] idle connection lost: ${error.message}`));
  // Replicas may start together: a lock keeps their CREATE ... IF NOT EXISTS from racing.
  const client = await pool.connect();
  try {
    await client.query("select pg_advisory_lock(4202200001)");
    await client.query(schema.SERVICE_DDL);
    await client.query("select pg_advisory_unlock(4202200001)");
  } finally {
    client.release();
  }
  return { db: drizzlePg(pool, { schema }) as unknown as ServiceDb, kind: "postgres", close: () => pool.end() };
}
