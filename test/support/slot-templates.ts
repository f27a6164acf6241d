import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import type { TestProject } from "vitest/node";
import { installedPonderDirectory, installedPonderVersion, PONDER_VERSION } from "../../api/host/ponder.ts";
import { openServiceStore } from "../../api/store/store.ts";
import { POSTGRES_URL } from "../../harness/indexer.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** PGlite: a cluster made once per run, with Ponder's sync tables: slots' index directories start as copies of it. */
    pgliteTemplate: string;
    /** PGlite: an empty cluster, for a store no migration has touched. */
    pgliteEmpty: string;
    /** PGlite: a cluster with the service store migrated: slots' store directories start as copies of it. */
    pgliteStoreTemplate: string;
    /** Postgres: a database with Ponder's sync tables and the service store migrated, that slots' databases are created from. */
    postgresTemplate: string;
  }
}

/**
 * vitest globalSetup of the database projects. Every indexer a test starts would otherwise begin by
 * making what every other one makes, on an empty database: Ponder's sync tables (its migrations)
 * and the service store (ours). Made once here, each slot starts from a copy (test/support/indexer.ts):
 * on PGlite about a CPU-second less per indexer started, as well as initdb. What the tests check of
 * those migrations keeps a store of its own (service-store.test.ts: `{ migrated: false }`).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (project.name === "pglite") return pgliteTemplates(project);
  return postgresTemplate(project);
}

async function pgliteTemplates(project: TestProject): Promise<() => Promise<void>> {
  const root = mkdtempSync(join(tmpdir(), "pglite-templates-"));
  const [empty, index, store] = ["empty", "index", "store"].map((name) => join(root, name)) as [string, string, string];
  const db = new PGlite(empty);
  await db.waitReady;
  await db.close();
  cpSync(empty, index, { recursive: true });
  cpSync(empty, store, { recursive: true });
  const ponder = await ponderInternals();
  // Kysely's destroy() closes the client (or ends the pool) it was given.
  if (ponder) await ponder.migrateSync(ponder.pgliteDialect(new PGlite(index)));
  await (await openServiceStore({ kind: "pglite", directory: store })).close();
  project.provide("pgliteEmpty", empty);
  project.provide("pgliteTemplate", index);
  project.provide("pgliteStoreTemplate", store);
  return async () => rmSync(root, { recursive: true, force: true });
}

async function postgresTemplate(project: TestProject): Promise<() => Promise<void>> {
  const name = `template_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const url = (database: string) => Object.assign(new URL(POSTGRES_URL), { pathname: `/${database}` }).toString();
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: url("postgres") });
    await client.connect();
    await client.query(sql).finally(() => client.end());
  };
  await admin(`create database "${name}"`);
  const ponder = await ponderInternals();
  if (ponder) await ponder.migrateSync(ponder.postgresDialect(new pg.Pool({ connectionString: url(name), max: 1 })));
  await (await openServiceStore({ kind: "postgres", connectionString: url(name) })).close();
  project.provide("postgresTemplate", name);
  return () => admin(`drop database if exists "${name}" with (force)`);
}

type Dialect = unknown;
type PonderInternals = {
  migrateSync: (dialect: Dialect) => Promise<void>;
  pgliteDialect: (client: PGlite) => Dialect;
  postgresDialect: (pool: pg.Pool) => Dialect;
};

/**
 * Ponder's own migrations of its sync tables, run as Ponder runs them (database/index.js,
 * migrateSync): its migration provider, with the Kysely it ships. Not part of Ponder's interface,
 * so only for the version api/host/ponder.ts was written for: on another, nothing is made and each
 * indexer migrates its own database.
 */
async function ponderInternals(): Promise<PonderInternals | undefined> {
  const installed = installedPonderVersion();
  if (installed !== PONDER_VERSION) {
    console.warn(
      `test/support/slot-templates.ts: Ponder ${installed} is not ${PONDER_VERSION}: each indexer migrates its own sync tables (slower, not wrong)`,
    );
    return undefined;
  }
  const dir = installedPonderDirectory()!;
  const load = (path: string) => import(pathToFileURL(join(dir, "dist/esm", path)).href);
  const kysely = await import(pathToFileURL(createRequire(join(dir, "package.json")).resolve("kysely")).href);
  const { buildMigrationProvider } = await load("sync-store/migrations.js");
  const { createPgliteKyselyDialect } = await load("utils/pglite.js");
  const logger = { info() {}, warn() {}, debug() {}, error() {}, trace() {}, child: () => logger };
  return {
    pgliteDialect: (client) => createPgliteKyselyDialect(client),
    postgresDialect: (pool) => new kysely.PostgresDialect({ pool }),
    migrateSync: async (dialect) => {
      const db = new kysely.Kysely({ dialect, plugins: [new kysely.WithSchemaPlugin("ponder_sync")] });
      try {
        const { error } = await new kysely.Migrator({
          db,
          provider: buildMigrationProvider(logger),
          migrationTableSchema: "ponder_sync",
        }).migrateToLatest();
        if (error) throw error;
      } finally {
        await db.destroy();
      }
    },
  };
}
