import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage } from "node:http";
import { parseArgs } from "node:util";
import { eq } from "drizzle-orm";
import { Webhook } from "standardwebhooks";
import { encodeFunctionData, type Hex, numberToHex, zeroAddress } from "viem";
import { devStablecoinAbi } from "../abis/DevStablecoin.ts";
import { monitorEvent, webhookDelivery } from "../api/store/schema.ts";
import { openServiceStore } from "../api/store/store.ts";
import { anvilDevAccount } from "../devnet/accounts.ts";
import { freePort } from "../devnet/ports.ts";
import { rpc, rpcBatch } from "../devnet/rpc.ts";
import { startTestDevnet } from "../harness/devnet.ts";
import { databaseSlot, startIndexer, type TestDatabase, waitForBlock } from "../harness/indexer.ts";
import { x402Fetch } from "../harness/payments.ts";
import { chainHead, cleanupOnExit, fmtMs, log, pct, sampleLag, sleep } from "../harness/traffic.ts";

// npm run bench:monitor -- [--db pglite|postgres] [--wallets 10000] [--transfers 200] [--touch 0.05] [--seconds 30]
// How fast a watched wallet's change reaches its webhook. A devnet with a small history and the
// indexer; a lender pays for monitors on `--wallets` fresh wallets (POST /api/monitors, 100 wallets
// = 1.00 per payment, the x402 client), all with one webhook endpoint: a receiver in this process
// that verifies each delivery and notes when it arrived. Then anvil gets a block every second with
// `--transfers` transfers; `--touch` of them touch a watched wallet, each as a drain (an inflow, then
// 90 % of it to an address never seen before, in one seedTransfers call of the token's owner), so
// that drain.detected fires for it. Per event: from when the bench saw the block mined to the
// delivery's arrival, in ms and in blocks mined meanwhile; and the indexer's lag over the run.
const { values } = parseArgs({
  options: {
    db: { type: "string", default: "postgres" },
    wallets: { type: "string", default: "10000" },
    transfers: { type: "string", default: "200" },
    touch: { type: "string", default: "0.05" },
    seconds: { type: "string", default: "30" },
    /** Payments in flight at once while creating the monitors. */
    concurrency: { type: "string", default: "4" },
  },
});
const db = values.db as TestDatabase;
if (db !== "postgres" && db !== "pglite") throw new Error("--db: pglite or postgres");
const walletCount = Number(values.wallets);
const perBlock = Number(values.transfers);
const seconds = Number(values.seconds);
/** Watched wallets touched per block: each a drain of two transfers (in, out), within the block's transfers. */
const touchedPerBlock = Math.max(1, Math.round(perBlock * Number(values.touch)));
if (2 * touchedPerBlock > perBlock) throw new Error("--touch: each touch is two transfers; too many for --transfers");
// Each touch drains a wallet not touched before, so that each of its events is for one known block.
if (touchedPerBlock * (seconds + 5) >= walletCount) throw new Error("--wallets: too few for a fresh one per touch");
const PER_PAYMENT = 100; // wallets per POST /api/monitors: 100 x 0.01 = 1.00, the most one authorization carries
const SENDERS = [6, 7, 8].map((i) => anvilDevAccount(i).address as Hex);

const { closers, closeAll } = cleanupOnExit();
const setupStarted = performance.now();
const since = (t0: number) => `${((performance.now() - t0) / 1000).toFixed(1)} s`;
const randomAddress = () => `0x${randomBytes(20).toString("hex")}` as Hex;

// --- The receiver: every webhook-id once, when it arrived, verified with the endpoint's secret. ---
type Arrival = { at: number; type: string; wallet: string; block: number };
const arrivals = new Map<string, Arrival>();
let duplicates = 0;
let unverified = 0;
let verifier: Webhook | undefined;
const readBody = (req: IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString()));
    req.on("error", reject);
  });
const receiver = createServer(async (req, res) => {
  const at = Date.now();
  const body = await readBody(req);
  const id = String(req.headers["webhook-id"]);
  try {
    if (!verifier) throw new Error("no secret yet");
    const msg = verifier.verify(body, req.headers as Record<string, string>) as {
      type: string;
      data: { wallet: string; block: string | number };
    };
    if (arrivals.has(id)) duplicates++;
    else arrivals.set(id, { at, type: msg.type, wallet: msg.data.wallet.toLowerCase(), block: Number(msg.data.block) });
  } catch {
    unverified++;
  }
  res.writeHead(204).end();
});
const port = await freePort();
await new Promise<void>((resolve) => receiver.listen(port, "127.0.0.1", resolve));
closers.push(
  () =>
    new Promise((resolve) => {
      receiver.close(resolve);
      receiver.closeAllConnections();
    }),
);

try {
  // --- A devnet with a small history, and the indexer caught up with it. ---
  log("seeding a small devnet…");
  const devnet = await startTestDevnet({ wallets: 20, months: 12 });
  closers.push(() => devnet.stop());
  const { manifest } = devnet;
  const rpcUrl = manifest.rpcUrl;
  const token = manifest.tokens.USDT.address as Hex;
  const owner = manifest.deployer.address as Hex;
  log(`devnet: ${manifest.population.transfers} transfers seeded (${since(setupStarted)})`);
  // The senders of the background transfers and of the drains' inflows get stablecoins.
  await rpc(rpcUrl, "eth_sendTransaction", [
    {
      from: owner,
      to: token,
      data: encodeFunctionData({
        abi: devStablecoinAbi,
        functionName: "seedTransfers",
        args: [SENDERS.map(() => zeroAddress), SENDERS, SENDERS.map(() => 10n ** 15n)],
      }),
      gas: numberToHex(1_000_000),
    },
  ]);
  await rpc(rpcUrl, "evm_mine");

  const slot = databaseSlot(db);
  await slot.prepare();
  closers.push(() => slot.drop());
  const indexer = await startIndexer({
    DEVNET_MANIFEST: devnet.manifestPath,
    ...slot.env,
    LOG_LEVEL: "warn",
    POLLING_INTERVAL_MS: "1000",
    MONITOR_MAX_WALLETS_PER_OWNER: String(walletCount + 1),
    MONITOR_ALLOW_PRIVATE_ENDPOINTS: "on",
  });
  const stopIndexer = () => indexer.stop();
  closers.push(stopIndexer);
  await waitForBlock(indexer, await chainHead(rpcUrl), 600_000);
  log(`${db}: indexer caught up (${since(setupStarted)})`);

  // --- The monitors, paid for: the first payment creates the endpoint, the others reuse it. ---
  const lender = manifest.lenders[0]!;
  const paidFetch = x402Fetch(lender.privateKey as Hex, [manifest.tokens.USDT], 1_000_000n);
  const wallets = Array.from({ length: walletCount }, randomAddress);
  const createStarted = performance.now();
  let notCurrent = 0;
  const create = async (chunk: Hex[], webhook: { url: string } | { endpointId: string }) => {
    for (;;) {
      const res = await paidFetch(`${indexer.url}/api/monitors`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ wallets: chunk, webhook, callerAddress: lender.address }),
      });
      const body = (await res.json()) as { endpoint?: { id: string; secret?: string } };
      if (res.status === 200) return body;
      // Each settlement mines a block: paying fast can leave the index behind the head for a moment
      // (503 index_not_current, nothing charged): as a client does, wait as told and pay again.
      if (res.status === 503 && notCurrent++ < 1000) {
        await sleep(1000 * Number(res.headers.get("retry-after") ?? 1));
        continue;
      }
      throw new Error(`POST /api/monitors: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
    }
  };
  const first = await create(wallets.slice(0, PER_PAYMENT), { url: `http://127.0.0.1:${port}/hooks` });
  verifier = new Webhook(first.endpoint!.secret!);
  const endpointId = first.endpoint!.id;
  const chunks: Hex[][] = [];
  for (let i = PER_PAYMENT; i < wallets.length; i += PER_PAYMENT) chunks.push(wallets.slice(i, i + PER_PAYMENT));
  const paymentMs: number[] = [];
  await Promise.all(
    Array.from({ length: Number(values.concurrency) }, async () => {
      for (let chunk = chunks.shift(); chunk; chunk = chunks.shift()) {
        const t0 = performance.now();
        await create(chunk, { endpointId });
        paymentMs.push(performance.now() - t0);
      }
    }),
  );
  const payments = Math.ceil(walletCount / PER_PAYMENT);
  const createSeconds = (performance.now() - createStarted) / 1000;
  log(
    `${walletCount} monitors created with ${payments} payments (${values.concurrency} at a time) in ${since(createStarted)}; per payment p50 ${fmtMs(pct(paymentMs, 50))}; ${notCurrent} answered 503 index_not_current (not charged) and were paid again`,
  );

  // --- The watcher's first screens: a canary (the first wallet) is drained until its event arrives. ---
  const canary = wallets[0]!.toLowerCase();
  const drainCall = (pairs: { wallet: Hex; from: Hex }[], value: bigint) =>
    encodeFunctionData({
      abi: devStablecoinAbi,
      functionName: "seedTransfers",
      args: [
        pairs.flatMap((p) => [p.from, p.wallet]),
        pairs.flatMap((p) => [p.wallet, randomAddress()]),
        pairs.flatMap(() => [value, (value * 9n) / 10n]),
      ],
    });
  const screensStarted = performance.now();
  for (let live = false; !live; ) {
    if (performance.now() - screensStarted > 900_000) throw new Error("the watcher never delivered the canary's drain");
    await rpc(rpcUrl, "eth_sendTransaction", [
      { from: owner, to: token, data: drainCall([{ wallet: wallets[0]!, from: SENDERS[0]! }], 100_000_000n) },
    ]);
    const deadline = performance.now() + 10_000;
    while (!live && performance.now() < deadline) {
      await sleep(200);
      live = [...arrivals.values()].some((a) => a.wallet === canary && a.type === "drain.detected");
    }
  }
  const screensSeconds = (performance.now() - screensStarted) / 1000;
  log(`the watcher's first screens done and live (the canary's drain delivered) after ${since(screensStarted)}`);
  const setupSeconds = (performance.now() - setupStarted) / 1000;

  // --- Traffic: one block a second, `perBlock` transfers, `touchedPerBlock` of the watched wallets drained. ---
  await rpc(rpcUrl, "evm_setAutomine", [false]);
  const nonces = new Map<Hex, number>();
  for (const a of [...SENDERS, owner])
    nonces.set(a, Number(BigInt(await rpc<Hex>(rpcUrl, "eth_getTransactionCount", [a, "pending"]))));
  const nextNonce = (a: Hex) => {
    const n = nonces.get(a)!;
    nonces.set(a, n + 1);
    return numberToHex(n);
  };
  const pool = wallets.slice(1); // the canary was drained already
  const recipients = Array.from({ length: 5_000 }, randomAddress);
  /** Each block the bench mined: its number and when the bench saw it mined (Date.now()). */
  const blocks: { number: number; at: number }[] = [];
  /** Each touched wallet: the block that drained it. */
  const touched = new Map<string, { block: number; at: number }>();
  let sendErrors = 0;
  let running = true;
  const lag = sampleLag(rpcUrl, indexer.url, 250);
  // When each block was first seen indexed (Ponder's /status every 100 ms): splits mined -> queued
  // into Ponder's part and the watcher's.
  const indexedAt = new Map<number, number>();
  const indexedPoll = (async () => {
    let seen = await chainHead(rpcUrl);
    while (running) {
      const status = await fetch(`${indexer.url}/status`)
        .then((r) => r.json() as Promise<Record<string, { block?: { number: number } | null }>>)
        .catch(() => undefined);
      const n = status?.celo?.block?.number ?? 0;
      for (; seen < n; seen++) indexedAt.set(seen + 1, Date.now());
      await sleep(100);
    }
  })();
  const runStarted = performance.now();
  const traffic = (async () => {
    let tick = performance.now();
    let nextWallet = 0;
    while (running && performance.now() - runStarted < seconds * 1000) {
      const drained = Array.from({ length: touchedPerBlock }, () => pool[nextWallet++ % pool.length]!);
      const calls = [
        {
          from: owner,
          to: token,
          data: drainCall(
            drained.map((wallet, i) => ({ wallet, from: SENDERS[i % SENDERS.length]! })),
            BigInt(1_000_000 + Math.floor(Math.random() * 1_000_000_000)),
          ),
          gas: numberToHex(100_000 + 80_000 * drained.length),
          nonce: nextNonce(owner),
        },
        ...Array.from({ length: perBlock - 2 * touchedPerBlock }, (_, i) => {
          const from = SENDERS[i % SENDERS.length]!;
          const to = recipients[Math.floor(Math.random() * recipients.length)]!;
          return {
            from,
            to: token,
            data: encodeFunctionData({
              abi: devStablecoinAbi,
              functionName: "transfer",
              args: [to, BigInt(1 + Math.floor(Math.random() * 100_000_000))],
            }),
            gas: numberToHex(90_000),
            nonce: nextNonce(from),
          };
        }),
      ].map((tx) => ({ method: "eth_sendTransaction", params: [tx] }));
      try {
        for (let i = 0; i < calls.length; i += 500) await rpcBatch(rpcUrl, calls.slice(i, i + 500));
      } catch (error) {
        if (sendErrors++ < 3) log(`sending transfers: ${(error as Error).message}`);
      }
      await rpc(rpcUrl, "evm_mine");
      const at = Date.now();
      const number = await chainHead(rpcUrl);
      blocks.push({ number, at });
      for (const w of drained) if (!touched.has(w.toLowerCase())) touched.set(w.toLowerCase(), { block: number, at });
      tick += 1000;
      const wait = tick - performance.now();
      if (wait > 0) await sleep(wait);
      else tick = performance.now();
    }
  })();
  await traffic;
  const { lags, missed } = await lag.stop();
  const elapsed = (performance.now() - runStarted) / 1000;
  await rpc(rpcUrl, "evm_setAutomine", [true]);

  // The last blocks' events: wait until each touched wallet's drain arrived, or nothing more does for 15 s.
  const isExpected = (a: Arrival) => a.type === "drain.detected" && touched.has(a.wallet);
  const deliveredCount = () => [...arrivals.values()].filter(isExpected).length;
  for (let last = -1, quietSince = Date.now(); deliveredCount() < touched.size && Date.now() - quietSince < 15_000; ) {
    const n = arrivals.size;
    if (n !== last) [last, quietSince] = [n, Date.now()];
    await sleep(250);
  }

  running = false;
  await indexedPoll;

  // --- Figures ---
  const headAt = (t: number) => {
    let head = 0;
    for (const b of blocks) if (b.at <= t) head = b.number;
    return head;
  };
  const ms: number[] = [];
  const inBlocks: number[] = [];
  const eventBlockDelay: number[] = [];
  const otherTypes = new Map<string, number>();
  let unexpected = 0;
  const runArrivals = [...arrivals.entries()].filter(([, a]) => a.wallet !== canary);
  for (const [, a] of runArrivals) {
    const t = touched.get(a.wallet);
    if (!t) {
      unexpected++;
      continue;
    }
    if (a.type !== "drain.detected") {
      otherTypes.set(a.type, (otherTypes.get(a.type) ?? 0) + 1);
      continue;
    }
    ms.push(a.at - t.at);
    inBlocks.push(headAt(a.at) - t.block);
    eventBlockDelay.push(a.block - t.block);
  }
  const missing = [...touched.keys()].filter(
    (w) => !runArrivals.some(([, a]) => a.wallet === w && a.type === "drain.detected"),
  );

  // Where the time went (service store): block mined -> event queued by the watcher -> delivered.
  closers.splice(closers.indexOf(stopIndexer), 1);
  await indexer.stop();
  const store = await openServiceStore(slot.store);
  const rows = await store.db
    .select({
      id: monitorEvent.id,
      wallet: monitorEvent.wallet,
      queued: monitorEvent.createdAt,
      delivered: webhookDelivery.deliveredAt,
    })
    .from(monitorEvent)
    .leftJoin(webhookDelivery, eq(webhookDelivery.eventId, monitorEvent.id))
    .where(eq(monitorEvent.type, "drain.detected"));
  await store.close();
  const toIndexed: number[] = [];
  const toQueue: number[] = [];
  const toDeliver: number[] = [];
  for (const r of rows) {
    const t = touched.get(r.wallet.toLowerCase());
    if (!t) continue;
    const indexed = indexedAt.get(t.block);
    if (indexed !== undefined) {
      toIndexed.push(indexed - t.at);
      toQueue.push(r.queued.getTime() - indexed);
    }
    if (r.delivered) toDeliver.push(r.delivered.getTime() - r.queued.getTime());
  }

  const blocksPerSecond = blocks.length / elapsed;
  const f = (xs: number[]) => (xs.length ? xs : [Number.NaN]);
  console.log(
    `\nMonitors: ${walletCount} watched wallets (${payments} x402 payments through POST /api/monitors, one webhook endpoint: a receiver in this process), ${db}`,
  );
  console.log(
    `setup ${setupSeconds.toFixed(0)} s, of which creating the monitors ${createSeconds.toFixed(1)} s (${(createSeconds / payments).toFixed(2)} s/payment, ${values.concurrency} at a time) and the watcher's first screens ${screensSeconds.toFixed(1)} s (until a drain of a canary wallet was delivered)`,
  );
  console.log(
    `traffic: ${blocks.length} blocks in ${elapsed.toFixed(1)} s (${blocksPerSecond.toFixed(2)} blocks/s), ${perBlock} transfers/block, ${touchedPerBlock} watched wallets drained per block (${touchedPerBlock * 2} of the transfers), ${touched.size} wallets touched${sendErrors ? `, ${sendErrors} send errors` : ""}`,
  );
  console.log(
    `drain.detected delivered for touched wallets: ${ms.length} of ${touched.size} expected (${((100 * ms.length) / Math.max(1, touched.size)).toFixed(1)} %)` +
      `; other events for them: ${[...otherTypes].map(([k, v]) => `${k} ${v}`).join(", ") || "none"}; for wallets not touched: ${unexpected}; duplicates ${duplicates}; unverified ${unverified}` +
      (missing.length ? `; missing e.g. ${missing.slice(0, 3).join(", ")}` : ""),
  );
  console.log(
    `block mined -> webhook delivered: p50 ${fmtMs(pct(f(ms), 50))} p99 ${fmtMs(pct(f(ms), 99))} max ${fmtMs(Math.max(...f(ms)))}` +
      `; in blocks mined meanwhile: p50 ${pct(f(inBlocks), 50)} p99 ${pct(f(inBlocks), 99)} max ${Math.max(...f(inBlocks))} (target p99 < 2 blocks)`,
  );
  console.log(
    `  of which mined -> indexed (Ponder's polling and indexing, seen every 100 ms): p50 ${fmtMs(pct(f(toIndexed), 50))} p99 ${fmtMs(pct(f(toIndexed), 99))}; indexed -> event queued (watcher): p50 ${fmtMs(pct(f(toQueue), 50))} p99 ${fmtMs(pct(f(toQueue), 99))}; queued -> delivered (worker): p50 ${fmtMs(pct(f(toDeliver), 50))} p99 ${fmtMs(pct(f(toDeliver), 99))}` +
      `; the event's block minus the drain's block: p50 ${pct(f(eventBlockDelay), 50)} max ${Math.max(...f(eventBlockDelay))}`,
  );
  console.log(
    `indexer lag (head - indexed, every 250 ms): p50 ${pct(f(lags), 50)} p99 ${pct(f(lags), 99)} max ${Math.max(...f(lags))} blocks (${lags.length} samples, ${missed} missed; target within 2)`,
  );
} finally {
  await closeAll();
}
