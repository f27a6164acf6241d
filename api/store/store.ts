import { mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { PGlite } from "@electric-sql/pglite";
import { readMigrationFiles } from "drizzle-orm/migrator";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { migrate as migratePglite } from "drizzle-orm/pglite/migrator";
import { drizzle as drizzlePg } from "drizzle-orm/node-postgres";
import { migrate as migratePg } from "drizzle-orm/node-postgres/migrator";
import pg from "pg";
import type { IndexTarget } from "../../config/target.ts";
import * as schema from "./schema.ts";
import { log } from "../../shared/log.ts";

export type ServiceDb = PgDatabase<PgQueryResultHKT, typeof schema>;

export type ServiceStore = { db: ServiceDb; kind: "pglite" | "postgres"; close: () => Promise<void> };

export type ServiceStoreLocation = { kind: "pglite"; directory: string } | { kind: "postgres"; connectionString: string };

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
const MIGRATIONS = { migrationsFolder: MIGRATIONS_FOLDER, migrationsSchema: schema.SERVICE_SCHEMA, migrationsTable: "__drizzle_migrations" };

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

/** Opens the store and applies the migrations it has not had yet. */
export async function openServiceStore(location: ServiceStoreLocation): Promise<ServiceStore> {
  if (location.kind === "pglite") {
    mkdirSync(location.directory, { recursive: true });
    const client = new PGlite(location.directory);
    const db = drizzlePglite(client, { schema });
    try {
      await baselineLegacyStore(async (text, params) => (await client.query<Record<string, unknown>>(text, params)).rows);
      await migratePglite(db, MIGRATIONS);
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
        await baselineLegacyStore(async (text, params) => (await client.query(text, params)).rows);
        await migratePg(drizzlePg(client), MIGRATIONS);
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

type Query = (text: string, params?: unknown[]) => Promise<Record<string, unknown>[]>;

/**
 * Stores created before migrations (by a hand-written DDL identical to the first migration, same
 * constraint and index names) have the payment table but no journal. Record the first migration
 * as applied so the migrator neither recreates the table nor fails on it; later migrations then
 * apply as usual. The ledger rows stay where they are.
 */
async function baselineLegacyStore(query: Query): Promise<void> {
  const { SERVICE_SCHEMA: s } = schema;
  const table = `"${s}"."${MIGRATIONS.migrationsTable}"`;
  const [state] = await query(
    `select to_regclass($1) is not null as ledger, to_regclass($2) is not null as journal`,
    [`"${s}"."payment"`, table],
  );
  if (!state?.ledger) return;
  if (state.journal && (await query(`select 1 from ${table} limit 1`)).length > 0) return;
  const [first] = readMigrationFiles(MIGRATIONS);
  if (!first) return;
  // The same table drizzle's migrator creates for its journal.
  await query(`create table if not exists ${table} (id serial primary key, hash text not null, created_at bigint)`);
  await query(`insert into ${table} (hash, created_at) values ($1, $2)`, [first.hash, first.folderMillis]);
  log.warn(`[store] ${s}.payment predates migrations: recorded migration ${first.folderMillis} as applied`);
}
