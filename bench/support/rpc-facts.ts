import {
  BaseError,
  createPublicClient,
  http,
  parseAbiItem,
  ResponseBodyTooLargeError,
  type Address as ViemAddress,
} from "viem";
import { DAY, type WalletFacts, type WalletTransfer, WINDOW_DAYS } from "../../api/scoring/facts.ts";
import { drainCandidates } from "../../api/scoring/rules.ts";
import { MAX_TRACED_FLOWS, type Outflow, traceFunding } from "../../api/wallet/funding.ts";
import type { Address } from "../../config/addresses.ts";
import { devnetChain } from "../../devnet/chain.ts";
import { monthOf } from "../../shared/month.ts";

const transferEvent = parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)");
const balanceOf = parseAbiItem("function balanceOf(address) view returns (uint256)");
type TransferLog = {
  address: ViemAddress;
  blockNumber: bigint | null;
  args: { from?: ViemAddress; to?: ViemAddress; value?: bigint };
};

/**
 * The same WalletFacts the indexer's tables give, built the way the original service worked: live
 * scans of the chain per request (eth_getLogs for the wallet's transfers, block timestamps, then
 * scans of its payees and of what they received), for the benchmark's side-by-side.
 */
export function rpcFactsReader(rpcUrl: string, tokens: Address[]) {
  // Answers up to 64 MB (viem's default is 10 MB; one block can carry 11 MB of an exchange's
  // deposits), as slow as they come: no client timeout and no retries, which would only pile more
  // scans onto the node. The benchmark cuts a screen off itself.
  const client = createPublicClient({
    chain: devnetChain(rpcUrl),
    transport: http(rpcUrl, {
      batch: { batchSize: 200 },
      maxResponseBodySize: 64 * 1024 * 1024,
      timeout: 0,
      retryCount: 0,
    }),
  });
  const times = new Map<bigint, number>();

  // A scan over the whole chain, split in halves while the node's answer is too large for the
  // client (an exchange has received over a million transfers), as any eth_getLogs client must.
  // `signal` ends a scan that has been given up on, so it does not slow the next one.
  const scan = async (
    args: { from?: Address; to?: Address },
    fromBlock: bigint,
    toBlock: bigint,
    signal?: AbortSignal,
  ): Promise<TransferLog[]> => {
    signal?.throwIfAborted();
    try {
      return await client.getLogs({
        address: tokens as ViemAddress[],
        event: transferEvent,
        args: args as never,
        fromBlock,
        toBlock,
      });
    } catch (error) {
      const tooLarge = error instanceof BaseError && error.walk((e) => e instanceof ResponseBodyTooLargeError);
      if (!tooLarge || fromBlock === toBlock) throw error;
      const middle = (fromBlock + toBlock) / 2n;
      return [...(await scan(args, fromBlock, middle, signal)), ...(await scan(args, middle + 1n, toBlock, signal))];
    }
  };
  const logs = async (args: { from?: Address; to?: Address }, signal?: AbortSignal) => {
    const found = await scan(args, 0n, await client.getBlockNumber(), signal);
    const missing = [...new Set(found.map((l) => l.blockNumber!))].filter((b) => !times.has(b));
    await Promise.all(
      missing.map(async (b) => times.set(b, Number((await client.getBlock({ blockNumber: b })).timestamp))),
    );
    return found.map((l) => ({
      token: l.address.toLowerCase() as Address,
      from: l.args.from!.toLowerCase() as Address,
      to: l.args.to!.toLowerCase() as Address,
      value: l.args.value!,
      at: times.get(l.blockNumber!)!,
    }));
  };

  /** The wallet's own Transfer logs, both ways, with block times: the least any eth_getLogs screen reads. */
  const ownTransfers = (address: Address, signal?: AbortSignal) =>
    Promise.all([logs({ from: address }, signal), logs({ to: address }, signal)]);

  async function facts(address: Address, asOf: number, signal?: AbortSignal): Promise<WalletFacts> {
    const [sent, received] = await ownTransfers(address, signal);
    const all = [
      ...sent.map((t) => ({ ...t, direction: "out" as const, counterparty: t.to })),
      ...received.map((t) => ({ ...t, direction: "in" as const, counterparty: t.from })),
    ].sort((a, b) => a.at - b.at);
    const transfers: WalletTransfer[] = all
      .filter((t) => t.at > asOf - WINDOW_DAYS * DAY)
      .map(({ direction, counterparty, token, value, at }) => ({ direction, counterparty, token, value, at }));
    const balances = await Promise.all(
      tokens.map(async (token) => ({
        token,
        balance: await client.readContract({
          address: token as ViemAddress,
          abi: [balanceOf],
          functionName: "balanceOf",
          args: [address as ViemAddress],
        }),
      })),
    );

    // Like the SQL path, only possible drain sinks need their first activity.
    const firstSeen = await Promise.all(
      drainCandidates(address, transfers).map(async ({ counterparty: payee }) => {
        const [a, b] = await Promise.all([logs({ from: payee }, signal), logs({ to: payee }, signal)]);
        return { address: payee, firstAt: Math.min(...[...a, ...b].map((t) => t.at)) };
      }),
    );

    // The same forward walk as the SQL path, each hop from scans of the members' and payees' logs.
    const funding = await traceFunding(
      address,
      async (members) => {
        const out: Outflow[] = [];
        for (const member of members) {
          const paid = member === address ? sent : await logs({ from: member }, signal);
          const flows = new Set(paid.map((t) => `${t.to}|${t.token}|${monthOf(t.at)}`)).size;
          if (flows > MAX_TRACED_FLOWS) continue;
          const byPayee = new Map<Address, bigint>();
          for (const t of paid) byPayee.set(t.to, (byPayee.get(t.to) ?? 0n) + t.value);
          await Promise.all(
            [...byPayee].map(async ([payee, total]) => {
              const inflow = (await logs({ to: payee }, signal)).reduce((sum, t) => sum + t.value, 0n);
              out.push({ member, payee, total, flows, received: inflow });
            }),
          );
        }
        return out;
      },
      async () => transfers.filter((t) => t.direction === "in").map((t) => t.counterparty),
    );

    return {
      address,
      asOf,
      account: all.length
        ? { firstAt: all[0]!.at, lastAt: all.at(-1)!.at, transfersIn: received.length, transfersOut: sent.length }
        : null,
      balances,
      transfers,
      firstSeen,
      funding,
    };
  }

  return { facts, ownTransfers };
}
