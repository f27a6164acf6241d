import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPublicClient, type Hex, http } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { priceOfRoute } from "../../api/payments/prices.ts";
import { ROUTES } from "../../api/routes.ts";
import { anvilDevAccount } from "../../devnet/accounts.ts";
import { devnetChain } from "../../devnet/chain.ts";
import { rpc } from "../../devnet/rpc.ts";
import { chainTransfers } from "../support/chain-truth.ts";
import { startTestDevnet, type TestDevnet } from "../support/devnet.ts";
import {
  crashIndexer,
  type DatabaseSlot,
  databaseSlot,
  type Indexer,
  startIndexer,
  testDatabase,
  waitFor,
} from "../support/indexer.ts";
import { signAuthorization, specHeader } from "../support/payments.ts";
import { type RpcProxy, startRpcProxy } from "../support/rpc-proxy.ts";

type Answer = { status: number; headers: Headers; body: any };
type Paid = { id: string; method: string; path: string; body?: string; nonce: Hex; header: string };

// A paid answer is only worth its index. While the backfill runs, while the RPC stalls and after a
// crash recovery, every paid route answers 503 index_not_current before the payment is touched:
// nothing is claimed or settled. Once the index is current the same payments buy answers whose
// dataAsOf.block is the block their figures were counted at (checked against eth_getLogs).
// Settlement: "before" on PGlite, "deferred" on Postgres, where an API replica (`ponder serve`) on
// the same database decides the same way.
describe(`paid routes wait for a complete, current index (${testDatabase})`, () => {
  const mode = testDatabase === "postgres" ? "deferred" : "before";
  let devnet: TestDevnet;
  let proxy: RpcProxy;
  let slot: DatabaseSlot;
  let slowManifest: string;
  const indexers: Indexer[] = [];
  let replica: Indexer | undefined;
  const ipfsDir = mkdtempSync(join(tmpdir(), "readiness-ipfs-"));
  let lender: { address: Hex; privateKey: Hex };
  let wallet: Hex;

  beforeAll(async () => {
    // ~335 blocks, as many as a year of daily blocks, but with a sixth of its transfers (~2k) to index:
    // what paces the crash recovery through the slowed proxy (below) is the number of blocks.
    devnet = await startTestDevnet({ wallets: 4, months: 3, slotHours: 6, seed: 23 });
    proxy = await startRpcProxy(devnet.manifest.rpcUrl);
    slowManifest = devnet.manifestPath.replace(/manifest\.json$/, "manifest-proxied.json");
    // It names no sanctions oracle, as a devnet made before there was one: the oracle's listings are
    // then not known to be complete, and a wallet not seen listed is inconclusive, never clear.
    const { sanctions: _, ...manifest } = JSON.parse(readFileSync(devnet.manifestPath, "utf8"));
    writeFileSync(slowManifest, JSON.stringify({ ...manifest, rpcUrl: proxy.url }));
    slot = databaseSlot();
    await slot.prepare();
    lender = devnet.manifest.lenders[1] as unknown as typeof lender;
    wallet = devnet.manifest.personas.salaried!.address as Hex;
  }, 240_000);

  afterAll(async () => {
    proxy && (proxy.hang = false);
    for (const indexer of indexers) await indexer.stop();
    await slot?.drop();
    await proxy?.close();
    await devnet?.stop();
    rmSync(ipfsDir, { recursive: true, force: true });
  });

  const start = async () => {
    const indexer = await startIndexer({
      DEVNET_MANIFEST: slowManifest,
      ...slot.env,
      X402_SETTLEMENT: mode,
      MAX_LAG_BLOCKS: "10",
      IPFS_DIR: join(ipfsDir, "indexer"),
    });
    indexers.push(indexer);
    return indexer;
  };
  const send = async (
    indexer: Indexer,
    call: { method: string; path: string; body?: string; header?: string },
  ): Promise<Answer> => {
    const headers: Record<string, string> = {
      ...(call.body ? { "content-type": "application/json" } : {}),
      ...(call.header ? { "x-payment": call.header } : {}),
    };
    const res = await fetch(`${indexer.url}${call.path}`, { method: call.method, headers, body: call.body });
    const text = await res.text();
    return {
      status: res.status,
      headers: res.headers,
      body: res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : text,
    };
  };
  const get = async (indexer: Indexer, path: string) => send(indexer, { method: "GET", path });

  /** One signed payment for each paid route, with a valid request. */
  const paidCalls = async (): Promise<Paid[]> => {
    const { USDT } = devnet.manifest.tokens;
    const treasury = devnet.manifest.service.treasury.address as Hex;
    const calls: Paid[] = [];
    // The monitors' paid routes check their body and monitor first (test/db/monitors.test.ts); their index gate is the same.
    for (const { route } of ROUTES.filter(
      (r) => priceOfRoute(r.route) > 0n && !r.route.path.startsWith("/api/monitors"),
    )) {
      const id = route.operationId!;
      const signed = await signAuthorization(lender.privateKey, USDT, {
        to: treasury,
        value: id === "report" || id === "credit" ? 100_000n : 10_000n,
      });
      const path = route.path.replace("{address}", wallet).replace("{signal}", "monthly-income");
      const body =
        route.method === "post"
          ? JSON.stringify({
              walletAddress: wallet,
              callerAddress: lender.address,
              ...(id === "chat" ? { message: "is it trustworthy?" } : {}),
              ...(id === "screenBatch" ? { wallets: [wallet] } : {}),
              ...(id === "credit" ? { amount: "0.10" } : {}),
            })
          : undefined;
      calls.push({
        id,
        method: route.method.toUpperCase(),
        path,
        body,
        nonce: signed.authorization.nonce,
        header: specHeader(signed, USDT.address),
      });
    }
    return calls;
  };

  const chain = () =>
    createPublicClient({ chain: devnetChain(devnet.manifest.rpcUrl), transport: http(devnet.manifest.rpcUrl) });
  const used = (nonce: Hex) =>
    chain().readContract({
      address: devnet.manifest.tokens.USDT.address as Hex,
      abi: devStablecoinAbi,
      functionName: "authorizationState",
      args: [lender.address, nonce],
    });

  /** Each call refused with index_not_current, Retry-After and where indexing stands; none of their authorizations used. */
  const expectRefused = async (indexer: Indexer, calls: Paid[]) => {
    for (const call of calls) {
      const res = await send(indexer, call);
      expect(res.status, `${call.id}: ${JSON.stringify(res.body)}`).toBe(503);
      expect(res.body.error.code).toBe("index_not_current");
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(2);
      expect(res.body.error.details).toMatchObject({ current: false, maxLagBlocks: 10 });
    }
    for (const call of calls) expect(await used(call.nonce), call.id).toBe(false);
  };

  /** The screen's counted transfers are exactly the chain's Transfer logs of the wallet up to dataAsOf.block. */
  const expectDataAsOf = async (screen: Answer) => {
    expect(screen.status, JSON.stringify(screen.body)).toBe(200);
    const block = BigInt(screen.body.dataAsOf.block);
    const tokens = [devnet.manifest.tokens.USDT.address, devnet.manifest.tokens.USDC.address];
    const logs = (await chainTransfers(devnet.manifest.rpcUrl, tokens, 0n)).filter((t) => t.block <= block);
    const w = wallet.toLowerCase();
    const expected = logs.filter((t) => t.to === w).length + logs.filter((t) => t.from === w).length;
    expect(expected).toBeGreaterThan(0);
    expect(screen.body.whatLendersAlreadySee.transactionCount).toBe(expected);
    expect(screen.body.sanctions).toMatchObject({ status: "inconclusive", listed: null });
  };

  /** Current, and at the head: the lenders' funding is in the last blocks, and deferred payments are verified from the index. */
  const caughtUp = (indexer: Indexer) =>
    waitFor(
      "an index at the head",
      async () => {
        const ready = await get(indexer, "/ready");
        return ready.status === 200 && ready.body.lagBlocks === 0 ? true : undefined;
      },
      indexer,
    );

  let indexer: Indexer;

  it("refuses every paid route during the backfill, charging nothing, and says where indexing stands", async () => {
    // The backfill stops a third of the way through (the chain's logs from there on are held back)
    // until it has been seen part done, however fast or loaded the machine.
    const { startBlock: first, headBlock: last } = devnet.manifest;
    proxy.holdLogsFrom = first + Math.floor((last - first) / 3);
    indexer = await start();
    const midway = await waitFor(
      "a partial backfill",
      async () => {
        const res = await get(indexer, "/api/stats").catch(() => undefined);
        return res?.status === 200 && res.body.transfers > 0 ? res.body : undefined;
      },
      indexer,
    );
    expect(midway.indexing).toMatchObject({ ready: false, current: false });
    if (testDatabase === "postgres") {
      // A replica (its own relayer, anvil #6) over the tables the indexer writes: started now that
      // they exist, so that it loads while the backfill runs (it is checked once the index is current).
      replica = await startIndexer(
        {
          DEVNET_MANIFEST: slowManifest,
          ...slot.env,
          X402_SETTLEMENT: mode,
          MAX_LAG_BLOCKS: "10",
          IPFS_DIR: join(ipfsDir, "replica"),
          X402_RELAYER_PRIVATE_KEY: anvilDevAccount(6).privateKey,
        },
        { command: "serve" },
      );
      indexers.push(replica);
    }
    expect(midway.indexing.percent).toBeLessThan(100);
    // What a person follows the backfill by: from where, how many blocks are left, how fast.
    const { startBlock, indexedBlock, headBlock, lagBlocks } = midway.indexing;
    expect(startBlock).toBe(devnet.manifest.startBlock);
    expect(lagBlocks).toBe(headBlock.number - indexedBlock.number);
    expect(lagBlocks).toBeGreaterThan(0);
    for (const speed of ["blocksPerSecond", "transfersPerSecond"])
      expect(midway.indexing[speed] === null || midway.indexing[speed] >= 0, speed).toBe(true);
    const later = await get(indexer, "/api/stats");
    expect(typeof later.body.indexing.transfersPerSecond, "a speed once the route has been called twice").toBe(
      "number",
    );

    // Readiness first: these read "the backfill is not done", and the paid calls below take a while.
    const ready = await get(indexer, "/ready");
    expect(ready.status).toBe(503);
    expect(ready.body).toMatchObject({ ready: false, current: false });
    expect(ready.headers.get("retry-after")).toBeTruthy();
    expect((await get(indexer, "/health")).body).toMatchObject({ status: "ok" });
    expect((await get(indexer, "/api/health/integrations")).body.integrations.indexer).toMatchObject({
      status: "down",
      current: false,
    });
    const calls = await paidCalls();
    await expectRefused(indexer, calls);
    const stats = await get(indexer, "/api/stats");
    expect(Object.values(stats.body.payments ?? {}).filter((n) => typeof n === "number" && n > 0)).toEqual([]);

    // Caught up: the same payments now buy answers.
    proxy.holdLogsFrom = undefined;
    await caughtUp(indexer);
    const screen = calls.find((c) => c.id === "screen")!;
    const answered = await send(indexer, screen);
    await expectDataAsOf(answered);
    await waitFor("the screen's settlement", async () => ((await used(screen.nonce)) ? true : undefined));
    expect((await get(indexer, "/ready")).body).toMatchObject({ ready: true, current: true });

    if (replica) await caughtUp(replica);
  });

  it("refuses while the RPC stalls, then answers once the index follows the chain again", async () => {
    proxy.hang = true;
    const calls = (await paidCalls()).filter((c) => ["screen", "signals"].includes(c.id));
    // The head cannot be read: how current the index is, is unknown.
    await waitFor("the stall to be seen", async () =>
      (await get(indexer, "/ready")).status === 503 ? true : undefined,
    );
    await expectRefused(indexer, calls);
    proxy.hang = false;
    await caughtUp(indexer);
    await expectDataAsOf(await send(indexer, calls[0]!));
  });

  it("after a SIGKILL and a crash recovery, refuses until the index is whole again, then answers with the right dataAsOf", async () => {
    await crashIndexer(indexer, slot);
    // Blocks made while it is down lie past what its RPC cache holds: its recovery has to fetch their
    // logs, which the proxy holds back until the refusals below have been seen, however fast the machine.
    for (let i = 0; i < 2; i++) await rpc(devnet.manifest.rpcUrl, "evm_mine");
    proxy.holdLogsFrom = devnet.manifest.startBlock;
    indexer = await start();
    const calls = await paidCalls();
    const first = await waitFor(
      "the restarted API",
      async () => {
        const res = await get(indexer, "/api/stats").catch(() => undefined);
        return res?.status === 200 ? res.body : undefined;
      },
      indexer,
    );

    // Ponder has reverted the tables to its safe checkpoint and cleared its ready flag: the
    // checkpoint it wrote before the crash is not what the tables hold.
    expect(first.indexing).toMatchObject({ ready: false, current: false });
    await expectRefused(
      indexer,
      calls.filter((c) => c.id === "screen"),
    );
    if (replica) {
      expect((await get(replica, "/ready")).body).toMatchObject({ ready: false, current: false });
      await expectRefused(
        replica,
        calls.filter((c) => c.id === "signals"),
      );
    }
    proxy.holdLogsFrom = undefined;
    await caughtUp(indexer);
    await expectDataAsOf(await send(indexer, calls.find((c) => c.id === "screen")!));
    if (replica) {
      await caughtUp(replica);
      const signals = await send(replica, calls.find((c) => c.id === "signals")!);
      expect(signals.status, JSON.stringify(signals.body)).toBe(200);
    }
  });
});
