import { decodeFunctionResult, encodeFunctionData, type Hex, numberToHex, zeroAddress } from "viem";
import { devStablecoinAbi } from "../abis/DevStablecoin.ts";
import type { Address } from "../config/addresses.ts";
import { rpc, rpcBatch } from "./rpc.ts";
import type { PlannedTransfer, TokenSymbol } from "./scenario/plan.ts";

/** The blocks Ponder keeps unfinalized on chain 42220 (its default for chains it has no figure for). */
const PONDER_FINALITY_BLOCKS = 30;

export type SeedStats = { transfers: number; blocks: number; transactions: number; skipped: number };

/**
 * Puts planned transfers on the devnet, oldest first: many transfers per transaction
 * (`seedTransfers`, owner only) and many transactions per block, each block mined at the timestamp
 * of its slot, so months of history take seconds. It keeps every balance, so spending is capped at
 * what a wallet holds, and shares (sweeps, drains) resolve to amounts at that moment.
 */
export class HistorySeeder {
  readonly stats: SeedStats = { transfers: 0, blocks: 0, transactions: 0, skipped: 0 };
  private readonly balances = new Map<string, bigint>();
  private nonce = 0;
  private lastTimestamp = 0;

  constructor(
    private readonly rpcUrl: string,
    private readonly owner: Address,
    private readonly tokens: Record<TokenSymbol, Address>,
    private readonly options: {
      slotSeconds: number;
      perTransaction: number;
      onBlock?: (stats: SeedStats, timestamp: number) => void;
    } = {
      slotSeconds: 6 * 3600,
      perTransaction: 400,
    },
  ) {}

  async begin(): Promise<void> {
    this.nonce = Number(BigInt(await rpc<Hex>(this.rpcUrl, "eth_getTransactionCount", [this.owner, "pending"])));
    const head = await rpc<{ timestamp: Hex }>(this.rpcUrl, "eth_getBlockByNumber", ["latest", false]);
    this.lastTimestamp = Number(BigInt(head.timestamp));
    await rpc(this.rpcUrl, "evm_setAutomine", [false]);
  }

  /** Seeds a batch of transfers; batches must come in time order (each is sorted here). */
  async seed(planned: PlannedTransfer[]): Promise<void> {
    planned.sort((a, b) => a.at - b.at);
    let slot: number | null = null;
    let pending: { token: TokenSymbol; from: Address; to: Address; value: bigint }[] = [];
    for (const p of planned) {
      const slotStart = Math.floor(p.at / this.options.slotSeconds) * this.options.slotSeconds;
      if (slot !== null && slotStart !== slot) {
        await this.mine(slot, pending);
        pending = [];
      }
      slot = slotStart;
      const value = this.resolve(p);
      if (value === 0n) {
        this.stats.skipped++;
        continue;
      }
      pending.push({ token: p.token, from: p.from, to: p.to, value });
    }
    if (slot !== null) await this.mine(slot, pending);
  }

  /**
   * Mines empty blocks up to a last one at `now`, then turns automine back on: from here on blocks
   * follow wall-clock time. The empty blocks put every seeded transfer behind Ponder's finality
   * depth, so an indexer takes the history in its batched backfill rather than block by block as
   * live blocks (several times slower, and again after every restart).
   */
  async end(now: number): Promise<number> {
    const first = Math.max(now - PONDER_FINALITY_BLOCKS, this.lastTimestamp + 1);
    const timestamps = Array.from({ length: PONDER_FINALITY_BLOCKS + 1 }, (_, i) => first + i);
    // One at a time: a batch's calls may be served in any order, and timestamps must rise.
    for (const timestamp of timestamps) await rpc(this.rpcUrl, "evm_mine", [numberToHex(timestamp)]);
    this.lastTimestamp = timestamps.at(-1)!;
    await rpc(this.rpcUrl, "evm_setAutomine", [true]);
    return Number(BigInt(await rpc<Hex>(this.rpcUrl, "eth_blockNumber")));
  }

  balance(token: TokenSymbol, wallet: Address): bigint {
    return this.balances.get(`${token}:${wallet}`) ?? 0n;
  }

  /** Every wallet with a balance entry, for verification against the chain. */
  wallets(): { token: TokenSymbol; wallet: Address; balance: bigint }[] {
    return [...this.balances].map(([key, balance]) => {
      const [token, wallet] = key.split(":") as [TokenSymbol, Address];
      return { token, wallet, balance };
    });
  }

  private resolve(p: PlannedTransfer): bigint {
    const fromKey = `${p.token}:${p.from}`;
    const available = p.from === zeroAddress ? null : (this.balances.get(fromKey) ?? 0n);
    let value: bigint;
    // A payment the wallet cannot cover is declined (skipped), as a card payment would be.
    if (typeof p.amount === "bigint") value = available === null || p.amount <= available ? p.amount : 0n;
    else value = available === null ? 0n : (available * BigInt(Math.round(p.amount.share * 10_000))) / 10_000n;
    if (value === 0n) return 0n;
    if (available !== null) this.balances.set(fromKey, available - value);
    const toKey = `${p.token}:${p.to}`;
    this.balances.set(toKey, (this.balances.get(toKey) ?? 0n) + value);
    return value;
  }

  private async mine(
    slot: number,
    transfers: { token: TokenSymbol; from: Address; to: Address; value: bigint }[],
  ): Promise<void> {
    if (transfers.length === 0) return;
    const calls: { method: string; params: unknown[] }[] = [];
    for (const token of ["USDT", "USDC"] as const) {
      const own = transfers.filter((t) => t.token === token);
      for (let i = 0; i < own.length; i += this.options.perTransaction) {
        const chunk = own.slice(i, i + this.options.perTransaction);
        const data = encodeFunctionData({
          abi: devStablecoinAbi,
          functionName: "seedTransfers",
          args: [chunk.map((t) => t.from), chunk.map((t) => t.to), chunk.map((t) => t.value)],
        });
        calls.push({
          method: "eth_sendTransaction",
          params: [
            {
              from: this.owner,
              to: this.tokens[token],
              data,
              gas: numberToHex(100_000 + 32_000 * chunk.length),
              nonce: numberToHex(this.nonce++),
            },
          ],
        });
      }
    }
    // Large slots (a whole population funded at once) go in several requests: anvil refuses requests over about 1 MB.
    for (let i = 0; i < calls.length; i += 8) await rpcBatch(this.rpcUrl, calls.slice(i, i + 8));
    // Block timestamps must rise strictly; a slot never goes back in time.
    const timestamp = Math.max(slot, this.lastTimestamp + 1);
    await rpc(this.rpcUrl, "evm_mine", [numberToHex(timestamp)]);
    this.lastTimestamp = timestamp;
    this.stats.blocks++;
    this.stats.transactions += calls.length;
    this.stats.transfers += transfers.length;
    this.options.onBlock?.(this.stats, timestamp);
  }

  /**
   * Compares the seeder's books with balanceOf on chain for up to `sample` wallets. A mismatch means
   * a seeding transaction reverted: the history is not what was planned.
   */
  async verify(sample = 5_000): Promise<void> {
    const entries = this.wallets();
    const step = Math.max(1, Math.floor(entries.length / sample));
    const checked = entries.filter((_, i) => i % step === 0);
    for (let i = 0; i < checked.length; i += 500) {
      const batch = checked.slice(i, i + 500);
      const results = await rpcBatch<Hex>(
        this.rpcUrl,
        batch.map((e) => ({
          method: "eth_call",
          params: [
            {
              to: this.tokens[e.token],
              data: encodeFunctionData({ abi: devStablecoinAbi, functionName: "balanceOf", args: [e.wallet] }),
            },
            "latest",
          ],
        })),
      );
      batch.forEach((e, j) => {
        const onChain = decodeFunctionResult({ abi: devStablecoinAbi, functionName: "balanceOf", data: results[j]! });
        if (onChain !== e.balance) {
          throw new Error(
            `Seeding diverged: ${e.token} balance of ${e.wallet} is ${onChain} on chain, ${e.balance} planned (a seeding transaction reverted).`,
          );
        }
      });
    }
  }
}
