import { type ChildProcess, spawn } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { ponderProcessEnv } from "../api/host/ponder-process.ts";
import { type ServiceStoreLocation, serviceStoreLocation } from "../api/store/store.ts";
import { devnetDatabaseUrl } from "../config/target.ts";
import { killOnExit, stopProcessGroup } from "../devnet/anvil.ts";
import { freePort } from "../devnet/ports.ts";
import { sleep } from "../shared/async.ts";

export type TestDatabase = "pglite" | "postgres";

/** Which database this vitest project runs against (see vitest.config.ts). */
export const testDatabase = (process.env.TEST_DATABASE ?? "pglite") as TestDatabase;
export const POSTGRES_URL = process.env.TEST_POSTGRES_URL ?? "postgresql://postgres@127.0.0.1:5432/test";

export type Query = <T = Record<string, unknown>>(sql: string) => Promise<T[]>;

/**
 * A database location of its own for one indexer: a fresh PGlite dir or a fresh Postgres schema.
 * `read` queries its tables directly (search_path set to the schema). PGlite allows one process at
 * a time, so on PGlite the indexer must be stopped first; Postgres can be read while it runs.
 */
export type DatabaseSlot = {
  kind: TestDatabase;
  env: Record<string, string>;
  schema: string;
  /** Creates what the indexer needs before it starts. */
  prepare: () => Promise<void>;
  read: <T>(fn: (query: Query) => Promise<T>) => Promise<T>;
  drop: () => Promise<void>;
  /** Where the API's service store (payment ledger) lives for this slot. */
  store: ServiceStoreLocation;
};

/**
 * What a slot's databases start as, instead of empty: PGlite, cluster directories copied (the index's
 * and the service store's); Postgres, the database to create the slot's from (CREATE DATABASE ... TEMPLATE).
 */
export type SlotTemplates = { pglite?: { index: string; store: string }; postgres?: string };

/** `postgresUrl`: the server a Postgres slot lives on (a test's private cluster; the shared one by default). */
export function databaseSlot(
  kind: TestDatabase = testDatabase,
  postgresUrl = POSTGRES_URL,
  templates: SlotTemplates = {},
): DatabaseSlot {
  const schema = `t_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  if (kind === "pglite") {
    const dir = mkdtempSync(join(tmpdir(), "pglite-"));
    const store = serviceStoreLocation({ kind: "pglite", directory: dir });
    return {
      kind,
      env: { PGLITE_DIR: dir, DATABASE_SCHEMA: schema },
      schema,
      prepare: async () => {
        if (!templates.pglite) return;
        cpSync(templates.pglite.index, dir, { recursive: true });
        if (store.kind === "pglite") cpSync(templates.pglite.store, store.directory, { recursive: true });
      },
      read: async (fn) => {
        const db = new PGlite(dir);
        try {
          await db.exec(`set search_path to "${schema}"`);
          return await fn(async (sql) => (await db.query(sql)).rows as never[]);
        } finally {
          await db.close();
        }
      },
      drop: async () => {
        rmSync(dir, { recursive: true, force: true });
        rmSync(`${dir}-service`, { recursive: true, force: true });
        rmSync(`${dir}-ipfs`, { recursive: true, force: true });
      },
      store,
    };
  }
  // Ponder caches blocks per database by chain id, and every test devnet is chain 42220: each
  // slot gets a database of its own (the `<name>_devnet` database the indexer derives).
  const devnetDb = `${schema}_devnet`;
  const withClient = async <T>(database: string | null, fn: (client: pg.Client) => Promise<T>) => {
    const url = new URL(postgresUrl);
    if (database) url.pathname = `/${database}`;
    const client = new pg.Client({ connectionString: url.toString() });
    await client.connect();
    try {
      return await fn(client);
    } finally {
      await client.end();
    }
  };
  const base = new URL(postgresUrl);
  base.pathname = `/${schema}`;
  return {
    kind,
    env: { DATABASE_URL: base.toString(), DATABASE_SCHEMA: schema },
    schema,
    prepare: () =>
      withClient(null, async (client) => {
        const template = templates.postgres ? ` template "${templates.postgres}"` : "";
        await client.query(`create database "${devnetDb}"${template}`);
      }),
    read: (fn) =>
      withClient(devnetDb, async (client) => {
        await client.query(`set search_path to "${schema}"`);
        return fn(async (sql) => (await client.query(sql)).rows);
      }),
    drop: () =>
      withClient(
        null,
        async (client) => void (await client.query(`drop database if exists "${devnetDb}" with (force)`)),
      ),
    store: serviceStoreLocation({ kind: "postgres", connectionString: devnetDatabaseUrl(base.toString()) }),
  };
}

export type Indexer = {
  url: string;
  /** The data listener (GraphQL, SQL over HTTP, /metrics): DATA_PORT, a free port per run. */
  dataUrl: string;
  child: ChildProcess;
  output: () => string;
  stop: () => Promise<void>;
};

/**
 * Starts `ponder start` (indexer + API), or with `serve` an API replica over the tables an indexer
 * writes (Postgres only), in its own process group; stop() kills the group.
 */
export async function startIndexer(
  env: Record<string, string>,
  options: { root?: string; command?: "start" | "serve" } = {},
): Promise<Indexer> {
  const port = await freePort();
  const dataPort = env.DATA_PORT ? Number(env.DATA_PORT) : await freePort();
  const root = options.root ? ["--root", options.root] : [];
  const child = spawn("ponder", [options.command ?? "start", ...root, "--port", String(port), "--log-format", "json"], {
    env: ponderChildEnv({ POLLING_INTERVAL_MS: "200", ...env }, dataPort),
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  return serving(child, port, dataPort);
}

/**
 * The environment of a Ponder process the harness starts: warnings only, the data listener on
 * 127.0.0.1:`dataPort`, `env` over those, and what every Ponder process of the service preloads.
 */
export const ponderChildEnv = (env: Record<string, string>, dataPort: number): NodeJS.ProcessEnv =>
  ponderProcessEnv({
    ...process.env,
    PONDER_LOG_LEVEL: "warn",
    DATA_HOST: "127.0.0.1",
    ...env,
    DATA_PORT: String(dataPort),
  });

/**
 * A process group serving the API on `port` and the data listener on `dataPort`: its output kept,
 * killed if this process exits first. stop() sends the group SIGTERM, which lets the service finish
 * its paid requests (SHUTDOWN_DRAIN_MS, 15 s) and Ponder its own shutdown (5 s at most) before
 * anything is killed.
 */
export function serving(child: ChildProcess, port: number, dataPort: number): Indexer {
  killOnExit(child);
  let output = "";
  child.stdout?.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (output += d.toString()));
  return {
    url: `http://127.0.0.1:${port}`,
    dataUrl: `http://127.0.0.1:${dataPort}`,
    child,
    output: () => output,
    stop: () => stopProcessGroup(child, 25_000),
  };
}

/** Polls `probe` until it returns a value (not undefined), failing with the indexer's output. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  indexer?: Indexer,
  timeoutMs = 120_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    if (indexer && indexer.child.exitCode !== null)
      throw new Error(
        `indexer exited (${indexer.child.exitCode}) while waiting for ${what}:\n${indexer.output().slice(-3000)}`,
      );
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    await sleep(200);
  }
  throw new Error(
    `timed out waiting for ${what} (${String(lastError ?? "no error")})\n${indexer?.output().slice(-3000) ?? ""}`,
  );
}

/**
 * GET /api/health/integrations (with `init`) once every integration is ok: the service's IPFS node
 * opens on its first check, and says `opening` (degraded) until it answers.
 */
export async function healthyIntegrations(indexer: Indexer, init?: RequestInit) {
  return waitFor(
    "every integration ok",
    async () => {
      const res = await fetch(`${indexer.url}/api/health/integrations`, init);
      const body = (await res.json()) as { status: string; integrations: Record<string, Record<string, unknown>> };
      return res.status === 200 && body.status === "ok" ? { res, body } : undefined;
    },
    indexer,
    60_000,
  );
}

type StatsLike = { latestIndexedBlock: { number: number } | null; transfers: number };

export async function stats(indexer: Indexer): Promise<StatsLike> {
  const res = await fetch(`${indexer.url}/api/stats`);
  if (!res.ok) throw new Error(`stats ${res.status}`);
  return (await res.json()) as StatsLike;
}

/**
 * Waits until paid routes answer: `/ready` is 200 once the index is complete and current
 * (docs/operations.md, "Index readiness"), and at the head: while the last blocks are still being
 * committed one after another, an answer's reads may be made again, and a test's first paid call
 * should not depend on how many times.
 */
async function waitForCurrent(indexer: Indexer, timeoutMs?: number): Promise<void> {
  await waitFor(
    "an index at the head",
    async () => {
      const res = await fetch(`${indexer.url}/ready`);
      return res.ok && ((await res.json()) as { lagBlocks: number | null }).lagBlocks === 0 ? true : undefined;
    },
    indexer,
    timeoutMs,
  );
}

/**
 * Waits until the indexer has processed `block` (it may still be working through the last ones)
 * and paid routes answer (the index is current: blocks made since `block`, settlements included,
 * are indexed too). Polls Ponder's own /status, which costs nothing, then /ready; returns
 * /api/stats once.
 */
export async function waitForBlock(indexer: Indexer, block: number, timeoutMs?: number) {
  await waitFor(
    `block ${block}`,
    async () => {
      const res = await fetch(`${indexer.url}/status`);
      if (!res.ok) return undefined;
      const status = (await res.json()) as Record<string, { block?: { number: number } | null }>;
      return (status.celo?.block?.number ?? 0) >= block ? true : undefined;
    },
    indexer,
    timeoutMs,
  );
  await waitForCurrent(indexer, timeoutMs);
  return stats(indexer);
}
