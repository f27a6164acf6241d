import { parseArgs } from "node:util";
import { indexedPayerState } from "../api/payments/local-verify.ts";
import { payment } from "../api/store/schema.ts";
import type { SettlementTiming } from "../config/payments.ts";
import { waitForBlock } from "../harness/indexer.ts";
import { devnetPaymentSettings, signAuthorization, tokenBalance, v2Header } from "../harness/payments.ts";
import { indexedPostgresDevnet } from "../harness/postgres-devnet.ts";
import { sleep } from "../shared/async.ts";
import { createLogger } from "../shared/log.ts";
import { log, ms, pct } from "./support/figures.ts";
import { indexedReads, paidService } from "./support/paid-service.ts";
import { fundedPayers } from "./support/payers.ts";

// npm run bench:mcp -- [--wallets 300] [--requests 400] [--concurrency 8] [--mode before|deferred]
// On the devnet indexed into Postgres: paid screens through the MCP tool `screen_wallet` (JSON-RPC
// over POST /mcp, the payment in _meta) against the same paid screens over HTTP (POST
// /api/lender/screen, the payment in PAYMENT-SIGNATURE), same app, same settlement mode, same
// payers: one at a time (p50, p99), then concurrently (throughput). The two alternate, run by run,
// so that drift (cache, JIT, the chain) falls on both. Target: MCP p50 within 2 ms of HTTP.
const { values } = parseArgs({
  options: {
    wallets: { type: "string", default: "300" },
    requests: { type: "string", default: "400" },
    concurrency: { type: "string", default: "8" },
    mode: { type: "string", default: "before" },
    payers: { type: "string", default: "64" },
  },
});
const requests = Number(values.requests);
const concurrency = Number(values.concurrency);
const mode = values.mode as SettlementTiming["mode"];

const quiet = createLogger({ level: "warn" });

log(`seeding a devnet with ${values.wallets} background wallets…`);
const chain = await indexedPostgresDevnet(Number(values.wallets));
const { devnet, indexer, store } = chain;

try {
  await waitForBlock(indexer, devnet.manifest.headBlock, 600_000);
  const { USDT } = devnet.manifest.tokens;
  const treasury = devnet.manifest.service.treasury.address;
  const settings = devnetPaymentSettings(devnet.manifestPath);
  const { db, target, wallets } = await indexedReads(chain);

  log(`funding ${values.payers} payers (1 USDT each) and indexing their balances…`);
  const payers = await fundedPayers(devnet.manifest, indexer, Number(values.payers));
  // As in bench:payments: the indexer stops, so that both transports share two cores only with the app.
  await indexer.stop();

  // Every payment signed before timing, in the x402 v2 PaymentPayload both transports carry.
  const total = 2 * (requests + wallets.length) + 8;
  log(`signing ${total} authorizations (client side, not timed)…`);
  const signed = await Promise.all(
    Array.from({ length: total }, async (_, i) => {
      const payer = payers[i % payers.length]!;
      const header = v2Header(await signAuthorization(payer.key, USDT, { to: treasury }), USDT, treasury);
      return { payer: payer.address, header, payload: JSON.parse(Buffer.from(header, "base64").toString()) };
    }),
  );
  let next = 0;
  const take = () => signed[next++]!;

  const { settlement, app } = paidService(mode, {
    settings,
    store: store.db,
    db,
    target,
    payerState: indexedPayerState(db, target),
    logger: quiet,
  });

  type Transport = "http" | "mcp";
  let rpcId = 0;
  const call = async (transport: Transport, i: number) => {
    const { payer, header, payload } = take();
    const args = { walletAddress: wallets[i % wallets.length], callerAddress: payer };
    if (transport === "http") {
      const res = await app.request("/api/lender/screen", {
        method: "POST",
        headers: { "content-type": "application/json", "payment-signature": header },
        body: JSON.stringify(args),
      });
      if (res.status !== 200) throw new Error(`HTTP screen answered ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
      return;
    }
    const res = await app.request("/mcp", {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: ++rpcId,
        method: "tools/call",
        params: { name: "screen_wallet", arguments: args, _meta: { "x402/payment": payload } },
      }),
    });
    const answer = (await res.json()) as { result?: { isError?: boolean; _meta?: Record<string, unknown> } };
    if (
      res.status !== 200 ||
      !answer.result ||
      answer.result.isError ||
      !answer.result._meta?.["x402/payment-response"]
    )
      throw new Error(`MCP screen_wallet answered ${res.status}: ${JSON.stringify(answer).slice(0, 400)}`);
  };

  const treasuryBefore = await tokenBalance(devnet.manifest.rpcUrl, USDT.address, treasury);
  // Warm both paths over the same wallets (result cache, JIT).
  for (let i = 0; i < wallets.length; i++) {
    await call("http", i);
    await call("mcp", i);
  }
  const latency: Record<Transport, number[]> = { http: [], mcp: [] };
  const sequential = mode === "before" ? Math.min(requests / 2, 100) : requests / 2;
  log(`${mode}: ${sequential} paid screens one at a time over each transport, alternating…`);
  for (let i = 0; i < sequential; i++)
    for (const transport of (i % 2 ? ["http", "mcp"] : ["mcp", "http"]) as Transport[]) {
      const t0 = performance.now();
      await call(transport, i);
      latency[transport].push(performance.now() - t0);
    }
  const throughput = async (transport: Transport, n: number) => {
    let i = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (i < n) await call(transport, i++);
      }),
    );
    return (n / (performance.now() - t0)) * 1000;
  };
  log(`${mode}: ${requests / 2} paid screens with ${concurrency} in flight over each transport…`);
  const rate: Record<Transport, number[]> = { http: [], mcp: [] };
  for (const transport of ["http", "mcp", "mcp", "http"] as Transport[])
    rate[transport].push(await throughput(transport, requests / 4));
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

  // Everything settled, then the treasury against the ledger.
  for (let i = 0; i < 600; i++) {
    const open = (await store.db.select({ status: payment.status }).from(payment)).filter(
      (r) => r.status === "queued" || r.status === "settling" || r.status === "pending",
    );
    if (open.length === 0) break;
    await sleep(100);
  }
  await settlement.stop();
  const settled = (await store.db.select().from(payment)).filter((r) => r.status === "settled");
  const ledgerUnits = settled.reduce((sum, r) => sum + BigInt(r.amount), 0n);
  const received = (await tokenBalance(devnet.manifest.rpcUrl, USDT.address, treasury)) - treasuryBefore;

  const p50 = { http: pct(latency.http, 50), mcp: pct(latency.mcp, 50) };
  console.log("");
  console.log(
    `MCP benchmark: paid screens, ${mode} settlement, self-settlement by the relayer, ${payers.length} payers, Postgres`,
  );
  for (const transport of ["http", "mcp"] as Transport[])
    console.log(
      `    ${transport === "http" ? "HTTP POST /api/lender/screen" : "MCP tools/call screen_wallet"}: p50 ${ms(pct(latency[transport], 50))}  p99 ${ms(pct(latency[transport], 99))}  ${mean(rate[transport]).toFixed(1)} req/s (${concurrency} in flight)`,
    );
  console.log(
    `    MCP vs HTTP: p50 +${ms(p50.mcp - p50.http)} (target: within 2 ms); throughput x${(mean(rate.mcp) / mean(rate.http)).toFixed(3)}`,
  );
  console.log(
    `    ledger: ${settled.length} settled; the treasury received ${received} units, the ledger's settled rows sum to ${ledgerUnits}: ${received === ledgerUnits ? "equal" : "DIFFERENT"}`,
  );
} finally {
  await chain.stop();
}
