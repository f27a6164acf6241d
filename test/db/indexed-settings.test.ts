import { cpSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { serviceStoreLocation } from "../../api/store/store.ts";
import { CELO_TOKENS } from "../../config/celo.ts";
import { StartupError } from "../../config/errors.ts";
import type { IndexTarget } from "../../config/target.ts";
import { EXIT_CONFIG, guardIndexedSettings } from "../../scripts/indexed-settings.ts";
import { POSTGRES_URL, testDatabase } from "../support/indexer.ts";

// The launcher refuses to resume a schema whose indexed settings changed, in one line that names
// the setting and what to do; a new DATABASE_SCHEMA indexes beside it. Ponder's own metadata table
// stands for an indexed schema (what Ponder checks its build id against).
const name = `settings_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
const pgliteDir = join(mkdtempSync(join(tmpdir(), "settings-")), "pglite");
const database: IndexTarget["database"] =
  testDatabase === "postgres"
    ? { kind: "postgres", connectionString: Object.assign(new URL(POSTGRES_URL), { pathname: `/${name}` }).toString() }
    : { kind: "pglite", directory: pgliteDir };

const base: IndexTarget = {
  network: "celo",
  rpcUrls: ["http://127.0.0.1:1"],
  tokens: [CELO_TOKENS.USDT, CELO_TOKENS.USDC],
  reporters: ["0xe7621af5de3806ba26115bdc89190c65ed835c21"],
  startBlock: 52_000_000,
  reporterStartBlock: 52_000_000,
  sanctions: null,
  tracked: null,
  database,
  schema: "reputation",
  pollingIntervalMs: 1000,
  ipfsDirectory: join(pgliteDir, "ipfs"),
};

// PGlite: the clusters start as copies of the run's empty one (test/support/slot-templates.ts)
// rather than each running initdb (~6 CPU-s). The store's before the first guard; the
// index's when something is first indexed into it, so that the first guard still finds no index.
const template = database.kind === "pglite" ? inject("pgliteEmpty") : undefined;

async function exec(sql: string): Promise<void> {
  if (database.kind === "pglite") {
    if (template && !existsSync(database.directory)) cpSync(template, database.directory, { recursive: true });
    const db = new PGlite(database.directory);
    await db.exec(sql).finally(() => db.close());
    return;
  }
  const client = new pg.Client({ connectionString: database.connectionString });
  await client.connect();
  await client.query(sql).finally(() => client.end());
}

/** What Ponder leaves in a schema it indexed into. */
const indexInto = (schema: string) =>
  exec(`create schema "${schema}"; create table "${schema}"._ponder_meta (key text primary key, value jsonb)`);

async function refusal(target: IndexTarget): Promise<StartupError> {
  const error = await guardIndexedSettings(target).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StartupError);
  return error as StartupError;
}

describe(`indexed settings (${testDatabase})`, () => {
  beforeAll(async () => {
    const store = serviceStoreLocation(database);
    if (template && store.kind === "pglite") cpSync(template, store.directory, { recursive: true });
    if (database.kind === "postgres") {
      const admin = new pg.Client({ connectionString: POSTGRES_URL });
      await admin.connect();
      await admin.query(`create database "${name}"`).finally(() => admin.end());
    }
  });
  afterAll(async () => {
    rmSync(join(pgliteDir, ".."), { recursive: true, force: true });
    if (database.kind === "postgres") {
      const admin = new pg.Client({ connectionString: POSTGRES_URL });
      await admin.connect();
      await admin.query(`drop database if exists "${name}" with (force)`).finally(() => admin.end());
    }
  });

  it("records a new schema's settings, then resumes it while they are the same", async () => {
    await guardIndexedSettings(base);
    await indexInto("reputation");
    await guardIndexedSettings(base);
    await guardIndexedSettings({ ...base, pollingIntervalMs: 250 }); // not part of what is indexed
  });

  it("refuses a changed start block in one line that names it, its values and what to do", async () => {
    const error = await refusal({ ...base, startBlock: 53_000_000, reporterStartBlock: 53_000_000 }); // REPORTER_START_BLOCK unset: it follows
    expect(error.exitCode).toBe(EXIT_CONFIG);
    expect(error.message).not.toContain("\n");
    expect(error.message).toMatch(
      /^CELO_START_BLOCK \(was 52000000, now 53000000\) changed since schema "reputation" was indexed/,
    );
    expect(error.message).toContain("Set DATABASE_SCHEMA to a new name (e.g. reputation_v2)");
  });

  it("names every changed setting at once: reporter, mode and tracked wallets", async () => {
    const tracked = new Set(["0x70997970c51812dc3a010c7d01b50e0d17dc79c8"] as const);
    const error = await refusal({
      ...base,
      reporters: [...base.reporters, "0x5fbdb2315678afecb367f032d93f642f64180aa3"],
      reporterStartBlock: 51_000_000,
      tracked,
    });
    expect(error.message).toMatch(
      /^REPORTER_ADDRESS \/ ONCHAIN_REPORTER_ADDRESS, REPORTER_START_BLOCK \(was unset, now 51000000\), INDEX_MODE \(was all, now tracked\), TRACKED_WALLETS \/ TRACKED_WALLETS_FILE changed/,
    );
  });

  it("indexes a new DATABASE_SCHEMA beside the old one, which keeps its own settings", async () => {
    const v2 = { ...base, schema: "reputation_v2", startBlock: 53_000_000 };
    await guardIndexedSettings(v2);
    await indexInto("reputation_v2");
    await guardIndexedSettings(v2);
    expect((await refusal({ ...v2, startBlock: 54_000_000 })).message).toContain("(e.g. reputation_v3)");
    await guardIndexedSettings(base); // the old schema, still as it was
  });

  it("takes the current settings for a schema dropped since (nothing left to protect)", async () => {
    await exec(`drop schema "reputation" cascade`);
    await guardIndexedSettings({ ...base, startBlock: 53_000_000 });
    await indexInto("reputation");
    expect((await refusal(base)).message).toMatch(/^CELO_START_BLOCK \(was 53000000, now 52000000\)/);
  });
});
