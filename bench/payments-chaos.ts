import { parseArgs } from "node:util";
import { drizzle } from "drizzle-orm/node-postgres";
import { createPublicClient, type Hex, http, zeroAddress } from "viem";
import { devStablecoinAbi } from "../abis/DevStablecoin.ts";
import { createApp } from "../api/app.ts";
import type { IndexDb } from "../api/db.ts";
import { createPayments } from "../api/payments/payments.ts";
import type { Address } from "../config/addresses.ts";
import { readEnv } from "../config/env.ts";
import { resolveIndexTarget } from "../config/target.ts";
import { alwaysCurrent } from "../harness/index-db.ts";
import { waitForBlock } from "../harness/indexer.ts";
import { devnetPaymentSettings, signAuthorization, specHeader, tokenBalance } from "../harness/payments.ts";
import { indexedPostgresDevnet } from "../harness/postgres-devnet.ts";
import * as schema from "../ponder.schema.ts";
import { sleep } from "../shared/async.ts";
import { createLogger } from "../shared/log.ts";

// One JSON line per request would drown the figures: warnings only.
const quiet = createLogger({ level: "warn" });

// npm run bench:payments -- --chaos [--chaos-seconds 300] [--freeze-every 60] [--freeze-seconds 10]
//                                  [--concurrency 8] [--wallets 40]
// Paid screens (the real app over the devnet indexed into Postgres, self-settlement on anvil) for
// --chaos-seconds while anvil is frozen (SIGSTOP, then SIGCONT) for --freeze-seconds every
// --freeze-every seconds. Each of --concurrency clients pays for one screen after another, and
// retries a call that did not give an answer (5xx: settlement_unavailable, settlement_pending) with
// the same payment until it gets the data or a definitive refusal (4xx). At the end, unknown
// outcomes are reconciled with the chain and every authorization is looked up on chain:
//   charges without data: authorizations used on chain whose client never got the data (target 0)
//   data without charges: answers with data whose authorization is unused on chain (target 0)
const { values } = parseArgs({
  options: {
    chaos: { type: "boolean", default: true },
    "chaos-seconds": { type: "string", default: "300" },
    "freeze-every": { type: "string", default: "60" },
    "freeze-seconds": { type: "string", default: "10" },
    concurrency: { type: "string", default: "8" },
    wallets: { type: "string", default: "40" },
  },
});
const seconds = Number(values["chaos-seconds"]);
const freezeEvery = Number(values["freeze-every"]);
const freezeSeconds = Number(values["freeze-seconds"]);
const concurrency = Number(values.concurrency);
/** Clients stop retrying this long after the run (the chain answers again by then). */
const RETRY_GRACE_MS = 120_000;
/** An x402 client waits Retry-After (5 s) before retrying; this one waits at most this long, to retry more often. */
const MAX_RETRY_WAIT_MS = 1_000;

const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);
const pct = (xs: number[], p: number) =>
  xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]! : 0;

log(
  `chaos run: ${seconds} s of paid screens, ${concurrency} clients, anvil frozen ${freezeSeconds} s every ${freezeEvery} s`,
);
log(`seeding a devnet with ${values.wallets} background wallets…`);
const chain = await indexedPostgresDevnet(Number(values.wallets));
const { devnet, slot, indexer, pool, store } = chain;
const anvilPid = devnet.anvil.pid;
const resume = () => {
  try {
    process.kill(anvilPid, "SIGCONT");
  } catch {
    /* gone */
  }
};

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
  // The chain freezes on purpose here: the readiness gate would refuse every call meanwhile (503
  // index_not_current, test/db/index-readiness.test.ts). This measures the payment path behind it.
  const app = createApp({ db, target, payments, index: alwaysCurrent, ipfs: undefined as never, logger: quiet });
  const { rows } = await pool.query<{ address: Address }>(
    `select distinct "to" as address from flow where "to" <> '${zeroAddress}' limit 100`,
  );
  const wallets = rows.map((r) => r.address);
  const treasuryBefore = await tokenBalance(devnet.manifest.rpcUrl, USDT.address, treasury);

  type Job = {
    from: Hex;
    nonce: Hex;
    attempts: number;
    data: number;
    refusal?: string;
    firstAt: number;
    dataAt?: number;
  };
  const jobs: Job[] = [];
  const answers = new Map<string, number>();
  const count = (key: string) => answers.set(key, (answers.get(key) ?? 0) + 1);

  const started = Date.now();
  const end = started + seconds * 1000;
  const freezes: { at: number; ms: number }[] = [];
  const freezer = (async () => {
    for (let t = freezeEvery; t < seconds; t += freezeEvery) {
      await sleep(started + t * 1000 - Date.now());
      const at = Date.now();
      process.kill(anvilPid, "SIGSTOP");
      log(`anvil frozen (${freezes.length + 1})`);
      await sleep(freezeSeconds * 1000);
      resume();
      freezes.push({ at: (at - started) / 1000, ms: Date.now() - at });
      log(`anvil resumed after ${((Date.now() - at) / 1000).toFixed(1)} s`);
    }
  })();

  const pay = async (i: number) => {
    const lender = lenders[i % lenders.length]!;
    const signed = await signAuthorization(lender.key, USDT, { to: treasury });
    const job: Job = {
      from: signed.authorization.from,
      nonce: signed.authorization.nonce,
      attempts: 0,
      data: 0,
      firstAt: Date.now(),
    };
    jobs.push(job);
    const init = {
      method: "POST",
      headers: { "content-type": "application/json", "x-payment": specHeader(signed, USDT.address) },
      body: JSON.stringify({ walletAddress: wallets[i % wallets.length], callerAddress: lender.address }),
    };
    for (;;) {
      job.attempts++;
      const res = await app.request("/api/lender/screen", init);
      const body = (await res.json().catch(() => ({}))) as {
        code?: string;
        error?: { code?: string };
        status?: string;
      };
      const code = body.code ?? body.error?.code ?? "";
      count(`${res.status}${code ? ` ${code}` : ""}`);
      if (res.status === 200) {
        job.data++;
        job.dataAt = Date.now();
        return;
      }
      if (res.status < 500) {
        job.refusal = `${res.status} ${code}`;
        return;
      }
      if (Date.now() > end + RETRY_GRACE_MS) {
        job.refusal = `gave up after ${job.attempts} attempts (${res.status} ${code})`;
        return;
      }
      await sleep(Math.min(MAX_RETRY_WAIT_MS, Number(res.headers.get("retry-after") ?? 1) * 1000));
    }
  };
  let next = 0;
  let lastReport = started;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < end) {
        await pay(next++);
        if (Date.now() - lastReport > 30_000) {
          lastReport = Date.now();
          log(
            `${Math.round((Date.now() - started) / 1000)} s: ${jobs.length} payments, ${jobs.filter((j) => j.data).length} answered with data`,
          );
        }
      }
    }),
  );
  await freezer;
  resume();
  log(
    `run over: ${jobs.length} payments in ${((Date.now() - started) / 1000).toFixed(0)} s; reconciling unknown outcomes…`,
  );

  // Whatever is still unknown is read from the chain (what the background reconciler does).
  for (let round = 0; round < 30; round++) {
    await payments.reconcileUnresolved(0);
    const counts = await payments.ledger.outcomeCounts();
    if (counts.pending + counts.settling === 0) break;
    await sleep(2_000);
  }
  const chain = createPublicClient({ transport: http(devnet.manifest.rpcUrl) });
  const used: boolean[] = [];
  for (let i = 0; i < jobs.length; i += 50) {
    used.push(
      ...(await Promise.all(
        jobs.slice(i, i + 50).map((j) =>
          chain.readContract({
            address: USDT.address,
            abi: devStablecoinAbi,
            functionName: "authorizationState",
            args: [j.from, j.nonce],
          }),
        ),
      )),
    );
  }
  const treasuryGain = (await tokenBalance(devnet.manifest.rpcUrl, USDT.address, treasury)) - treasuryBefore;
  const counts = await payments.ledger.outcomeCounts();

  const withData = jobs.filter((j) => j.data > 0);
  const chargesWithoutData = jobs.filter((j, i) => used[i] && j.data === 0);
  const dataWithoutCharges = jobs.filter((j, i) => !used[i] && j.data > 0);
  const refusals = new Map<string, number>();
  for (const j of jobs) if (j.refusal) refusals.set(j.refusal, (refusals.get(j.refusal) ?? 0) + 1);
  const toData = withData.map((j) => j.dataAt! - j.firstAt);
  const totalAnswers = [...answers.values()].reduce((a, b) => a + b, 0);
  const price = 10_000n;

  console.log("");
  console.log(
    `Payments chaos run: ${seconds} s, ${concurrency} clients, anvil frozen ${freezes.length}× (${freezes.map((f) => `${f.at.toFixed(0)} s for ${(f.ms / 1000).toFixed(1)} s`).join(", ")})`,
  );
  console.log(`  payments (authorizations signed):         ${jobs.length}`);
  console.log(
    `  answered with data:                       ${withData.length} (more than once: ${jobs.filter((j) => j.data > 1).length})`,
  );
  console.log(
    `  definitive refusals:                      ${jobs.length - withData.length}${refusals.size ? ` (${[...refusals].map(([k, n]) => `${k}: ${n}`).join(", ")})` : ""}`,
  );
  console.log(
    `  calls (first tries and retries):          ${totalAnswers}: ${[...answers]
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${k}: ${n}`)
      .join(", ")}`,
  );
  console.log(
    `  time to data (retries included):          p50 ${pct(toData, 50)} ms, p99 ${pct(toData, 99)} ms, max ${Math.max(0, ...toData)} ms`,
  );
  console.log(`  authorizations used on chain:             ${used.filter(Boolean).length}`);
  console.log(`  CHARGES WITHOUT DATA:                     ${chargesWithoutData.length} (target 0)`);
  console.log(`  DATA WITHOUT CHARGES:                     ${dataWithoutCharges.length} (target 0)`);
  console.log(
    `  treasury gain:                            ${treasuryGain} units; price × answers with data = ${price * BigInt(withData.length)}${treasuryGain === price * BigInt(withData.length) ? " (equal)" : " (DIFFERENT)"}`,
  );
  console.log(
    `  ledger: ${Object.entries(counts)
      .map(([k, n]) => `${k} ${n}`)
      .join(", ")}`,
  );
  if (chargesWithoutData.length || dataWithoutCharges.length) process.exitCode = 1;
} finally {
  resume();
  await chain.stop();
}
