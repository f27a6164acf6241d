import { mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { PGlite } from "@electric-sql/pglite";
import { drizzle as drizzlePg } from "drizzle-orm/node-postgres";
import { migrate as migratePg } from "drizzle-orm/node-postgres/migrator";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { migrate as migratePglite } from "drizzle-orm/pglite/migrator";
import pg from "pg";
import type { IndexTarget } from "../../config/target.ts";
import { log } from "../../shared/log.ts";
import * as schema from "./schema.ts";

export type ServiceDb = PgDatabase<PgQueryResultHKT, typeof schema>;

export type ServiceStore = { db: ServiceDb; kind: "pglite" | "postgres"; close: () => Promise<void> };

export type ServiceStoreLocation =
  | { kind: "pglite"; directory: string }
  | { kind: "postgres"; connectionString: string };

/**
 * The migrations drizzle-kit generates from schema.ts (`npm run db:generate`), next to this file
 * whatever the working directory or loader (Ponder loads the API through vite-node).
 */
export const MIGRATIONS_FOLDER = fileURLToPath(new URL("./migrations", import.meta.url));

/**
 * drizzle's journal of applied migrations lives in the service schema too (the migrator creates
 * the schema, which is why schema.ts does not export its pgSchema: the first migration would
 * create it a second time).
 */
const MIGRATIONS = {
  migrationsFolder: MIGRATIONS_FOLDER,
  migrationsSchema: schema.SERVICE_SCHEMA,
  migrationsTable: "__drizzle_migrations",
};

/** Serialises replicas that open the same Postgres store at once. */
const MIGRATION_LOCK = 4202200001;

/**
 * Where the service store lives for an index target: beside the indexer's data, apart from it.
 * Postgres: schema `service` in the indexer's database (so devnet payments stay in the devnet
 * database). PGlite: a directory of its own next to the indexer's, `<pglite dir>-service`.
 */
export function serviceStoreLocation(database: IndexTarget["database"]): ServiceStoreLocation {
  return database.kind === "postgres" ? database : { kind: "pglite", directory: `${database.directory}-service` };
}

/** Opens the store and applies the migrations it has not had yet (from `migrationsFolder`: a test opens a store as an earlier release left it). */
export async function openServiceStore(
  location: ServiceStoreLocation,
  migrationsFolder = MIGRATIONS_FOLDER,
): Promise<ServiceStore> {
  const migrations = { ...MIGRATIONS, migrationsFolder };
  if (location.kind === "pglite") {
    mkdirSync(location.directory, { recursive: true });
    const client = new PGlite(location.directory);
    const db = drizzlePglite(client, { schema });
    try {
      await migratePglite(db, migrations);
    } catch (error) {
      await client.close();
      throw error;
    }
    return { db: db as unknown as ServiceDb, kind: "pglite", close: () => client.close() };
  }
  const pool = new pg.Pool({ connectionString: location.connectionString, max: 10 });
  // An idle connection the server closes (restart, failover) is replaced on next use; without a
  // listener its error would crash the process.
  pool.on("error", (error) => log.warn(`[store] idle connection lost: ${error.message}`));
  try {
    // Replicas may start together: one migrates while the others wait on the lock, then find
    // nothing left to apply. Everything runs on the connection that holds the lock.
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      await client.query("select pg_advisory_lock($1)", [MIGRATION_LOCK]);
      try {
        await migratePg(drizzlePg(client), migrations);
      } finally {
        await client.query("select pg_advisory_unlock($1)", [MIGRATION_LOCK]).catch((error: Error) => (broken = error));
      }
    } finally {
      // A connection that may still hold the lock is closed rather than pooled.
      client.release(broken);
    }
  } catch (error) {
    await pool.end();
    throw error;
  }
  return { db: drizzlePg(pool, { schema }) as unknown as ServiceDb, kind: "postgres", close: () => pool.end() };
}
