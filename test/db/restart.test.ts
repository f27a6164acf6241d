import { readFileSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { IndexTarget } from "../../config/target.ts";
import { restartInterruptedPgliteBackfill } from "../../scripts/live-data.ts";
import { chainTransfers, expectedIndex, indexRows } from "../support/chain-truth.ts";
import { startTestDevnet, type TestDevnet } from "../support/devnet.ts";
import {
  type DatabaseSlot,
  databaseSlot,
  type Indexer,
  startIndexer,
  stats,
  testDatabase,
  waitFor,
  waitForBlock,
} from "../support/indexer.ts";
import { type RpcProxy, startRpcProxy } from "../support/rpc-proxy.ts";

// Stopping the indexer in the middle of its backfill and starting it again ends with every row the
// chain's Transfer logs make, each once (test/support/chain-truth.ts recomputes them from
// eth_getLogs). On Postgres it resumes from its checkpoint; on PGlite the launcher starts an
// interrupted backfill over (see restartInterruptedPgliteBackfill).
describe(`restart during backfill (${testDatabase})`, () => {
  let devnet: TestDevnet;
  let proxy: RpcProxy;
  let slot: DatabaseSlot;
  const indexers: Indexer[] = [];

  beforeAll(async () => {
    // Four months of daily blocks (~120; Ponder backfills all but the last 30, then follows them live):
    // its backfill fetches 25 blocks first, then ranges 1.5 times larger, so the slowed run below is
    // stopped after its first range with two more still to fetch.
    devnet = await startTestDevnet({ wallets: 10, months: 4, seed: 11 });
    proxy = await startRpcProxy(devnet.manifest.rpcUrl);
    slot = databaseSlot();
    await slot.prepare();
  }, 240_000);

  afterAll(async () => {
    for (const indexer of indexers) await indexer.stop();
    await slot?.drop();
    await proxy?.close();
    await devnet?.stop();
  });

  const run = async (manifestPath: string, env: Record<string, string> = {}) => {
    const indexer = await startIndexer({ DEVNET_MANIFEST: manifestPath, ...slot.env, ...env });
    indexers.push(indexer);
    return indexer;
  };

  it("ends with every row the chain's logs make, as if never interrupted", async () => {
    // The indexer reaches the devnet through the proxy, slowed so the backfill takes a while.
    const slowManifest = devnet.manifestPath.replace(/manifest\.json$/, "manifest-slow.json");
    writeFileSync(
      slowManifest,
      JSON.stringify({ ...JSON.parse(readFileSync(devnet.manifestPath, "utf8")), rpcUrl: proxy.url }),
    );
    const tokens = [devnet.manifest.tokens.USDT.address, devnet.manifest.tokens.USDC.address];
    const transfers = await chainTransfers(devnet.manifest.rpcUrl, tokens, BigInt(devnet.manifest.startBlock));

    // Each request waits 100 ms, one at a time: the ranges after the first take seconds to fetch.
    proxy.delayMs = 100;
    const first = await run(slowManifest);
    const midway = await waitFor(
      "a partial backfill",
      async () => {
        const s = await stats(first);
        return s.transfers > 0 ? s : undefined;
      },
      first,
    );
    await first.stop();
    expect(midway.latestIndexedBlock?.number ?? 0).toBeLessThan(devnet.manifest.headBlock);
    expect(midway.transfers).toBeLessThan(transfers.length);

    // What the launchers do before starting the indexer.
    const restarted = await restartInterruptedPgliteBackfill({
      database: { kind: "pglite", directory: slot.env.PGLITE_DIR ?? "" },
      schema: slot.schema,
    } as IndexTarget);
    expect(restarted).toBe(slot.kind === "pglite");

    proxy.delayMs = 0;
    const second = await run(slowManifest, { PONDER_LOG_LEVEL: "info" });
    await waitForBlock(second, devnet.manifest.headBlock);
    await second.stop();
    if (slot.kind === "postgres") expect(second.output()).toContain("crash recovery");
    const expected = expectedIndex(transfers);
    expect(expected.transfer.length).toBe(transfers.length);
    expect(await slot.read(indexRows)).toEqual(expected);
    // Two indexer runs, one slowed on purpose.
  }, 300_000);
});
