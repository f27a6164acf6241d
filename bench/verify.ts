import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PerformanceObserver } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { encodeFunctionData, type Hex, numberToHex } from "viem";
import { reputationReporterAbi } from "../abis/ReputationReporter.ts";
import { createApp } from "../api/app.ts";
import { cidOf, type IpfsNode, openIpfs } from "../api/ipfs/node.ts";
import { canonicalBytes, drawReportId, loanCapacityText, type PassportDocument } from "../api/passport/document.ts";
import { parsePassportId } from "../api/passport/passport-id.ts";
import { createReporter, resolveReporterSettings } from "../api/passport/reporter.ts";
import type { PassportStatus } from "../api/passport/schema.ts";
import { contentHashOf, findRows } from "../api/passport/verify.ts";
import { createPayments } from "../api/payments/payments.ts";
import { indexedHead } from "../api/stats/queries.ts";
import { payment } from "../api/store/schema.ts";
import { openServiceStore } from "../api/store/store.ts";
import type { Address } from "../config/addresses.ts";
import { CELO_CHAIN_ID } from "../config/celo.ts";
import { readEnv } from "../config/env.ts";
import { resolveIndexTarget } from "../config/target.ts";
import { rpc, rpcBatch } from "../devnet/rpc.ts";
import { actorAddress } from "../devnet/scenario/random.ts";
import { startTestDevnet } from "../harness/devnet.ts";
import { openIndexDb, stoppedIndexerState } from "../harness/index-db.ts";
import { databaseSlot, startIndexer, waitForBlock } from "../harness/indexer.ts";
import { devnetPaymentSettings, signAuthorization, specHeader } from "../harness/payments.ts";
import { sleep } from "../shared/async.ts";
import { createLogger } from "../shared/log.ts";
import { waitForReceipt } from "../shared/receipt.ts";

// One JSON line per request would drown the figures: warnings only.
const quiet = createLogger({ level: "warn" });

// npm run bench:verify -- [--attestations 100000] [--samples 2000] [--requests 5000] [--concurrency 8] [--issuances 30] [--wallets 40]
// On a devnet indexed into Postgres with --attestations passports attested on our reporter contract:
// (1) GET /api/agent/verify/{id} through the real app (in process, app.request: routing, rate limit,
// SQL over the indexed rows, the IPFS integrity check, JSON), p50/p99 one at a time over --samples
// passports (by id, and some by CID and by hash), and throughput with --concurrency in flight
// (target p99 < 5 ms); (2) POST /api/agent/report paid end to end (verify and claim the payment,
// score, pin, publish and wait for the receipt, settle on chain, answer), one at a time, on the
// automining devnet.
//
// The attestations are seeded the way devnet/seed.ts seeds transfers: publishFinancialReportV2
// transactions from the reporter key (anvil #3, unlocked), automine off, as many per block as the
// block's gas allows, each block mined at its own time. The mix: about 2% expire within a second,
// 2% are revoked, 5% are superseded by a later passport of the same wallet, the rest are valid.
// Each attests the CID of its own canonical passport document; the documents of the --samples
// passports measured are pinned on the bench's IPFS node, so verify checks their content in full.
// The indexer is stopped before the measurements, so that they have the 2 cores to themselves.
const { values } = parseArgs({
  options: {
    attestations: { type: "string", default: "100000" },
    samples: { type: "string", default: "2000" },
    requests: { type: "string", default: "5000" },
    concurrency: { type: "string", default: "8" },
    issuances: { type: "string", default: "30" },
    wallets: { type: "string", default: "40" },
  },
});
const N = Number(values.attestations);
const SAMPLES = Math.min(N, Number(values.samples));
const REQUESTS = Number(values.requests);
const CONCURRENCY = Number(values.concurrency);
const ISSUANCES = Number(values.issuances);
// The in-process app has a single client ("unknown" address): lift the per-client limit to its most.
process.env.VERIFY_RATE_LIMIT_PER_MINUTE = "100000";

const pct = (xs: number[], p: number) =>
  xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]! : Number.NaN;
const ms = (x: number) => `${x.toFixed(2)} ms`;
const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);
const iso = (s: number) => new Date(s * 1000).toISOString();

type Kind = "valid" | "expired" | "revoked" | "superseded";
type Attestation = {
  reportId: string;
  cid: string;
  wallet: Address;
  kind: Kind;
  supersedes: string | null;
  doc: PassportDocument;
};

log(`seeding a devnet (${values.wallets} background wallets)…`);
const devnet = await startTestDevnet({ wallets: Number(values.wallets), months: 13, slotHours: 24 });
const { manifest } = devnet;
const contract = manifest.reporter.address;
const reporterAddress = manifest.service.reporter.address;
const buyer = manifest.lenders[0]!.address;
const ipfsDir = mkdtempSync(join(tmpdir(), "bench-verify-ipfs-"));
const slot = databaseSlot("postgres");
let indexer: Awaited<ReturnType<typeof startIndexer>> | undefined;
let ipfs: IpfsNode | undefined;
let store: Awaited<ReturnType<typeof openServiceStore>> | undefined;
let index: Awaited<ReturnType<typeof openIndexDb>> | undefined;

/** A passport document as the report route writes it (api/passport/document.ts), with varied content. */
function documentOf(
  i: number,
  a: {
    reportId: string;
    wallet: Address;
    issuedAt: number;
    expiresAt: number;
    supersedes: string | null;
    asOf: { block: number; time: string };
  },
): PassportDocument {
  const reputation = 30 + (i % 70);
  const financialHealth = 25 + ((i * 7) % 75);
  const minUsd = 100 + (i % 40) * 50;
  const maxUsd = minUsd * 2 + (i % 13) * 10;
  return {
    type: "celo-wallet-reputation/passport",
    version: 1,
    reportId: a.reportId,
    walletAddress: a.wallet,
    buyer,
    scores: {
      financialHealth,
      reputation,
      reputationCategory: reputation >= 70 ? "good" : reputation >= 50 ? "fair" : "poor",
    },
    recommendation: reputation >= 70 ? "approve" : reputation >= 50 ? "review" : "decline",
    income: {
      label: "regular",
      monthlyEstimateUsd: 800 + (i % 500),
      verifiedMonthlyUsd: 700 + (i % 400),
      weeklyConsistencyPct: 40 + (i % 60),
    },
    loanCapacity: {
      minUsd,
      maxUsd,
      confidence: "medium",
      riskCategory: "moderate",
      currency: "USD",
      attested: loanCapacityText(minUsd, maxUsd),
    },
    topFactors: [
      { score: "reputation", factor: "Regular monthly income over 12 months", points: 12 },
      { score: "financialHealth", factor: "Spends less than it receives", points: 8 },
      { score: "reputation", factor: "Many distinct counterparties", points: 5 },
    ],
    signals: { positive: ["regular_income", "stable_balance"], concerns: i % 5 === 0 ? ["recent_large_outflow"] : [] },
    thinFile: { thinFile: false, reason: null },
    modelVersion: "bench",
    dataAsOf: a.asOf,
    issuedAt: iso(a.issuedAt),
    expiresAt: iso(a.expiresAt),
    supersedes: a.supersedes,
    reporter: { contract, chainId: CELO_CHAIN_ID },
  };
}

try {
  // ---------------------------------------------------------------- seed the attestations
  const seedStarted = performance.now();
  const head = await rpc<{ timestamp: Hex; number: Hex }>(manifest.rpcUrl, "eth_getBlockByNumber", ["latest", false]);
  let blockTime = Number(BigInt(head.timestamp));
  const asOf = { block: Number(BigInt(head.number)), time: iso(blockTime) };
  const callOf = (a: Attestation) => {
    const d = a.doc;
    return encodeFunctionData({
      abi: reputationReporterAbi,
      functionName: "publishFinancialReportV2",
      args: [
        a.wallet,
        buyer,
        d.scores.reputation,
        d.scores.financialHealth,
        d.loanCapacity.attested,
        a.reportId,
        a.cid,
        BigInt(Date.parse(d.expiresAt) / 1000),
        a.supersedes ?? "",
      ],
    });
  };
  const probe = await (async () => {
    const reportId = drawReportId();
    const wallet = actorAddress(9, "bench:verify-probe");
    const doc = documentOf(0, {
      reportId,
      wallet,
      issuedAt: blockTime,
      expiresAt: blockTime + 86_400,
      supersedes: null,
      asOf,
    });
    return { reportId, cid: await cidOf(canonicalBytes(doc)), wallet, kind: "valid" as const, supersedes: null, doc };
  })();
  const publishGas = Number(
    BigInt(
      await rpc<Hex>(manifest.rpcUrl, "eth_estimateGas", [
        { from: reporterAddress, to: contract, data: callOf(probe) },
      ]),
    ),
  );
  const gasPerTx = Math.ceil(publishGas * 1.5); // a superseding publication writes a little more
  const REVOKE_GAS = 200_000;
  const block = await rpc<{ gasLimit: Hex }>(manifest.rpcUrl, "eth_getBlockByNumber", ["latest", false]);
  const perBlock = Math.floor((Number(BigInt(block.gasLimit)) * 0.9) / gasPerTx);
  log(`publishing ${N} attestations: ${publishGas} gas each, up to ${perBlock} a block…`);

  let nonce = Number(BigInt(await rpc<Hex>(manifest.rpcUrl, "eth_getTransactionCount", [reporterAddress, "pending"])));
  await rpc(manifest.rpcUrl, "evm_setAutomine", [false]);
  const ids = new Set<string>();
  const freshId = () => {
    for (;;) {
      const id = drawReportId();
      if (ids.has(id)) continue;
      ids.add(id);
      return id;
    }
  };
  const attestations: Attestation[] = [];
  const counts: Record<Kind, number> = { valid: 0, expired: 0, revoked: 0, superseded: 0 };
  let revocations = 0;
  for (let first = 0; first < N; first += perBlock) {
    const time = ++blockTime;
    const txs: { data: Hex; gas: number }[] = [];
    const revokes: Hex[] = [];
    for (let i = first; i < Math.min(N, first + perBlock); i++) {
      // Every 20th supersedes the one before it (same wallet), which is always a valid one (i - 1
      // is even, so never 7 or 13 modulo 50); the new one is then the valid one.
      const supersedes = i % 20 === 19 ? attestations[i - 1]! : null;
      const kind: Kind = i % 50 === 7 ? "expired" : i % 50 === 13 ? "revoked" : "valid";
      const reportId = freshId();
      const wallet = supersedes ? supersedes.wallet : actorAddress(9, `bench:verify-${i}`);
      const expiresAt = kind === "expired" ? time + 1 : time + 90 * 86_400;
      const doc = documentOf(i, {
        reportId,
        wallet,
        issuedAt: time,
        expiresAt,
        supersedes: supersedes?.reportId ?? null,
        asOf,
      });
      const a: Attestation = {
        reportId,
        cid: await cidOf(canonicalBytes(doc)),
        wallet,
        kind,
        supersedes: supersedes?.reportId ?? null,
        doc,
      };
      if (supersedes) supersedes.kind = "superseded";
      attestations.push(a);
      txs.push({ data: callOf(a), gas: gasPerTx });
      if (kind === "revoked")
        revokes.push(
          encodeFunctionData({
            abi: reputationReporterAbi,
            functionName: "revokeReport",
            args: [reportId, "bench: wallet reported compromised"],
          }),
        );
    }
    for (const data of revokes) txs.push({ data, gas: REVOKE_GAS });
    revocations += revokes.length;
    const calls = txs.map((t) => ({
      method: "eth_sendTransaction",
      params: [
        { from: reporterAddress, to: contract, data: t.data, gas: numberToHex(t.gas), nonce: numberToHex(nonce++) },
      ],
    }));
    for (let i = 0; i < calls.length; i += 400) await rpcBatch(manifest.rpcUrl, calls.slice(i, i + 400));
    await rpc(manifest.rpcUrl, "evm_mine", [numberToHex(time)]);
  }
  for (const a of attestations) counts[a.kind]++;
  // A last block at the present (at least 2 s after the last attestations: the short ones have expired), then automine again.
  blockTime = Math.max(Math.floor(Date.now() / 1000), blockTime + 2);
  await rpc(manifest.rpcUrl, "evm_mine", [numberToHex(blockTime)]);
  // Then empty blocks past Ponder's finality window (30 blocks on chain 42220): within it blocks are
  // indexed one at a time in realtime, where blocks of ~1,900 publications stalled on a loaded machine.
  for (let i = 0; i < 31; i++) await rpc(manifest.rpcUrl, "evm_mine", [numberToHex(++blockTime)]);
  await rpc(manifest.rpcUrl, "evm_setAutomine", [true]);
  const headBlock = Number(BigInt(await rpc<Hex>(manifest.rpcUrl, "eth_blockNumber")));
  const seedSeconds = (performance.now() - seedStarted) / 1000;
  log(
    `published ${N} attestations and ${revocations} revocations up to block ${headBlock} in ${seedSeconds.toFixed(1)} s (${(N / seedSeconds).toFixed(0)}/s): ${JSON.stringify(counts)}`,
  );

  // ---------------------------------------------------------------- index them into Postgres
  await slot.prepare();
  const indexStarted = performance.now();
  indexer = await startIndexer({ DEVNET_MANIFEST: devnet.manifestPath, ...slot.env });
  await waitForBlock(indexer, headBlock, 3_600_000);
  const indexSeconds = (performance.now() - indexStarted) / 1000;
  log(
    `indexed in ${indexSeconds.toFixed(0)} s (indexer start included); stopping the indexer so that only the measurements run`,
  );
  await indexer.stop();
  indexer = undefined;

  index = await openIndexDb(slot);
  const rowCount = await slot.read(async (q) => {
    // What autovacuum does on a running system: statistics and the visibility map.
    await q(`vacuum analyze "${slot.schema}".report`);
    return Number(
      (await q<{ n: string }>(`select count(*) as n from "${slot.schema}".report where reporter = '${contract}'`))[0]!
        .n,
    );
  });
  if (rowCount !== N) throw new Error(`${rowCount} report rows indexed, ${N} published: some publications reverted`);

  // ---------------------------------------------------------------- the app, as the service builds it
  const env = readEnv({ DEVNET_MANIFEST: devnet.manifestPath });
  const target = { ...resolveIndexTarget(env), schema: slot.schema };
  store = await openServiceStore(slot.store);
  const settings = devnetPaymentSettings(devnet.manifestPath);
  const payments = createPayments(settings, store.db);
  ipfs = await openIpfs(ipfsDir);
  const reporter = createReporter(resolveReporterSettings(target, env));
  const app = createApp({
    db: index.db,
    target,
    payments,
    index: stoppedIndexerState({ db: index.db, target, chain: payments.chain }),
    ipfs: Promise.resolve(ipfs),
    reporter,
    store: Promise.resolve(store.db),
    logger: quiet,
  });

  // The passports measured, spread over the whole set, their documents pinned.
  const step = Math.max(1, Math.floor(N / SAMPLES));
  const sample = attestations.filter((_, i) => i % step === 0).slice(0, SAMPLES);
  const pinStarted = performance.now();
  for (const a of sample) {
    const cid = await ipfs.add(canonicalBytes(a.doc));
    if (cid !== a.cid) throw new Error(`pinned ${cid}, attested ${a.cid}`);
  }
  log(
    `pinned the documents of the ${sample.length} passports measured in ${((performance.now() - pinStarted) / 1000).toFixed(1)} s`,
  );
  // The seeding's 100k documents are the bench's, not the service's: a heap the service would not
  // hold makes every major GC (and the p99 it lands on) several times longer. Only the sample stays.
  attestations.length = 0;
  ids.clear();
  const gcPauses: number[] = [];
  const gcObserver = new PerformanceObserver((list) => gcPauses.push(...list.getEntries().map((e) => e.duration)));
  gcObserver.observe({ entryTypes: ["gc"] });

  const expected: Record<Kind, PassportStatus> = {
    valid: "confirmed",
    expired: "expired",
    revoked: "revoked",
    superseded: "superseded",
  };
  const verify = async (id: string, want?: PassportStatus) => {
    const res = await app.request(`/api/agent/verify/${id}`);
    const body = (await res.json()) as { status: PassportStatus; integrity: { checked: boolean } };
    if (want && (res.status !== 200 || body.status !== want || !body.integrity.checked))
      throw new Error(
        `verify ${id}: ${res.status} ${body.status} (expected ${want}), integrity checked ${body.integrity.checked}`,
      );
    return body.status;
  };
  const timed = async (ids: { id: string; want?: PassportStatus }[]) => {
    const times: number[] = [];
    for (const { id, want } of ids) {
      const t0 = performance.now();
      await verify(id, want);
      times.push(performance.now() - t0);
    }
    return times;
  };

  // Warm-up: module loading, JIT, prepared statements, the pool's connections.
  for (const a of sample.slice(0, 200)) await verify(a.reportId, expected[a.kind]);
  // The same without the IPFS content check (a node that is unavailable: verify then leaves integrity unchecked).
  const noNode = Promise.reject(new Error("no node in this measurement"));
  noNode.catch(() => {});
  const bare = createApp({
    db: index.db,
    target,
    payments,
    index: stoppedIndexerState({ db: index.db, target, chain: payments.chain }),
    ipfs: noNode,
    reporter,
    store: Promise.resolve(store.db),
    logger: quiet,
  });
  // By id, checked and unchecked alternate request by request: both see the same caches and the same machine.
  const byId: number[] = [];
  const unchecked: number[] = [];
  const gcBefore = gcPauses.length;
  for (const a of sample) {
    byId.push(...(await timed([{ id: a.reportId, want: expected[a.kind] }])));
    const t0 = performance.now();
    await (await bare.request(`/api/agent/verify/${a.reportId}`)).arrayBuffer();
    unchecked.push(performance.now() - t0);
  }
  await sleep(10); // GC entries are delivered after the fact
  const gcDuringById = gcPauses.slice(gcBefore);
  gcObserver.disconnect();
  const byCid = await timed(sample.slice(0, 500).map((a) => ({ id: a.cid, want: expected[a.kind] })));
  const byHash = await timed(sample.slice(0, 500).map((a) => ({ id: contentHashOf(a.cid)!, want: expected[a.kind] })));
  // Unknown ids: no row, so the chain is asked whether it is pending (an eth_call per reporter).
  const unknown: number[] = [];
  for (let i = 0; i < 100; i++) {
    const t0 = performance.now();
    const res = await app.request(`/api/agent/verify/${freshId()}`);
    await res.arrayBuffer();
    if (res.status !== 404) throw new Error(`an unknown id answered ${res.status}`);
    unknown.push(performance.now() - t0);
  }
  // The SQL part alone: the rows of the id and the indexed head.
  const sql: number[] = [];
  for (const a of sample) {
    const t0 = performance.now();
    await Promise.all([findRows(index.db, parsePassportId(a.reportId)!), indexedHead(index.db, slot.schema)]);
    sql.push(performance.now() - t0);
  }
  // Throughput: CONCURRENCY clients, by id, over the sample.
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < REQUESTS) {
        const a = sample[next++ % sample.length]!;
        await verify(a.reportId, expected[a.kind]);
      }
    }),
  );
  const rate = (REQUESTS / (performance.now() - t0)) * 1000;
  const seqRate = 1000 / (byId.reduce((s, x) => s + x, 0) / byId.length);

  // ---------------------------------------------------------------- issuance, paid, end to end
  const lenders = manifest.lenders.map((l) => ({ address: l.address, key: l.privateKey as Hex }));
  const { USDT } = manifest.tokens;
  const treasury = manifest.service.treasury.address;
  const flowWallets = await slot.read((q) =>
    q<{ address: Address }>(
      `select distinct "to" as address from flow where "to" <> '0x0000000000000000000000000000000000000000' limit ${ISSUANCES + 10}`,
    ),
  );
  const wallets = [
    ...new Set([
      ...Object.values(manifest.personas).map((p) => p.address.toLowerCase() as Address),
      ...flowWallets.map((r) => r.address),
    ]),
  ];
  const issue = async (i: number) => {
    const lender = lenders[i % lenders.length]!;
    const header = specHeader(
      await signAuthorization(lender.key, USDT, { to: treasury, value: 100_000n }),
      USDT.address,
    );
    const started = performance.now();
    const res = await app.request("/api/agent/report", {
      method: "POST",
      headers: { "content-type": "application/json", "x-payment": header },
      body: JSON.stringify({ walletAddress: wallets[i % wallets.length], callerAddress: lender.address }),
    });
    const body = (await res.json()) as { reportId?: string; ipfsCid?: string };
    const took = performance.now() - started;
    if (res.status !== 200) throw new Error(`report answered ${res.status}: ${JSON.stringify(body)}`);
    return { took, body };
  };
  // The chain's own share: a bare transaction sent and its receipt polled as the reporter does (100 ms).
  const roundTrip: number[] = [];
  for (let i = 0; i < 10; i++) {
    const started = performance.now();
    const hash = await rpc<Hex>(manifest.rpcUrl, "eth_sendTransaction", [
      { from: manifest.deployer.address, to: treasury, value: "0x1" },
    ]);
    await waitForReceipt(reporter.client, { hash, pollingInterval: 100 });
    roundTrip.push(performance.now() - started);
  }
  log(`issuing ${ISSUANCES} passports, paid, one at a time (after 2 unmeasured)…`);
  for (let i = 0; i < 2; i++) await issue(wallets.length - 1 - i);
  const issuance: number[] = [];
  let lastIssued: { reportId?: string; ipfsCid?: string } = {};
  for (let i = 0; i < ISSUANCES; i++) {
    const { took, body } = await issue(i);
    issuance.push(took);
    lastIssued = body;
  }
  const served = await app.request(`/ipfs/${lastIssued.ipfsCid}`);
  await served.arrayBuffer();
  const settled = (await store.db.select().from(payment)).filter((r) => r.status === "settled").length;

  // ---------------------------------------------------------------- figures
  const p = (xs: number[]) =>
    `p50 ${ms(pct(xs, 50)).padStart(9)}  p90 ${ms(pct(xs, 90)).padStart(9)}  p99 ${ms(pct(xs, 99)).padStart(9)}`;
  console.log("");
  console.log(
    `Verify benchmark: ${N} attestations indexed (Postgres, ${JSON.stringify(counts)}), ${manifest.population.transfers} transfers, 2 cores, indexer stopped`,
  );
  console.log(
    `seeding ${N} publications: ${seedSeconds.toFixed(1)} s (${(N / seedSeconds).toFixed(0)}/s, ${perBlock} a block); indexing them: ${indexSeconds.toFixed(0)} s (${(N / indexSeconds).toFixed(0)}/s)`,
  );
  console.log(`(1) GET /api/agent/verify/{id}, the real app in process (app.request), documents pinned and checked`);
  console.log(
    `    by REP- id, ${String(byId.length).padStart(4)} passports:  ${p(byId)}  max ${ms(Math.max(...byId))}`,
  );
  console.log(`    by CID,     ${String(byCid.length).padStart(4)} passports:  ${p(byCid)}`);
  console.log(`    by 0x hash, ${String(byHash.length).padStart(4)} passports:  ${p(byHash)}`);
  console.log(`    unknown id (404, asks the chain), ${unknown.length}: ${p(unknown)}`);
  console.log(
    `    the same without the IPFS content check:  ${p(unchecked)}  (the check: ${((1 - pct(unchecked, 50) / pct(byId, 50)) * 100).toFixed(0)}% of p50)`,
  );
  console.log(
    `    of which SQL (rows by id + indexed head):  ${p(sql)}  (${((pct(sql, 50) / pct(byId, 50)) * 100).toFixed(0)}% of p50)`,
  );
  console.log(
    `    throughput: ${seqRate.toFixed(0)} req/s one at a time, ${rate.toFixed(0)} req/s with ${CONCURRENCY} in flight (x${(rate / seqRate).toFixed(2)}), ${REQUESTS} requests`,
  );
  console.log(
    `    garbage collection during the by-id run: ${gcDuringById.length} pauses, longest ${ms(Math.max(0, ...gcDuringById))}, ${ms(gcDuringById.reduce((a, b) => a + b, 0))} in all`,
  );
  console.log(
    `    p99 target < 5 ms: ${pct(byId, 99) < 5 ? "met" : "not met"} (p99 ${ms(pct(byId, 99))}, x${(pct(byId, 99) / 5).toFixed(2)} of the target)`,
  );
  console.log(
    `(2) POST /api/agent/report, paid (0.10 USDT), end to end on the automining devnet, ${issuance.length} one at a time`,
  );
  console.log(`    ${p(issuance)}  max ${ms(Math.max(...issuance))}`);
  console.log(
    `    a bare transaction and its receipt on the same chain (10): ${p(roundTrip)}; issuance sends two (publish, settle): x${(pct(issuance, 50) / pct(roundTrip, 50)).toFixed(1)} of one at p50`,
  );
  console.log(
    `    issuance vs verify at p50: x${(pct(issuance, 50) / pct(byId, 50)).toFixed(0)}; ledger rows settled: ${settled}; GET /ipfs/{cid} of the last: ${served.status} ${served.headers.get("content-type")}`,
  );
} finally {
  await indexer?.stop().catch(() => {});
  await ipfs?.close().catch(() => {});
  await store?.close().catch(() => {});
  await index?.close().catch(() => {});
  await slot.drop().catch(() => {});
  await devnet.stop();
  rmSync(ipfsDir, { recursive: true, force: true });
}
