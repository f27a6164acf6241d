import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { OpenAPIHono } from "@hono/zod-openapi";
import { sql } from "drizzle-orm";
import { createPublicClient, type Hex, http } from "viem";
import type { AppEnv } from "../api/http/app-env.ts";
import { limitBody } from "../api/http/limits.ts";
import { requestLog } from "../api/http/log.ts";
import { mount } from "../api/http/mount.ts";
import { validationHook } from "../api/http/validation.ts";
import { indexCurrent } from "../api/indexing/gate.ts";
import { decodePayment } from "../api/payments/header.ts";
import { rowsOf } from "../api/payments/ledger/sql/statements.ts";
import { indexedPayerState, verifyWithoutRpc } from "../api/payments/local-verify.ts";
import { createPayments } from "../api/payments/payments.ts";
import { PRICES } from "../api/payments/prices.ts";
import { SettlementWorker } from "../api/payments/settlement-worker.ts";
import { checkPayment, verifyPayment } from "../api/payments/verify.ts";
import { screenHandler, screenRoute } from "../api/screen/route.ts";
import { payment } from "../api/store/schema.ts";
import type { ServiceStoreLocation } from "../api/store/store.ts";
import { WalletAssessor } from "../api/wallet/assess.ts";
import type { SettlementTiming } from "../config/payments.ts";
import { devnetDatabaseUrl } from "../config/target.ts";
import { rpc } from "../devnet/rpc.ts";
import { stoppedIndexerState } from "../harness/index-db.ts";
import { waitForBlock } from "../harness/indexer.ts";
import { devnetPaymentSettings, signAuthorization, specHeader, tokenBalance } from "../harness/payments.ts";
import { indexedPostgresDevnet } from "../harness/postgres-devnet.ts";
import { sleep } from "../shared/async.ts";
import { createLogger } from "../shared/log.ts";
import { cpuPerCall } from "./support/cpu.ts";
import { summarizeProfile } from "./support/cpuprofile.ts";
import { log, ms, pct } from "./support/figures.ts";
import { indexedReads, paidService } from "./support/paid-service.ts";
import { fundedPayers } from "./support/payers.ts";
import { statementsOf } from "./support/statements.ts";

// One JSON line per request would drown the figures: warnings only.
const quiet = createLogger({ level: "warn" });

// npm run bench:payments -- --chaos [...]: the chain freezes during a run of paid screens (bench/payments-chaos.ts).
if (process.argv.includes("--chaos")) {
  await import("./payments-chaos.ts");
  process.exit();
}

// npm run bench:payments -- [--wallets 300] [--requests 400] [--concurrency 8] [--block-time 1] [--modes before,deferred]
// On the devnet indexed into Postgres: (1) what verifying a payment costs per request, without and
// with the chain; (2) paid screens end to end (verify, claim, screen, settle on chain, ledger) in
// each settlement mode, against the same screens unpaid, one at a time (latency) and concurrently
// (throughput); then the deferred queue drained and the treasury checked against the ledger.
// --block-time 1 mines a block a second after seeding, as Celo does (automining otherwise).
// The tables are vacuumed and analyzed once indexed, and the service store before each round, as
// autovacuum would have done on a server up a while (this machine's Postgres runs without it).
// --profile writes a CPU profile of each paid throughput run and prints where its time went.
// --statements prints Postgres's time by statement, per call, in the first paid throughput run and
// the unpaid run after it: what payment adds is the difference.
// --rounds 3: each mode's throughput run and the unpaid run after it, three times: the figures are
// the median round's (by the throughput ratio), and every round's ratio is printed.
// --sustained: sustained load (issue 26's targets): 1,600 calls in the throughput run, 16 in flight,
// 64 payers, a block a second, deferred mode, 3 rounds (each can still be set by hand).
// --settler process: the answering process runs no settlement worker (X402_SETTLEMENT_WORKER=off),
// and a process of its own (bench/support/settler-process.ts) settles the shared queue.
// --modes credit: the same screens paid from prepaid credit (each payer first buys its share of
// the calls by POST /api/credit, settled on chain), by credit token: nothing settled per call.
const { values } = parseArgs({
  options: {
    wallets: { type: "string", default: "300" },
    requests: { type: "string" },
    concurrency: { type: "string" },
    /** Seconds between blocks once the devnet is seeded (Celo: 1). 0: anvil automines each transaction. */
    "block-time": { type: "string" },
    /** Settlement modes to measure (X402_SETTLEMENT). */
    modes: { type: "string" },
    /** Distinct payers (funded and indexed before the run): deferred mode caps what each may owe. */
    payers: { type: "string", default: "64" },
    /** CPU-profile each paid throughput run (this process: the app, the worker, the relayer) and summarize it. */
    profile: { type: "boolean", default: false },
    /** Paid throughput runs per mode, each between unpaid ones: one figure of a noisy machine is the median round's. */
    rounds: { type: "string" },
    /** Postgres's statements during the first paid throughput run and the unpaid run after it, per call (pg_stat_statements, when the server preloads it). */
    statements: { type: "boolean", default: false },
    sustained: { type: "boolean", default: false },
    /** Where deferred payments are settled: "in-process" (the answering process runs the worker) or "process" (X402_SETTLEMENT_WORKER=off there, and a process of its own settles). */
    settler: { type: "string", default: "in-process" },
  },
});
if (!["in-process", "process"].includes(values.settler)) throw new Error("--settler is in-process or process");
const sustained = values.sustained;
/** Half of them one at a time, half concurrently: --sustained makes the concurrent run 1,600 calls. */
const requests = Number(values.requests ?? (sustained ? 3200 : 400));
const concurrency = Number(values.concurrency ?? (sustained ? 16 : 8));
const blockTime = Number(values["block-time"] ?? (sustained ? 1 : 0));
const rounds = Number(values.rounds ?? (sustained ? 3 : 1));
/** Settlement modes, and `credit`: calls paid from prepaid credit (bought first, settled before it exists). */
type Mode = SettlementTiming["mode"] | "credit";
const modes = (values.modes ?? (sustained ? "deferred" : "before,deferred")).split(",") as Mode[];

log(`seeding a devnet with ${values.wallets} background wallets…`);
const chain = await indexedPostgresDevnet(Number(values.wallets));
let settler: Awaited<ReturnType<typeof startSettler>> | undefined;
const { devnet, indexer, store } = chain;

try {
  await waitForBlock(indexer, devnet.manifest.headBlock, 600_000);
  log(`indexed ${devnet.manifest.population.transfers} transfers`);
  const { USDT } = devnet.manifest.tokens;
  const treasury = devnet.manifest.service.treasury.address;
  const lenders = devnet.manifest.lenders.map((l) => ({ address: l.address, key: l.privateKey as Hex }));
  const settings = devnetPaymentSettings(devnet.manifestPath);
  const payments = createPayments(settings, store.db);
  const { db, target, wallets } = await indexedReads(chain);
  /** Calls with `concurrency` in flight before each app's timed runs: its pools' connections opened and its statements prepared, as in a server that has been up a while. */
  const warmCalls = Math.max(concurrency * 10, requests / 8);
  /** The paid throughput runs after each mode's first (--rounds), half the requests each. */
  const extraRoundCalls = ((rounds - 1) * requests) / 2;
  const toSign = modes.length * (requests + 100 + warmCalls + extraRoundCalls) + 400;
  /** What each payer's credit buys in credit mode: its share of the calls, in cents. */
  const creditCents = Math.ceil((wallets.length + warmCalls + requests + extraRoundCalls) / Number(values.payers)) + 2;
  // Whole USDT each, enough for every authorization signed, and in credit mode for its purchase too.
  const funding =
    Math.ceil((toSign * Number(PRICES.screen)) / Number(values.payers) / 1e6) +
    (modes.includes("credit") ? Math.ceil(creditCents / 100) : 0);
  log(`funding ${values.payers} payers (${funding} USDT each) and indexing their balances…`);
  const payers = await fundedPayers(devnet.manifest, indexer, Number(values.payers), BigInt(funding) * 1_000_000n);
  // Everything timed below reads what is indexed by now. The indexer stops here: in production it
  // runs beside the API, not on its two cores, where each settlement's block would cost it ~100 ms.
  await indexer.stop();
  /**
   * What autovacuum does on a server that has been up a while: statistics, the visibility map, dead
   * rows gone. This machine's Postgres runs without it (CI's conf.d). Without it, a prepared
   * statement's generic plan made while the ledger was small is never made again: the queued
   * answer's write scanned the whole ledger (1.2 ms a statement at 1,400 rows), more each round.
   */
  async function asAutovacuum(schemas: string[]): Promise<void> {
    const { rows } = await chain.pool.query<{ name: string }>(
      "select format('%I.%I', schemaname, tablename) as name from pg_tables where schemaname = any($1)",
      [schemas],
    );
    for (const { name } of rows) await chain.pool.query(`vacuum analyze ${name}`);
  }
  await asAutovacuum([chain.slot.schema, "service"]);
  const sign = async (i: number) => {
    const payer = payers[i % payers.length]!;
    return {
      lender: payer,
      header: specHeader(await signAuthorization(payer.key, USDT, { to: treasury }), USDT.address),
    };
  };
  log(`signing ${toSign} authorizations (client side, not timed)…`);
  const signed = await Promise.all(Array.from({ length: toSign }, (_, i) => sign(i)));
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
  // ... and the same without RPC (deferred mode): signature recovered, nonce and balance from the index.
  const noRpc: number[] = [];
  const payerState = indexedPayerState(db, target);
  for (let i = 0; i < 200; i++) {
    const { lender, header } = take();
    const t0 = performance.now();
    const attempt = decodePayment({ xPayment: header }, settings.maxHeaderBytes)!;
    const token = await checkPayment(attempt, PRICES.screen, settings, lender.address, Math.floor(Date.now() / 1000));
    if ((await verifyWithoutRpc(attempt, token, { settings, state: payerState, unsettled: 0n })) === "needs_rpc")
      throw new Error("an EOA payment needed RPC");
    noRpc.push(performance.now() - t0);
  }

  // The readiness gate every paid call passes before its payment (api/indexing/state.ts): Ponder's
  // flag and checkpoint in one statement, and the chain head (one RPC read a second, shared).
  const gate = stoppedIndexerState({
    db,
    target,
    chain: createPublicClient({ transport: http(devnet.manifest.rpcUrl) }),
  });
  const gateTimes: number[] = [];
  for (let i = 0; i < 200; i++) {
    const t0 = performance.now();
    if (!(await gate.status()).current) throw new Error("the index is not current");
    gateTimes.push(performance.now() - t0);
  }

  if (blockTime > 0) {
    // From here on the chain makes a block every `blockTime` seconds, as Celo does.
    await rpc(devnet.manifest.rpcUrl, "evm_setAutomine", [false]);
    await rpc(devnet.manifest.rpcUrl, "evm_setIntervalMining", [blockTime]);
  }

  // (2) The same screens, paid (the real app, in each settlement mode) and unpaid (the same handler, no guard).
  const assessor = new WalletAssessor({ db, target });
  const zero = { chargedUnits: 0n, token: USDT, payer: lenders[0]!.address, waived: true };
  // The screen route's own declaration and validation, behind the app's own request log and body
  // limit (api/app.ts), and the index gate every paid route passes before its payment is read (it
  // guards the data, not the money); its payment middleware replaced by a free pass: the figures
  // differ only by payment.
  const unpaidApp = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  unpaidApp.use(requestLog(quiet, [screenRoute]));
  unpaidApp.use("/api/*", limitBody);
  unpaidApp.use(async (c, nextHandler) => {
    c.set("index", gate);
    await nextHandler();
  });
  mount(
    unpaidApp,
    {
      ...screenRoute,
      middleware: [
        indexCurrent,
        async (c, nextHandler) => {
          c.set("billing", Promise.resolve(zero));
          await nextHandler();
        },
      ],
    },
    screenHandler({ db, target, assessor }),
  );
  type App = { request: (path: string, init: RequestInit) => Response | Promise<Response> };
  /** Each payer's credit token, once it bought credit (credit mode). */
  const creditTokens = new Map<string, string>();
  /** How a call is paid: not at all, by an x402 payment, or from the payer's prepaid credit. */
  type Pay = "unpaid" | "x402" | "credit";
  const call = async (app: App, i: number, pay: Pay) => {
    const payer = payers[i % payers.length]!;
    const { lender, header } =
      pay === "x402" ? take() : { lender: pay === "credit" ? payer : lenders[0]!, header: undefined };
    const credentials: Record<string, string> = header
      ? { "x-payment": header }
      : pay === "credit"
        ? { authorization: `Bearer ${creditTokens.get(payer.address)}` }
        : {};
    const res = await app.request("/api/lender/screen", {
      method: "POST",
      headers: { "content-type": "application/json", ...credentials },
      body: JSON.stringify({ walletAddress: wallets[i % wallets.length], callerAddress: lender.address }),
    });
    if (res.status !== 200) throw new Error(`screen answered ${res.status}: ${await res.text()}`);
    await res.arrayBuffer();
    if (phaseTimes)
      for (const [, name, dur] of (res.headers.get("server-timing") ?? "").matchAll(/(\w+);dur=([\d.]+)/g))
        (phaseTimes[name!] ??= []).push(Number(dur));
  };
  /** The paid calls' Server-Timing phases (payment, handler, settlement), while a latency run collects them. */
  let phaseTimes: Record<string, number[]> | undefined;
  /**
   * Paid and unpaid calls one at a time, alternately: this machine's speed drifts by tens of
   * percent between minutes, and alternating puts both under the same drift.
   */
  const latency = async (app: App, pay: Pay, n: number) => {
    const paid: number[] = [];
    const unpaid: number[] = [];
    const commits: number[] = [];
    // A one-row insert committed on a connection of its own to the same server, after each pair,
    // under the same drift: the commit round trip, which a call that records its payment before
    // its answer leaves cannot go below. Into a logged table: a temporary one writes no log, so its
    // commit waits for no flush (0.19 ms against 0.38 on an idle machine).
    const probe = await chain.pool.connect();
    try {
      await probe.query("create table if not exists commit_probe (at timestamptz)");
      for (let i = 0; i < n; i++) {
        let t0 = performance.now();
        await call(unpaidApp, i, "unpaid");
        unpaid.push(performance.now() - t0);
        t0 = performance.now();
        await call(app, i, pay);
        paid.push(performance.now() - t0);
        t0 = performance.now();
        await probe.query("insert into commit_probe values (now())");
        commits.push(performance.now() - t0);
      }
      await probe.query("drop table commit_probe");
    } finally {
      probe.release();
    }
    return { paid, unpaid, commits };
  };
  /** Bytes written to Postgres's log so far (the whole server's: nothing else runs on it meanwhile). */
  const walBytes = async () => {
    const [row] = rowsOf<{ bytes: string }>(
      await store.db.execute(sql`select wal_bytes::text as bytes from pg_stat_wal`),
    );
    return Number(row?.bytes ?? 0);
  };
  /** Calls per second with `concurrency` in flight; the CPU per call of this process and of Postgres, and the log written per call. */
  const throughput = async (app: App, pay: Pay, n: number) => {
    let i = 0;
    const wal0 = await walBytes();
    const t0 = performance.now();
    const { processMs, processSystemMs, postgresMs, machineMs, stolen } = await cpuPerCall(n, () =>
      Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (i < n) await call(app, i++, pay);
        }),
      ),
    );
    const rate = (n / (performance.now() - t0)) * 1000;
    const walKb = ((await walBytes()) - wal0) / 1024 / n;
    return { rate, processMs, processSystemMs, postgresMs, machineMs, stolen, walKb };
  };
  type Throughput = Awaited<ReturnType<typeof throughput>>;
  const cpuOf = (t: Throughput) =>
    `CPU per call: this process ${ms(t.processMs)} (${ms(t.processSystemMs)} of it in the kernel; ${((t.processMs * t.rate) / 10).toFixed(0)}% of one core at this rate: the app answers on one JavaScript thread), Postgres ${ms(t.postgresMs)}, the whole machine ${ms(t.machineMs)} (${(100 * t.stolen).toFixed(0)}% of its cores' time stolen by the hypervisor meanwhile); Postgres log ${t.walKb.toFixed(1)} kB per call`;
  // Warm the result cache over the same wallets, so the figures differ only by payment.
  for (let i = 0; i < wallets.length; i++) await call(unpaidApp, i, "unpaid");
  await throughput(unpaidApp, "unpaid", warmCalls);
  // Each paid throughput run is compared with the unpaid runs just before and just after it.
  let unpaidRun = await throughput(unpaidApp, "unpaid", requests / 2);

  /** Every payer buys the credit its share of the calls needs (one x402 payment each, settled on chain before the answer), not timed. */
  const buyCredit = async (app: App) => {
    const amount = (creditCents / 100).toFixed(2);
    log(`credit: ${payers.length} payers buy ${amount} each…`);
    await Promise.all(
      payers.map(async (payer) => {
        const value = BigInt(creditCents) * 10_000n;
        const header = specHeader(await signAuthorization(payer.key, USDT, { to: treasury, value }), USDT.address);
        const res = await app.request("/api/credit", {
          method: "POST",
          headers: { "content-type": "application/json", "x-payment": header },
          body: JSON.stringify({ amount }),
        });
        if (res.status !== 200) throw new Error(`the purchase answered ${res.status}: ${await res.text()}`);
        creditTokens.set(payer.address, ((await res.json()) as { creditToken: string }).creditToken);
      }),
    );
  };
  const treasuryBefore = await tokenBalance(devnet.manifest.rpcUrl, USDT.address, treasury);
  if (values.settler === "process") settler = await startSettler(devnet.manifestPath, chain.slot.store);
  const profiles: string[] = [];
  /** One paid throughput run, between the unpaid runs just before and after it. */
  type Round = { run: Throughput; unpaidRuns: [Throughput, Throughput]; settledFirst: number; openFor: number[] };
  const results: {
    mode: string;
    latency: number[];
    unpaidLatency: number[];
    commits: number[];
    phases: Record<string, number[]>;
    rounds: Round[];
  }[] = [];
  /** Waits until no payment is claimed and unsettled (the worker running meanwhile), at most a minute. */
  const untilSettled = async () => {
    for (let i = 0; i < 600; i++) {
      const open = (await store.db.select({ status: payment.status }).from(payment)).filter(
        (r) => r.status === "queued" || r.status === "settling" || r.status === "pending",
      );
      if (open.length === 0) return;
      await sleep(100);
    }
  };
  for (const mode of modes) {
    const pay: Pay = mode === "credit" ? "credit" : "x402";
    const { settlement, app: paidApp } = paidService(mode === "credit" ? "before" : mode, {
      settings,
      store: store.db,
      db,
      target,
      payerState,
      logger: quiet,
      worker: values.settler === "in-process",
      storeUrl: settler ? settler.storeUrl : undefined,
    });
    // Settling first waits a block per call: fewer sequential calls when blocks are slow.
    const sequential = mode === "before" && blockTime > 0 ? 20 : requests / 2;
    log(`${mode}: ${sequential} paid screens one at a time, then ${requests / 2} with ${concurrency} in flight…`);
    if (mode === "credit") await buyCredit(paidApp);
    // The app's own result cache warmed over the same wallets, as the unpaid one's was.
    for (let i = 0; i < wallets.length; i++) await call(paidApp, i, pay);
    await throughput(paidApp, pay, warmCalls);
    phaseTimes = {};
    const { paid: paidLatency, unpaid: unpaidLatency, commits } = await latency(paidApp, pay, sequential);
    const phases = phaseTimes;
    phaseTimes = undefined;
    const settledFirst = async () =>
      (await store.db.select({ deferred: payment.deferred }).from(payment)).filter((r) => !r.deferred).length;
    const runs: Round[] = [];
    for (let round = 0; round < rounds; round++) {
      // Each throughput run starts with nothing open: the rows an earlier run left unsettled would
      // otherwise count against their payers' caps in it.
      await untilSettled();
      await asAutovacuum(["service"]);
      const settledFirstBefore = await settledFirst();
      const startedAt = new Date();
      // The first round is profiled (--profile) and its statements counted (--statements), paid and unpaid.
      const profiler = values.profile && round === 0 ? await startProfiler() : undefined;
      const statements =
        values.statements && round === 0
          ? await statementsOf(devnetDatabaseUrl(chain.slot.env.DATABASE_URL!))
          : undefined;
      const run = await throughput(paidApp, pay, requests / 2);
      if (profiler) profiles.push(await profiler.stop(`payments-${mode}`));
      if (statements) profiles.push(await statements.report(`the paid ${mode} throughput run`, requests / 2));
      await untilSettled();
      const unpaidBefore = unpaidRun;
      // Profiled too, so that the paid run's profile can be read against the same calls unpaid.
      const unpaidProfiler = profiler ? await startProfiler() : undefined;
      const unpaidStatements = statements
        ? await statementsOf(devnetDatabaseUrl(chain.slot.env.DATABASE_URL!))
        : undefined;
      unpaidRun = await throughput(unpaidApp, "unpaid", requests / 2);
      if (unpaidProfiler) profiles.push(await unpaidProfiler.stop(`payments-unpaid-after-${mode}`));
      if (unpaidStatements)
        profiles.push(await unpaidStatements.report(`the unpaid throughput run after ${mode}`, requests / 2));
      // How long a deferred answer stayed unsettled (its exposure): claimed -> settled on chain and recorded.
      const deferredRows = (await store.db.select().from(payment)).filter(
        (r) => r.deferred && r.status === "settled" && r.createdAt >= startedAt,
      );
      runs.push({
        run,
        unpaidRuns: [unpaidBefore, unpaidRun],
        // Deferred calls past a payer's cap settle first (a block each): how many did, in the throughput run.
        settledFirst: (await settledFirst()) - settledFirstBefore,
        openFor: deferredRows.map((r) => r.settledAt!.getTime() - r.createdAt.getTime()),
      });
    }
    results.push({ mode, latency: paidLatency, unpaidLatency, commits, phases, rounds: runs });
    await settlement.stop();
  }
  // Every deferred row settled (or marked), and the treasury holds exactly what the ledger says.
  const drain = new SettlementWorker(createPayments({ ...settings, timing: { mode: "before" } }, store.db));
  for (let i = 0; i < 120; i++) {
    const open = (await store.db.select().from(payment)).filter(
      (r) => r.status === "queued" || r.status === "settling" || r.status === "pending",
    );
    if (open.length === 0) break;
    await drain.run();
    await sleep(500);
  }
  const ledgerRows = await store.db.select().from(payment);
  const settledRows = ledgerRows.filter((r) => r.status === "settled");
  const settledUnits = settledRows.reduce((sum, r) => sum + BigInt(r.amount), 0n);
  const treasuryGain = (await tokenBalance(devnet.manifest.rpcUrl, USDT.address, treasury)) - treasuryBefore;
  const transactions = new Set(settledRows.map((r) => r.transaction)).size;

  console.log("");
  console.log(
    `Payments benchmark: ${devnet.manifest.population.transfers} transfers indexed (Postgres), ${blockTime > 0 ? `a block every ${blockTime} s` : "anvil automining"}, self-settlement by the relayer, ${payers.length} payers`,
  );
  console.log(`(1) verification per request (${local.length} payments)`);
  console.log(`    decode + local checks:               p50 ${ms(pct(local, 50))}  p99 ${ms(pct(local, 99))}`);
  console.log(
    `    + facilitator verify (signature, simulated transfer over RPC): p50 ${ms(pct(full, 50))}  p99 ${ms(pct(full, 99))}`,
  );
  console.log(
    `    + verifyWithoutRpc (signature, nonce and balance from the index): p50 ${ms(pct(noRpc, 50))}  p99 ${ms(pct(noRpc, 99))}`,
  );
  console.log(
    `    readiness gate before it (index state from the database, chain head shared for 1 s): p50 ${ms(pct(gateTimes, 50))}  p99 ${ms(pct(gateTimes, 99))}`,
  );
  console.log(
    `(2) screens one at a time (latency, paid and unpaid alternately), then ${requests / 2} with ${concurrency} in flight (throughput, unpaid just before and after)`,
  );
  /** A round's throughput against the mean of the unpaid runs around it. */
  const ratioOf = (r: Round) => r.run.rate / ((r.unpaidRuns[0].rate + r.unpaidRuns[1].rate) / 2);
  for (const result of results) {
    const byRatio = [...result.rounds].sort((a, b) => ratioOf(a) - ratioOf(b));
    // The median round's figures (the lower middle one of an even count), and every round's ratio.
    const r = { ...result, ...byRatio[Math.floor((byRatio.length - 1) / 2)]! };
    const allRounds = `${result.rounds.length * (requests / 2)} calls in ${result.rounds.length} rounds`;
    const settledFirstAll = result.rounds.reduce((sum, x) => sum + x.settledFirst, 0);
    const unpaidRate = (r.unpaidRuns[0].rate + r.unpaidRuns[1].rate) / 2;
    console.log(
      `    unpaid           p50 ${ms(pct(r.unpaidLatency, 50))}  p99 ${ms(pct(r.unpaidLatency, 99))}  ${unpaidRate.toFixed(1)} req/s (${r.unpaidRuns.map((x) => x.rate.toFixed(0)).join(" before, ")} after); ${cpuOf(r.unpaidRuns[0])}`,
    );
    const capped =
      r.mode === "deferred"
        ? ` (${settledFirstAll} of ${allRounds} settled first, past a cap: ${((100 * settledFirstAll) / (result.rounds.length * (requests / 2))).toFixed(1)}%)`
        : "";
    console.log(
      `    paid ${r.mode.padEnd(9)}   p50 ${ms(pct(r.latency, 50))}  p99 ${ms(pct(r.latency, 99))}  ${r.run.rate.toFixed(1)} req/s${capped}; ${cpuOf(r.run)}`,
    );
    const blocks = blockTime > 0 ? `, ${(pct(r.latency, 50) / (blockTime * 1000)).toFixed(2)} blocks` : "";
    // On a machine whose cores the calls keep busy, the throughput ratio follows the inverse of this one.
    const unpaidMachineMs = (r.unpaidRuns[0].machineMs + r.unpaidRuns[1].machineMs) / 2;
    console.log(
      `      vs unpaid: +${ms(pct(r.latency, 50) - pct(r.unpaidLatency, 50))} at p50${blocks}; throughput x${(r.run.rate / unpaidRate).toFixed(3)}; the machine's CPU per call x${(r.run.machineMs / unpaidMachineMs).toFixed(2)}`,
    );
    if (result.rounds.length > 1)
      console.log(
        `      throughput ratio of each round, in order: ${result.rounds.map((x) => `x${ratioOf(x).toFixed(3)}`).join(", ")} (the figures above: the median round's)`,
      );
    console.log(
      `      Server-Timing p50: ${Object.entries(r.phases)
        .map(([name, xs]) => `${name} ${ms(pct(xs, 50))}`)
        .join(", ")}`,
    );
    console.log(
      `      a one-row commit on the same Postgres meanwhile (the floor under recording the payment before the answer leaves): p50 ${ms(pct(r.commits, 50))}`,
    );
    if (r.openFor.length)
      console.log(
        `      answered -> settled (the exposure's duration): p50 ${ms(pct(r.openFor, 50))}  p99 ${ms(pct(r.openFor, 99))}`,
      );
  }
  console.log(
    `(3) ledger: ${settledRows.length} settled in ${transactions} transactions (x${(settledRows.length / Math.max(1, transactions)).toFixed(1)} per transaction), ${ledgerRows.filter((r) => r.status === "expired").length} expired, ${ledgerRows.filter((r) => r.status === "queued" || r.status === "settling").length} still open`,
  );
  console.log(
    `    treasury received ${treasuryGain} units; the ledger's settled rows sum to ${settledUnits}: ${treasuryGain === settledUnits ? "equal" : "DIFFERENT"}`,
  );
  for (const summary of profiles) console.log(`\n${summary}`);
} finally {
  await settler?.stop();
  await chain.stop();
}

/** A V8 CPU profile of this process from now until `stop`, written to a file and summarized. */
async function startProfiler() {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.start");
  return {
    async stop(name: string) {
      const { profile } = await session.post("Profiler.stop");
      session.disconnect();
      const path = join(tmpdir(), `${name}-${Date.now()}.cpuprofile`);
      writeFileSync(path, JSON.stringify(profile));
      return summarizeProfile(path, 25);
    },
  };
}

/** The settling process of --settler process (bench/support/settler-process.ts), once it runs; `stop` ends it and waits. */
async function startSettler(manifestPath: string, store: ServiceStoreLocation) {
  if (store.kind !== "postgres") throw new Error("a settling process needs the store on Postgres");
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "bench/support/settler-process.ts", manifestPath, store.connectionString],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => chunk.toString().includes("ready") && resolve());
    child.once("exit", (code) => reject(new Error(`the settling process exited (${code}) before it was ready`)));
  });
  return {
    storeUrl: store.connectionString,
    async stop() {
      child.kill("SIGTERM");
      await exited;
    },
  };
}
