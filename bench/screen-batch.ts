import { availableParallelism, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { OpenAPIHono } from "@hono/zod-openapi";
import { drizzle } from "drizzle-orm/node-postgres";
import type { MiddlewareHandler } from "hono";
import { zeroAddress } from "viem";
import type { IndexDb } from "../api/db.ts";
import type { AppEnv } from "../api/http/app-env.ts";
import { mount } from "../api/http/mount.ts";
import { validationHook } from "../api/http/validation.ts";
import { scoreWallet } from "../api/scoring/model.ts";
import { screenBatchHandler, screenBatchRoute } from "../api/screen/batch-route.ts";
import { screenHandler, screenRoute } from "../api/screen/route.ts";
import { WalletAssessor } from "../api/wallet/assess.ts";
import { loadWalletsFacts } from "../api/wallet/queries.ts";
import type { Address } from "../config/addresses.ts";
import { readEnv } from "../config/env.ts";
import { resolveIndexTarget } from "../config/target.ts";
import { waitForBlock } from "../harness/indexer.ts";
import { indexedPostgresDevnet } from "../harness/postgres-devnet.ts";
import * as schema from "../ponder.schema.ts";

// npm run bench:screen -- --batch [--wallets 300] [--rounds 40]
// On the default devnet (300 wallets) indexed into Postgres: screening 100 wallets as one batch
// (POST /api/lender/screen/batch) against 100 single screens (POST /api/lender/screen), one after
// another, through the routes' own declarations and handlers with payment left out (its cost is
// bench:payments'). Cold: a new result cache each round (first screens); warm: the cache kept
// (each wallet's position is still read, to confirm it).
const { values } = parseArgs({
  options: {
    batch: { type: "boolean" },
    wallets: { type: "string", default: "300" },
    rounds: { type: "string", default: "40" },
  },
});
const rounds = Number(values.rounds);
const BATCH = 100;

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const ms = (x: number) => `${x.toFixed(1)} ms`.padStart(10);
const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);

log(`seeding a devnet with ${values.wallets} background wallets…`);
const chain = await indexedPostgresDevnet(Number(values.wallets));
try {
  const { devnet, slot, indexer, pool } = chain;
  await waitForBlock(indexer, devnet.manifest.headBlock, 600_000);
  log(`indexed ${devnet.manifest.population.transfers} transfers`);
  for (const table of ["transfer", "flow", "received", "balance"])
    await pool.query(`vacuum analyze "${slot.schema}".${table}`);
  const db = drizzle(pool, { schema, casing: "snake_case" }) as unknown as IndexDb;
  const target = { ...resolveIndexTarget(readEnv({ DEVNET_MANIFEST: devnet.manifestPath })), schema: slot.schema };
  const { rows } = await pool.query<{ address: Address }>(
    `select address from balance where address <> '${zeroAddress}' group by address`,
  );
  const wallets = rows.map((r) => r.address);
  if (wallets.length < BATCH) throw new Error(`only ${wallets.length} wallets indexed; need ${BATCH}`);
  const billing = {
    chargedUnits: 0n,
    token: { ...devnet.manifest.tokens.USDT, symbol: "USDT", decimals: 6 },
    payer: devnet.manifest.lenders[0]!.address,
    waived: true,
  } as never;

  /** Both routes as declared (validation, handlers), their payment replaced by a free pass, on one assessor. */
  const app = (assessor: WalletAssessor) => {
    const deps = { db, target, assessor };
    const free: MiddlewareHandler<AppEnv> = async (c, next) => {
      c.set("billing", Promise.resolve(billing));
      c.set("assessor", assessor);
      await next();
    };
    const a = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
    mount(a, { ...screenRoute, middleware: [free] }, screenHandler(deps));
    mount(a, { ...screenBatchRoute, middleware: [free] }, screenBatchHandler(deps));
    return a;
  };
  const post = async (a: OpenAPIHono<AppEnv>, path: string, body: unknown) => {
    const res = await a.request(path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (res.status !== 200) throw new Error(`${path} answered ${res.status}: ${await res.text()}`);
    await res.arrayBuffer();
  };
  const sample = (round: number) =>
    Array.from({ length: BATCH }, (_, i) => wallets[(round * 37 + i * 7) % wallets.length]!).filter(
      (w, i, all) => all.indexOf(w) === i,
    );
  const batchOf = async (a: OpenAPIHono<AppEnv>, list: Address[]) =>
    post(a, "/api/lender/screen/batch", { wallets: list });
  const singles = async (a: OpenAPIHono<AppEnv>, list: Address[]) => {
    for (const w of list) await post(a, "/api/lender/screen", { walletAddress: w });
  };

  const timed = async (run: (a: OpenAPIHono<AppEnv>, list: Address[]) => Promise<void>, cold: boolean) => {
    const warm = app(new WalletAssessor({ db, target }));
    for (let r = 0; r < 3; r++) await run(warm, sample(r)); // warm up (and fill the warm cache)
    const times: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const a = cold ? app(new WalletAssessor({ db, target })) : warm;
      const list = cold ? sample(r) : sample(r % 3);
      const t0 = performance.now();
      await run(a, list);
      times.push(performance.now() - t0);
    }
    return times;
  };
  const figures: [string, number[]][] = [];
  for (const cold of [true, false]) {
    const label = cold ? "cold cache" : "warm cache";
    figures.push([`100-wallet batch, ${label}`, await timed(batchOf, cold)]);
    figures.push([`100 single screens, ${label}`, await timed(singles, cold)]);
  }
  // Where a cold batch's time goes: the reads (one set of statements for all wallets), then scoring.
  const reads: number[] = [];
  const scoring: number[] = [];
  for (let r = 0; r < 10; r++) {
    const t0 = performance.now();
    const { wallets: read } = await loadWalletsFacts(db, slot.schema, sample(r));
    const t1 = performance.now();
    for (const { facts } of read.values()) scoreWallet(facts);
    reads.push(t1 - t0);
    scoring.push(performance.now() - t1);
  }
  figures.push(["  of a cold batch: the reads", reads], ["  of a cold batch: scoring", scoring]);
  console.log(
    `\nScreening ${BATCH} wallets on the devnet (${devnet.manifest.population.transfers} transfers, Postgres), unpaid, ${rounds} rounds each:`,
  );
  console.log(`${"".padEnd(34)}${"p50".padStart(10)}${"p99".padStart(10)}`);
  for (const [label, times] of figures) console.log(`${label.padEnd(34)}${ms(pct(times, 50))}${ms(pct(times, 99))}`);
  const coldBatch = figures[0]![1];
  console.log(
    `load average during the run: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(", ")} on ${availableParallelism()} cores`,
  );
  console.log(`\ntarget: 100 wallets in at most 100 ms p50 (cold): ${pct(coldBatch, 50) <= 100 ? "met" : "not met"}`);
} finally {
  await chain.stop();
}
