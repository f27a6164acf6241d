import { parseArgs } from "node:util";
import { drizzle } from "drizzle-orm/node-postgres";
import pg from "pg";
import { withTimeout, zeroAddress } from "viem";
import type { IndexDb } from "../api/db.ts";
import { scoreWallet } from "../api/scoring/model.ts";
import { WalletAssessor } from "../api/wallet/assess.ts";
import type { Address } from "../config/addresses.ts";
import { readEnv } from "../config/env.ts";
import { readManifest } from "../config/manifest.ts";
import { resolveIndexTarget } from "../config/target.ts";
import { startTestDevnet } from "../harness/devnet.ts";
import { databaseSlot, POSTGRES_URL, startIndexer, waitForBlock } from "../harness/indexer.ts";
import * as schema from "../ponder.schema.ts";
import { firstLine } from "../shared/async.ts";
import { rpcFactsReader } from "./support/rpc-facts.ts";

// npm run bench:screen -- --batch [...]: 100 wallets as one batch against 100 single screens (bench/screen-batch.ts).
if (process.argv.includes("--batch")) {
  await import("./screen-batch.ts");
  process.exit();
}

// npm run bench:screen -- [--wallets 100000] [--transfers 5000000] [--small 50000] [--samples 2000] [--rpc-samples 30] [--indexed]
// On Postgres: (1) the screening path per wallet (SQL queries + scoring), p50/p99 over random
// wallets; (2) the same result from live eth_getLogs scans, as the original service worked; (3) how
// (1) grows from a small chain to the big one.
//
// Both chains are seeded and indexed here (the big one takes about 45 minutes). With --indexed the
// big chain is instead the devnet and Postgres database the indexer already uses: `npm run devnet
// -- --wallets 100000 --transfers 5000000`, then `npm run indexer` with DATABASE_URL set, then this
// with the same environment. That way the query path can be measured again without re-indexing.
const { values } = parseArgs({
  options: {
    wallets: { type: "string", default: "100000" },
    transfers: { type: "string", default: "5000000" },
    small: { type: "string", default: "50000" },
    samples: { type: "string", default: "2000" },
    "rpc-samples": { type: "string", default: "30" },
    indexed: { type: "boolean", default: false },
  },
});

const RPC_TIMEOUT_MS = 60_000;
/** Complete eth_getLogs screens are slow (a scan per payee): a few are enough to show it. */
const FULL_RPC_SAMPLES = 5;
const pct = (xs: number[], p: number) =>
  xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]! : Number.NaN;
const fmt = (ms: number) => `${ms.toFixed(2)} ms`;
const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);

type Percentiles = { p50: number; p90: number; p99: number; n: number };
const percentiles = (xs: number[]): Percentiles => ({
  p50: pct(xs, 50),
  p90: pct(xs, 90),
  p99: pct(xs, 99),
  n: xs.length,
});
type Run = Percentiles & {
  label: string;
  transfers: number;
  rpc?: { own: Percentiles; full: Percentiles & { timedOut: number } };
};

/** An indexed chain to measure: its devnet (for eth_getLogs) and the Postgres schema holding its tables. */
type IndexedChain = {
  rpcUrl: string;
  tokens: Address[];
  transfers: number;
  connectionString: string;
  schema: string;
  close: () => Promise<void>;
};

async function seededChain(label: string, options: { wallets: number; transfers: number }): Promise<IndexedChain> {
  log(`${label}: seeding ${options.transfers} transfers over ${options.wallets} wallets…`);
  const devnet = await startTestDevnet({
    wallets: options.wallets,
    transfers: options.transfers,
    months: 15,
    slotHours: 6,
  });
  const slot = databaseSlot("postgres");
  await slot.prepare();
  const indexer = await startIndexer({ DEVNET_MANIFEST: devnet.manifestPath, ...slot.env });
  const close = async () => {
    await indexer.stop();
    await slot.drop();
    await devnet.stop();
  };
  try {
    log(
      `${label}: ${devnet.manifest.population.transfers} transfers seeded in ${devnet.manifest.population.seconds} s; indexing…`,
    );
    const started = performance.now();
    await waitForBlock(indexer, devnet.manifest.headBlock, 4 * 3600_000);
    log(`${label}: indexed in ${((performance.now() - started) / 1000).toFixed(0)} s`);
  } catch (error) {
    await close();
    throw error;
  }
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${slot.schema}_devnet`;
  const { manifest } = devnet;
  return {
    rpcUrl: manifest.rpcUrl,
    tokens: [manifest.tokens.USDT.address, manifest.tokens.USDC.address],
    transfers: manifest.population.transfers,
    connectionString: url.toString(),
    schema: slot.schema,
    close,
  };
}

/** The devnet and database the indexer already serves, from the same environment it reads. */
function alreadyIndexedChain(): IndexedChain {
  const env = readEnv();
  const target = resolveIndexTarget(env);
  if (target.network !== "devnet" || target.database.kind !== "postgres")
    throw new Error(
      "--indexed measures a devnet indexed into Postgres: set DATABASE_URL (and DEVNET_MANIFEST) as for the indexer.",
    );
  const manifest = readManifest(env.DEVNET_MANIFEST);
  return {
    rpcUrl: manifest.rpcUrl,
    tokens: target.tokens.map((t) => t.address),
    transfers: manifest.population.transfers,
    connectionString: target.database.connectionString,
    schema: target.schema,
    close: async () => {},
  };
}

async function measure(label: string, chain: IndexedChain, rpcSamples: number): Promise<Run> {
  const pool = new pg.Pool({
    connectionString: chain.connectionString,
    max: 4,
    options: `-c search_path="${chain.schema}"`,
  });
  pool.on("error", () => {}); // a seeded chain's database is dropped at the end
  try {
    // What autovacuum does on a running system: statistics and the visibility map (index-only scans).
    for (const table of ["transfer", "flow", "received"]) await pool.query(`vacuum analyze "${chain.schema}".${table}`);
    await warmIndexes(pool, chain.schema);
    const db = drizzle(pool, { schema, casing: "snake_case" }) as unknown as IndexDb;
    const target = { schema: chain.schema, tracked: null, sanctions: null };
    const { rows } = await pool.query<{ address: Address }>(
      `select address from (select distinct "to" as address from flow) a order by random() limit ${Number(values.samples)}`,
    );
    const wallets = rows.map((r) => r.address).filter((a) => a !== zeroAddress);

    // Warm up, then time each screen with a cold result cache (a new assessor per call).
    for (const w of wallets.slice(0, 50)) await new WalletAssessor({ db, target }).assess(w);
    const times: number[] = [];
    for (const w of wallets) {
      const t0 = performance.now();
      await new WalletAssessor({ db, target }).assess(w);
      times.push(performance.now() - t0);
    }
    const run: Run = { label, transfers: chain.transfers, ...percentiles(times) };
    log(
      `${label}: SQL screening over ${times.length} wallets: p50 ${fmt(run.p50)}, p90 ${fmt(run.p90)}, p99 ${fmt(run.p99)}`,
    );
    if (rpcSamples > 0)
      run.rpc = await measureRpc(
        label,
        chain,
        wallets.slice(0, rpcSamples),
        (await new WalletAssessor({ db, target }).assess(wallets[0]!)).asOf.timestamp,
      );
    return run;
  } finally {
    await pool.end();
  }
}

/**
 * Reads the indexes a screen uses into the OS page cache, as a service that answers screens all
 * day keeps them, so the figure does not depend on what else this machine read before. (Without
 * it, right after another large job, p50 at 6.4M transfers was about 0.5 ms higher.)
 */
async function warmIndexes(pool: pg.Pool, schemaName: string) {
  try {
    await pool.query("create extension if not exists pg_prewarm");
  } catch (error) {
    log(`indexes not prewarmed (pg_prewarm unavailable: ${(error as Error).message})`);
    return;
  }
  const { rows } = await pool.query<{ name: string }>(
    `select indexrelid::regclass::text as name from pg_index i join pg_class t on t.oid = i.indrelid
     where t.relnamespace = $1::regnamespace and t.relname in ('transfer', 'flow', 'received')`,
    [schemaName],
  );
  const started = performance.now();
  for (const { name } of rows) await pool.query("select pg_prewarm($1::regclass, 'read')", [name]);
  log(`prewarmed ${rows.length} indexes in ${((performance.now() - started) / 1000).toFixed(0)} s`);
}

async function measureRpc(
  label: string,
  chain: IndexedChain,
  wallets: Address[],
  asOf: number,
): Promise<NonNullable<Run["rpc"]>> {
  const rpc = rpcFactsReader(chain.rpcUrl, chain.tokens);
  // (2a) The floor of any eth_getLogs screen: the wallet's own Transfer logs, both ways.
  const own: number[] = [];
  for (const w of wallets) {
    const t0 = performance.now();
    await rpc.ownTransfers(w);
    own.push(performance.now() - t0);
  }
  log(
    `${label}: eth_getLogs, own logs only, over ${own.length} wallets: p50 ${fmt(pct(own, 50))}, p99 ${fmt(pct(own, 99))}`,
  );
  // (2b) The complete same result: also what its payees received and its drain sinks' first
  // activity, a scan each. A scan still running after RPC_TIMEOUT_MS counts as that long (a lower
  // bound) and ends the sampling, so abandoned scans cannot slow the next ones.
  const full: number[] = [];
  let timedOut = 0;
  for (const w of wallets.slice(0, FULL_RPC_SAMPLES)) {
    const t0 = performance.now();
    try {
      scoreWallet(
        await withTimeout(() => rpc.facts(w, asOf, AbortSignal.timeout(RPC_TIMEOUT_MS)), {
          timeout: RPC_TIMEOUT_MS,
          errorInstance: new Error("timeout"),
        }),
      );
    } catch (error) {
      if (!/timeout/.test((error as Error).message)) {
        log(`${label}: eth_getLogs screen of ${w} failed, not counted: ${firstLine(error)}`);
        continue;
      }
      timedOut++;
    }
    full.push(performance.now() - t0);
    if (timedOut) break;
  }
  log(
    `${label}: eth_getLogs, complete result, over ${full.length} wallets: p50 ${fmt(pct(full, 50))}, p99 ${fmt(pct(full, 99))}${timedOut ? ` (${timedOut} cut off at ${RPC_TIMEOUT_MS / 1000} s)` : ""}`,
  );
  return { own: percentiles(own), full: { ...percentiles(full), timedOut } };
}

async function run(label: string, chain: IndexedChain, rpcSamples: number): Promise<Run> {
  try {
    return await measure(label, chain, rpcSamples);
  } finally {
    await chain.close();
  }
}

const smallWallets = Math.max(200, Math.round(Number(values.small) / 50));
const small = await run(
  "small",
  await seededChain("small", { wallets: smallWallets, transfers: Number(values.small) }),
  0,
);
const bigChain = values.indexed
  ? alreadyIndexedChain()
  : await seededChain("big", { wallets: Number(values.wallets), transfers: Number(values.transfers) });
const big = await run("big", bigChain, Number(values["rpc-samples"]));

console.log(`\nscreening path on Postgres (queries + scoring, cold cache), 2 cores:`);
console.log(`chain                   transfers        p50        p90        p99`);
for (const r of [small, big])
  console.log(
    `${r.label.padEnd(18)} ${String(r.transfers).padStart(12)} ${fmt(r.p50).padStart(10)} ${fmt(r.p90).padStart(10)} ${fmt(r.p99).padStart(10)}`,
  );
if (big.rpc) {
  const { own, full } = big.rpc;
  console.log(
    `eth_getLogs, own logs ${String(big.transfers).padStart(12)} ${fmt(own.p50).padStart(10)} ${fmt(own.p90).padStart(10)} ${fmt(own.p99).padStart(10)}   (${own.n} wallets)`,
  );
  console.log(
    `eth_getLogs, complete ${String(big.transfers).padStart(12)} ${fmt(full.p50).padStart(10)} ${fmt(full.p90).padStart(10)} ${fmt(full.p99).padStart(10)}   (${full.n} wallets${full.timedOut ? `, ${full.timedOut} cut off: a lower bound` : ""})`,
  );
  console.log(
    `\nSQL vs eth_getLogs, own logs only (the least a scan reads): ${(own.p50 / big.p50).toFixed(0)}x faster at p50, ${(own.p99 / big.p99).toFixed(0)}x at p99 (target >= 100x)`,
  );
  console.log(
    `SQL vs eth_getLogs, complete result: ${(full.p50 / big.p50).toFixed(0)}x at p50, ${(full.p99 / big.p99).toFixed(0)}x at p99`,
  );
}
console.log(
  `growth ${small.transfers} -> ${big.transfers} transfers: p50 x${(big.p50 / small.p50).toFixed(2)}, p99 x${(big.p99 / small.p99).toFixed(2)} (target <= 1.5)`,
);
console.log(`p99 target < 5 ms: ${big.p99 < 5 ? "met" : "not met"}`);
