import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { drizzle } from "drizzle-orm/node-postgres";
import pg from "pg";
import { zeroAddress } from "viem";
import type { IndexDb } from "../api/db.ts";
import { cidOf, openIpfs } from "../api/ipfs/node.ts";
import { loadStatement, periodStart } from "../api/statement/data.ts";
import { makeStatement, renderStatement } from "../api/statement/make.ts";
import { warmStatementPdf } from "../api/statement/pdf.ts";
import { openServiceStore } from "../api/store/store.ts";
import type { Address } from "../config/addresses.ts";
import { devnetDatabaseUrl } from "../config/target.ts";
import { DEVNET_ROLES } from "../devnet/accounts.ts";
import type { PlannedTransfer } from "../devnet/scenario/plan.ts";
import { actorAddress, usd } from "../devnet/scenario/random.ts";
import { HistorySeeder } from "../devnet/seed.ts";
import { startTestDevnet } from "../harness/devnet.ts";
import { databaseSlot, startIndexer, waitForBlock } from "../harness/indexer.ts";

// npm run bench:statement -- [--wallets 120] [--target 5000] [--typical 40] [--runs 5] [--cold]
// On a devnet indexed into Postgres: the time to make a 12-month statement (read the indexed
// tables, render the PDF and CSV, pin both on the IPFS node, record it) for a wallet with --target
// transfers in the period, and the p50 over --typical ordinary wallets of the seeded population
// (default period, 3M). Figures, not pass/fail: the target is under 1 s for 5,000 transfers.
// The busy wallet's transfers are added after the seeded history, so they sit in its last hours
// (the chain's time cannot go back); half are payments in from 50 payers, half payments out to 200
// payees, both tokens.
const { values } = parseArgs({
  options: {
    wallets: { type: "string", default: "120" },
    target: { type: "string", default: "5000" },
    typical: { type: "string", default: "40" },
    runs: { type: "string", default: "5" },
    cold: { type: "boolean", default: false },
  },
});
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const ms = (x: number) => `${x.toFixed(0)} ms`;
const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);
const time = async <T>(fn: () => Promise<T>): Promise<[T, number]> => {
  const t = performance.now();
  const value = await fn();
  return [value, performance.now() - t];
};

log(
  `seeding a devnet: ${values.wallets} background wallets over 13 months, and a wallet with ${values.target} transfers…`,
);
const devnet = await startTestDevnet({ wallets: Number(values.wallets), months: 13, slotHours: 6 });
const busyWallet = actorAddress(7, "bench:statement-busy");
{
  const { deployer } = DEVNET_ROLES;
  const seeder = new HistorySeeder(
    devnet.manifest.rpcUrl,
    deployer.address,
    { USDT: devnet.manifest.tokens.USDT.address, USDC: devnet.manifest.tokens.USDC.address },
    { slotSeconds: 60, perTransaction: 400 },
  );
  await seeder.begin();
  const start = Math.floor(Date.now() / 1000) + 60;
  const payers = Array.from({ length: 50 }, (_, i) => actorAddress(7, `bench:payer-${i}`));
  const payees = Array.from({ length: 200 }, (_, i) => actorAddress(7, `bench:payee-${i}`));
  const plan: PlannedTransfer[] = payers.flatMap((p) =>
    (["USDT", "USDC"] as const).map((token) => ({
      at: start,
      token,
      from: zeroAddress,
      to: p,
      amount: usd(1_000_000),
    })),
  );
  const target = Number(values.target);
  for (let i = 0; i < target; i++) {
    const token = i % 3 === 0 ? "USDC" : "USDT";
    const at = start + 60 + Math.floor(i / 25) * 60; // 25 transfers a minute
    plan.push(
      i % 2 === 0
        ? { at, token, from: payers[i % payers.length]!, to: busyWallet, amount: usd(50 + (i % 97)) }
        : { at, token, from: busyWallet, to: payees[i % payees.length]!, amount: usd(10 + (i % 13)) },
    );
  }
  await seeder.seed(plan);
  devnet.manifest.headBlock = await seeder.end(start + 120 + Math.ceil(target / 25) * 60);
}
const slot = databaseSlot("postgres");
await slot.prepare();
const indexer = await startIndexer({ DEVNET_MANIFEST: devnet.manifestPath, ...slot.env });
const ipfsDir = mkdtempSync(join(tmpdir(), "bench-ipfs-"));
let pool: pg.Pool | undefined;
try {
  await waitForBlock(indexer, devnet.manifest.headBlock, 900_000);
  log(
    `indexed the devnet (${devnet.manifest.population.transfers} background transfers); stopping the indexer so that only the statements run`,
  );
  await indexer.stop();
  pool = new pg.Pool({ connectionString: devnetDatabaseUrl(slot.env.DATABASE_URL!), max: 4 });
  const db = drizzle(pool) as unknown as IndexDb;
  const store = await openServiceStore(slot.store);
  const ipfs = await openIpfs(ipfsDir);
  const target = {
    schema: slot.schema,
    tokens: [
      { ...devnet.manifest.tokens.USDT, symbol: "USDT" as const },
      { ...devnet.manifest.tokens.USDC, symbol: "USDC" as const },
    ],
  };
  const deps = { db, target, ipfs, store: store.db };

  // Transfers per wallet over the 12 months before the head.
  const s = slot.schema;
  const head = Number(
    (await pool.query(`select substr(latest_checkpoint, 1, 10) as t from "${s}"._ponder_checkpoint`)).rows[0].t,
  );
  const since = periodStart(head, "12M");
  const counts = (
    await pool.query<{ address: Address; n: number }>(
      `select w as address, count(*)::int as n from (select "from" as w from "${s}".transfer where timestamp >= $1 union all select "to" from "${s}".transfer where timestamp >= $1) x
       where w <> $2 group by w order by n desc`,
      [since, zeroAddress],
    )
  ).rows;
  const busy = counts.find((c) => c.address === busyWallet.toLowerCase()) ?? counts[0]!;
  log(
    `busiest wallets (12M rows): ${counts
      .slice(0, 5)
      .map((c) => c.n)
      .join(", ")}; median wallet: ${counts[Math.floor(counts.length / 2)]!.n}`,
  );

  // The first statement a process makes (JIT, font metrics, heap still small): after the warm-up
  // the app runs when it sets up the statement route (warmStatementPdf), or without it (--cold).
  if (!values.cold)
    log(`warming the PDF renderer, as the app does at start: ${ms((await time(() => warmStatementPdf()))[1])}`);
  const [, cold] = await time(() => makeStatement(deps, busy.address, "12M"));
  log(
    `first statement of the process (${values.cold ? "cold, no warm-up" : "after the warm-up"}), ${busy.n} rows: ${ms(cold)}`,
  );

  const totals: number[] = [];
  for (let i = 0; i < Number(values.runs); i++)
    totals.push((await time(() => makeStatement(deps, busy.address, "12M")))[1]);
  const [data, load] = await time(() => loadStatement(db, target, busy.address, "12M"));
  const [files, render] = await time(() => renderStatement(data, cidOf));
  const [, pin] = await time(async () => {
    await ipfs.add(files.csv);
    await ipfs.add(files.pdf);
  });
  log(
    `12-month statement, ${data.rows.length} transfers (${files.pdf.length} bytes of PDF, ${files.csv.length} of CSV): p50 ${ms(pct(totals, 50))}, max ${ms(Math.max(...totals))} over ${totals.length} runs`,
  );
  log(`  of which: read ${ms(load)}, render CSV+PDF ${ms(render)}, pin both ${ms(pin)}`);

  // Typical wallets: a spread of ordinary ones (the middle of the activity ranking), default period.
  const middle = counts.slice(Math.floor(counts.length * 0.25), Math.floor(counts.length * 0.75));
  const step = Math.max(1, Math.floor(middle.length / Number(values.typical)));
  const sample = middle.filter((_, i) => i % step === 0).slice(0, Number(values.typical));
  const typical: number[] = [];
  const rows: number[] = [];
  for (const w of sample) {
    const [made, t] = await time(() => makeStatement(deps, w.address, "3M"));
    typical.push(t);
    rows.push(made.data.rows.length);
  }
  log(
    `typical wallet, 3M (default), ${sample.length} wallets, median ${pct(rows, 50)} transfers: p50 ${ms(pct(typical, 50))}, p90 ${ms(pct(typical, 90))}`,
  );
  const typical12: number[] = [];
  for (const w of sample.slice(0, 20)) typical12.push((await time(() => makeStatement(deps, w.address, "12M")))[1]);
  log(`typical wallet, 12M, ${typical12.length} wallets: p50 ${ms(pct(typical12, 50))}`);
  await ipfs.close();
  await store.close();
} finally {
  await pool?.end();
  await indexer.stop().catch(() => {});
  await slot.drop().catch(() => {});
  await devnet.stop();
  rmSync(ipfsDir, { recursive: true, force: true });
}
