import { type Hex, type PublicClient, type TransactionReceipt, withTimeout } from "viem";

/** How often the chain's block number is asked while a receipt is awaited (Celo: a block a second). */
const BLOCK_POLL_MS = 100;
/** A receipt just awaited is asked this soon (a local chain mines at once), before any new block. */
const FIRST_ASK_MS = 10;
/** Every awaited receipt is asked at least this often, even in a block the watcher saw (a reorg at the same height). */
const ASK_ALL_MS = 1_000;

type Awaited = { hash: Hex; asked: boolean; resolve: (receipt: TransactionReceipt | undefined) => void };

/**
 * The receipts of sent transactions, watched together: one loop asks the block number every
 * BLOCK_POLL_MS and the receipts only when a block came (each new one once at once). Under
 * sustained load several transactions wait at a time: asking each receipt every 100 ms cost
 * about eight calls per transaction on 1 s blocks, where this asks about two.
 * A wait ends with the receipt, or with undefined at its deadline; an RPC that fails or stalls is
 * ridden out until then (the transaction is recorded: the chain decides, never a timeout).
 */
export function receiptWatcher(client: Pick<PublicClient, "getBlockNumber" | "getTransactionReceipt">) {
  const awaited = new Set<Awaited>();
  let running = false;
  /** Ends the loop's pause early: a new wait is asked FIRST_ASK_MS after it began, not at the next poll. */
  let wake: (() => void) | undefined;
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      let timer = setTimeout(end, ms);
      function end() {
        if (wake === early) wake = undefined;
        resolve();
      }
      function early() {
        wake = undefined; // once: later waits join this ask
        clearTimeout(timer);
        timer = setTimeout(end, FIRST_ASK_MS);
      }
      wake = early;
    });

  /** One receipt, or undefined when not mined yet or the RPC did not answer in `timeoutMs`. */
  const ask = async (hash: Hex, timeoutMs: number) => {
    try {
      return await withTimeout(() => client.getTransactionReceipt({ hash }), { timeout: Math.max(1, timeoutMs) });
    } catch {
      return undefined;
    }
  };

  const watch = async () => {
    running = true;
    let block: bigint | undefined;
    let askedAllAt = 0;
    try {
      await pause(FIRST_ASK_MS);
      while (awaited.size > 0) {
        let latest: bigint | undefined;
        try {
          latest = await withTimeout(() => client.getBlockNumber({ cacheTime: 0 }), { timeout: ASK_ALL_MS });
        } catch {
          // The RPC did not answer: ask every receipt, as if a block had come.
        }
        const all = latest === undefined || latest !== block || Date.now() - askedAllAt >= ASK_ALL_MS;
        if (all) askedAllAt = Date.now();
        block = latest ?? block;
        const due = [...awaited].filter((a) => all || !a.asked);
        await Promise.all(
          due.map(async (a) => {
            a.asked = true;
            const receipt = await ask(a.hash, ASK_ALL_MS);
            if (receipt && awaited.delete(a)) a.resolve(receipt);
          }),
        );
        if (awaited.size > 0) await pause([...awaited].some((a) => !a.asked) ? FIRST_ASK_MS : BLOCK_POLL_MS);
      }
    } finally {
      running = false;
    }
  };

  return {
    wait(hash: Hex, timeoutMs: number): Promise<TransactionReceipt | undefined> {
      return new Promise((resolve) => {
        const entry: Awaited = {
          hash,
          asked: false,
          resolve: (receipt) => {
            clearTimeout(deadline);
            resolve(receipt);
          },
        };
        const deadline = setTimeout(() => awaited.delete(entry) && resolve(undefined), timeoutMs);
        awaited.add(entry);
        if (!running) void watch();
        else wake?.();
      });
    },
  };
}
