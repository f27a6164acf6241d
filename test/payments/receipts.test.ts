import type { Hex, TransactionReceipt } from "viem";
import { describe, expect, it } from "vitest";
import { receiptWatcher } from "../../api/payments/receipts.ts";
import { sleep } from "../../shared/async.ts";

// The relayer's receipt waits against a node that answers like a chain: a block number, and the
// receipts of what its blocks mined. What an operator pays its RPC provider for is counted.

/** A node whose blocks come when `mine` is called, counting what it is asked. */
function fakeNode() {
  const mined = new Map<Hex, bigint>();
  let block = 1n;
  let stalled = false;
  const calls = { blockNumber: 0, receipts: 0 };
  const hang = () => new Promise<never>(() => {});
  return {
    calls,
    mine(...hashes: Hex[]) {
      block++;
      for (const hash of hashes) mined.set(hash, block);
    },
    stall: (on: boolean) => (stalled = on),
    client: {
      getBlockNumber: async () => {
        calls.blockNumber++;
        return stalled ? hang() : block;
      },
      getTransactionReceipt: async ({ hash }: { hash: Hex }) => {
        calls.receipts++;
        if (stalled) return hang();
        const at = mined.get(hash);
        if (at === undefined) throw new Error(`Transaction receipt with hash "${hash}" could not be found.`);
        return { transactionHash: hash, blockNumber: at, status: "success" } as TransactionReceipt;
      },
    },
  };
}

const hash = (i: number) => `0x${i.toString(16).padStart(64, "0")}` as Hex;

describe("receipt watcher", () => {
  it("asks each receipt once when awaited and once per new block, not at every poll", async () => {
    const node = fakeNode();
    const watcher = receiptWatcher(node.client as never);
    const waits = [1, 2, 3, 4].map((i) => watcher.wait(hash(i), 10_000));
    await sleep(700); // seven polls of the block number, no block
    expect(node.calls.receipts).toBe(4); // each asked once, at first
    expect(node.calls.blockNumber).toBeGreaterThanOrEqual(3);
    node.mine(hash(1), hash(2));
    await sleep(300);
    node.mine(hash(3), hash(4));
    const receipts = await Promise.all(waits);
    expect(receipts.map((r) => r?.transactionHash)).toEqual([1, 2, 3, 4].map(hash));
    expect(receipts.map((r) => r?.blockNumber)).toEqual([2n, 2n, 3n, 3n]);
    // 4 at first, 4 at block 2 (two found), 2 at block 3; the every-second round may add one set.
    expect(node.calls.receipts).toBeLessThanOrEqual(14);
  });

  it("a wait begun while others are under way is asked at once, not at the next poll", async () => {
    const node = fakeNode();
    const watcher = receiptWatcher(node.client as never);
    const first = watcher.wait(hash(1), 10_000);
    await sleep(50);
    node.mine(hash(2));
    const started = performance.now();
    const second = await watcher.wait(hash(2), 10_000);
    expect(second?.blockNumber).toBe(2n);
    expect(performance.now() - started).toBeLessThan(1_000); // within a round, not a deadline
    node.mine(hash(1));
    expect((await first)?.blockNumber).toBe(3n);
  });

  it("ends a wait at its deadline with no receipt while the node stalls, and goes on for the others", async () => {
    const node = fakeNode();
    const watcher = receiptWatcher(node.client as never);
    node.stall(true);
    const short = watcher.wait(hash(1), 300);
    const long = watcher.wait(hash(2), 10_000);
    expect(await short).toBeUndefined();
    node.stall(false);
    node.mine(hash(2));
    expect((await long)?.blockNumber).toBe(2n);
  });
});
