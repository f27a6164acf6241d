import { parseArgs } from "node:util";
import { drizzle } from "drizzle-orm/node-postgres";
import { OpenAPIHono } from "@hono/zod-openapi";
import { type Hex, zeroAddress } from "viem";
import type { IndexDb } from "../api/db.ts";
import { createApp } from "../api/app.ts";
import { createLogger } from "../api/http/log.ts";
import type { AppEnv } from "../api/http/env.ts";
import { mount } from "../api/http/mount.ts";
import { validationHook } from "../api/http/validation.ts";
import { decodePayment } from "../api/payments/header.ts";
import { createPayments } from "../api/payments/payments.ts";
import { PRICES } from "../api/payments/prices.ts";
import { checkPayment, verifyPayment } from "../api/payments/verify.ts";
import { screenHandler, screenRoute } from "../api/screen/route.ts";
import { payment } from "../api/store/schema.ts";
import { WalletAssessor } from "../api/wallet/assess.ts";
import type { Address } from "../config/addresses.ts";
import { readEnv } from "../config/env.ts";
import { resolveIndexTarget } from "../config/target.ts";
import * as schema from "../ponder.schema.ts";
import { waitForBlock } from "../harness/indexer.ts";
import { indexedPostgresDevnet } from "../harness/postgres-devnet.ts";
import { devnetPaymentSettings, signAuthorization, specHeader } from "../harness/payments.ts";

// One JSON line per request would drown the figures: warnings only.
const quiet = createLogger({ level: "warn" });

// npm run bench:payments -- --chaos [...]: the chain freezes during a run of paid screens (bench/payments-chaos.ts).
if (process.argv.includes("--chaos")) {
  await import("./payments-chaos.ts");
  process.exit();
}

// npm run bench:payments -- [--wallets 300] [--requests 400] [--concurrency 8]
// On the devnet indexed into Postgres: (1) what verifying a payment costs per request, without and
// with the chain; (2) paid screens end to end (verify, claim, screen, settle on chain, ledger)
// against the same screens unpaid, one at a time (latency) and concurrently (throughput).
const { values } = parseArgs({
  options: {
    wallets: { type: "string", default: "300" },
    requests: { type: "string", default: "400" },
    concurrency: { type: "string", default: "8" },
  },
});
const requests = Number(values.requests);
const concurrency = Number(values.concurrency);

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const ms = (x: number) => `${x.toFixed(2)} ms`;
const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);

log(`seeding a devnet with ${values.wallets} background wallets…`);
const chain = await indexedPostgresDevnet(Number(values.wallets));
const { devnet, slot, indexer, pool, store } = chain;

try {
  await waitForBlock(indexer, devnet.manifest.headBlock, 600_000);
  log(`indexed ${devnet.manifest.population.transfers} transfers`);
  const { USDT } = devnet.manifest.tokens;
  const treasury = devnet.manifest.service.treasury.address;
  const lenders = devnet.manifest.lenders.map((l) => ({ address: l.address, key: l.privateKey as Hex }));
  const settings = devnetPaymentSettings(devnet.manifestPath);
  const payments = createPayments(settings, store.db);
  const db = drizzle(pool, { schema, casing: "snake_case" }) as unknown as IndexDb;
  const target = { ...resolveIndexTarget(readEnv({ DEVNET_MANIFEST: devnet.manifestPath })), schema: slot.schema };

  const { rows } = await pool.query<{ address: Address }>(`select distinct "to" as address from flow where "to" <> '${zeroAddress}' limit 100`);
  const wallets = rows.map((r) => r.address);
  const sign = async (i: number) => {
    const lender = lenders[i % lenders.length]!;
    return { lender, header: specHeader(await signAuthorization(lender.key, USDT, { to: treasury }), USDT.address) };
  };
  log(`signing ${2 * requests + 400} authorizations (client side, not timed)…`);
  const signed = await Promise.all(Array.from({ length: 2 * requests + 400 }, (_, i) => sign(i)));
  let next = 0;
  const take = () => signed[next++]!;

  // (1) Verification per request.
  const local: number[] = [];
  const full: number[] = [];
  for (let i = 0; i < 200; i++) {
    const { lender, header } = take();
    const t0 = performance.now();
    const attempt = decodePayment({ xPayment: header }, settings.maxHeaderBytes)!;
    const token = await checkPayment(attempt, PRICES.screen, settings, lender.address, Math.floor(Date.now() / 1000));
    const t1 = performance.now();
    await verifyPayment(attempt, token, payments);
    const t2 = performance.now();
    local.push(t1 - t0);
    full.push(t2 - t0);
  }

  // (2) The same screens, paid (the real app) and unpaid (the same handler, no guard).
  const paidApp = createApp({ db, target, payments, ipfs: undefined as never, logger: quiet });
  const assessor = new WalletAssessor({ db, target });
  const zero = { chargedUnits: 0n, token: USDT, payer: lenders[0]!.address, waived: true };
  // The screen route's own declaration and validation, its payment middleware replaced by a free pass.
  const unpaidApp = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  mount(
    unpaidApp,
    {
      ...screenRoute,
      middleware: [
        async (c, nextHandler) => {
          c.set("billing", zero);
          await nextHandler();
        },
      ],
    },
    screenHandler({ db, target, assessor }),
  );
  const call = async (app: { request: (path: string, init: RequestInit) => Response | Promise<Response> }, i: number, paid: boolean) => {
    const { lender, header } = paid ? take() : { lender: lenders[0]!, header: undefined };
    const res = await app.request("/api/lender/screen", {
      method: "POST",
      headers: { "content-type": "application/json", ...(header ? { "x-payment": header } : {}) },
      body: JSON.stringify({ walletAddress: wallets[i % wallets.length], callerAddress: lender.address }),
    });
    if (res.status !== 200) throw new Error(`screen answered ${res.status}: ${await res.text()}`);
    await res.arrayBuffer();
  };
  // Warm both result caches over the same wallets, so the figures differ only by payment.
  for (let i = 0; i < wallets.length; i++) await call(unpaidApp, i, false);
  for (let i = 0; i < 20; i++) await call(paidApp, i, true);

  const latency = async (app: Parameters<typeof call>[0], paid: boolean) => {
    const times: number[] = [];
    for (let i = 0; i < requests / 2; i++) {
      const t0 = performance.now();
      await call(app, i, paid);
      times.push(performance.now() - t0);
    }
    return times;
  };
  const throughput = async (app: Parameters<typeof call>[0], paid: boolean) => {
    let i = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (i < requests / 2) await call(app, i++, paid);
      }),
    );
    return (requests / 2 / (performance.now() - t0)) * 1000;
  };
  const unpaidLatency = await latency(unpaidApp, false);
  const paidLatency = await latency(paidApp, true);
  const unpaidRate = await throughput(unpaidApp, false);
  const paidRate = await throughput(paidApp, true);

  const settled = (await store.db.select().from(payment)).filter((r) => r.status === "settled").length;
  console.log("");
  console.log(`Payments benchmark: ${devnet.manifest.population.transfers} transfers indexed (Postgres), anvil automining, self-settlement by the relayer`);
  console.log(`(1) verification per request (${local.length} payments)`);
  console.log(`    decode + local checks:               p50 ${ms(pct(local, 50))}  p99 ${ms(pct(local, 99))}`);
  console.log(`    + facilitator verify (signature, simulated transfer over RPC): p50 ${ms(pct(full, 50))}  p99 ${ms(pct(full, 99))}`);
  console.log(`(2) screens, ${requests / 2} one at a time, then ${requests / 2} with ${concurrency} in flight`);
  console.log(`    unpaid: p50 ${ms(pct(unpaidLatency, 50))}  p99 ${ms(pct(unpaidLatency, 99))}  ${unpaidRate.toFixed(0)} req/s`);
  console.log(`    paid:   p50 ${ms(pct(paidLatency, 50))}  p99 ${ms(pct(paidLatency, 99))}  ${paidRate.toFixed(1)} req/s`);
  console.log(
    `    overhead of payment: +${ms(pct(paidLatency, 50) - pct(unpaidLatency, 50))} at p50 (x${(pct(paidLatency, 50) / pct(unpaidLatency, 50)).toFixed(0)}), throughput x${(paidRate / unpaidRate).toFixed(3)}`,
  );
  console.log(`    ledger rows settled: ${settled}`);
} finally {
  await chain.stop();
}
