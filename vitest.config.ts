import { existsSync, readFileSync } from "node:fs";
import { parseEnv } from "node:util";
import { defineConfig } from "vitest/config";
import { envSchema } from "./config/env.ts";
import { LongestFirst } from "./test/support/sequencer.ts";

// Database-backed tests (test/db) run twice: against PGlite, the embedded default, and against
// Postgres (TEST_POSTGRES_URL, default the local server). Everything else runs once.
const timeouts = { testTimeout: 120_000, hookTimeout: 300_000 };
// Tests call the free routes far more often than a client would: their per-client limit is lifted
// (test/observability.test.ts gives its app a low one). The indexers tests start inherit it.
// Most test processes never make a statement: they skip the PDF warm-up (a CPU-second each; the
// statement files turn it back on for their indexers).
// A developer's .env and .env.local never reach the tests: our loader reads no file (ENV_FILES), and
// the settings Ponder would still read from .env.local itself (dotenv, which never overrides) are
// set blank, which config/env.ts reads as unset.
const env = {
  FREE_RATE_LIMIT_PER_MINUTE: "1000000",
  ENV_FILES: "ignore",
  STATEMENT_WARMUP: "off",
  ...blankPonderDotenv(),
};

function blankPonderDotenv(): Record<string, string> {
  if (!existsSync(".env.local")) return {};
  const keys = Object.keys(parseEnv(readFileSync(".env.local", "utf8"))).filter(
    (key) => key in envSchema.shape && process.env[key] === undefined,
  );
  return Object.fromEntries(keys.map((key) => [key, ""]));
}

// test/db files that run against one database only (the other project excludes them). Each checks
// something its database does not change, and the other database keeps its coverage of that code:
// (The API reference in a browser and the README's first paid call run on PGlite only too: a
// describe.runIf in x402.test.ts, whose devnet they share.)
const pgliteOnly = [
  // Tracked mode's filters (Ponder's, at the RPC) and the handlers' SQL do not depend on the database.
  // Postgres: tracked mode in screen-batch.test.ts; the aggregates' SQL in aggregates.test.ts.
  "test/db/tracked.test.ts",
  // MCP and x402 discovery: each tool call goes through its HTTP route, whose ledger SQL
  // ledger-contract.test.ts holds on both databases and whose payments the Postgres files pay end to end.
  "test/db/mcp.test.ts",
  // Passports end to end (issue, supersede, pay by credit, the page in a browser, revoke, tamper,
  // reorg, expiry, the reconciler's revocation after a restart): what Postgres changes under them
  // keeps its own Postgres files. The report rows equal the reporter's logs (reports.test.ts); a
  // passport issued through one replica verifies through the other, its content in the store's
  // table checked against its CID and refused once changed (replicas.test.ts, mainnet-rehearsal);
  // the report route paid by the stock x402 client (x402.test.ts); the reconciler revokes a
  // passport whose payment never settled (report-reference.test.ts).
  "test/db/passports.test.ts",
];
const postgresOnly = [
  // The indexer's authorization_state rows equal eth_getLogs. PGlite: local-verify.test.ts reads a used and a
  // cancelled authorization back from those rows on both databases.
  "test/db/authorization-events.test.ts",
  // The indexer's report rows equal the reporter's logs. PGlite: passports.test.ts verifies published,
  // superseded, revoked and expired passports from those rows (on PGlite only: see pgliteOnly).
  "test/db/reports.test.ts",
  // The payment path end to end against a real chain (relayer, receipts, RPC outages, a frozen chain,
  // the report's reference, sign-in). What the database adds to it is the ledger's SQL, which
  // test/db/ledger-contract.test.ts holds to one contract on both databases; the core's decisions are
  // unit-tested on the in-memory ledger (test/payments/). PGlite still pays end to end in x402,
  // deferred-settlement, ledger-restart and docs (the README's first paid call).
  "test/db/payments.test.ts",
  "test/db/settlement-recovery.test.ts",
  "test/db/chain-freeze.test.ts",
  "test/db/report-reference.test.ts",
  "test/db/sign-in.test.ts",
  // Prepaid credit across two replicas (two connection pools on one database); the credit ledger's
  // SQL holds to the contract on PGlite too (ledger-contract.test.ts), the core's rules in test/payments.
  "test/db/credit.test.ts",
  // A database server killed mid-traffic: a private Postgres cluster (PGlite dies with its process).
  "test/db/credit-crash.test.ts",
  // Several processes on one database: PGlite is one process's (describe.runIf in the files too).
  "test/db/replicas.test.ts",
  "test/db/deferred-replicas.test.ts",
  // What the routes answer from the indexed tables: scoring and the drain rule's SQL, chat, batch screens,
  // request validation. PGlite is Postgres compiled to WebAssembly, so the same SQL answers the same;
  // what the embedded default changes (one process, the index and the store on disk, its IPFS
  // blocks) keeps its own files on PGlite: aggregates (every table against eth_getLogs), x402 and
  // docs (a paid screen end to end), deferred-settlement, tracked, local-verify, reorg, restart,
  // ledger-restart, shutdown, data, statement, passports, service-store, ipfs-store, ledger-contract.
  "test/db/screen.test.ts",
  "test/db/chat.test.ts",
  "test/db/screen-batch.test.ts",
  "test/db/requests.test.ts",
];

// Seeded devnets kept for the files that ask for the same settings, shared by the three projects.
const devnetSnapshots = "test/support/devnet-snapshots.ts";

/**
 * test/db on one database. Its slots (test/support/slot-templates.ts) are copied from what is
 * migrated once: PGlite's clusters, or Postgres's template database.
 * `isolate: false` (every project): a file runs in a worker that ran others before it, so the
 * modules they share (the schema, Ponder's index and its GraphQL stack, viem, drizzle, the app) load
 * once per worker, not once per file (8 Postgres files: 54 CPU-s against 66; the unit project
 * alone: 94 and 103 CPU-s against 114, 2026-11-28). They leave nothing behind that another file
 * reads: each starts and stops its own devnet, indexer and database, puts back the environment
 * variables it sets, and gives an app its settings as createApp's dependencies, not module state.
 */
function databaseProject(database: "pglite" | "postgres", exclude: string[]) {
  return {
    test: {
      name: database,
      include: ["test/db/**/*.test.ts"],
      exclude,
      env: { ...env, TEST_DATABASE: database },
      globalSetup: [devnetSnapshots, "test/support/slot-templates.ts"],
      isolate: false,
      ...timeouts,
    },
  };
}

export default defineConfig({
  test: {
    // Three files at a time on two cores (vitest's default there is one): a file spends much of its
    // time waiting on its anvil and Ponder children, or on a lease or a deadline it tests. On this
    // machine kind: 1015 s one at a time, 699 s two; since indexers start faster (devnet/seed.ts),
    // two then three back to back: 606 s and 562 s, later 667 s and 655 s (the machine's speed varies).
    // Four gain nothing: 422 s against 418 s for three (2026-11-28; the two cores were idle 14 s against 59 s).
    maxWorkers: 3,
    sequence: { sequencer: LongestFirst },
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/**/*.test.ts"],
          exclude: ["test/db/**"],
          env,
          globalSetup: [devnetSnapshots],
          isolate: false,
          ...timeouts,
        },
      },
      databaseProject("pglite", postgresOnly),
      databaseProject("postgres", pgliteOnly),
    ],
  },
});
