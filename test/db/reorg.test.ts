import { zeroAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { devnetClients } from "../../devnet/chain.ts";
import { rpc } from "../../devnet/rpc.ts";
import { actorAddress } from "../../devnet/scenario/random.ts";
import { waitForReceipt } from "../../shared/receipt.ts";
import { type ChainTransfer, chainTransfers, expectedAggregates, normalise } from "../support/chain-truth.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { type DatabaseSlot, type Indexer, stats, testDatabase, waitFor, waitForBlock } from "../support/indexer.ts";

const ZERO = zeroAddress;

// A reorg on anvil removes blocks that carried transfers; the indexer's aggregates must follow the
// new canonical chain, as eth_getLogs reports it afterwards.
describe(`reorgs (${testDatabase})`, () => {
  let env: IndexedDevnet;
  let devnet: TestDevnet;
  let slot: DatabaseSlot;
  let indexer: Indexer;
  let before: number;

  const seedTransfers = async (entries: [string, string, bigint][]) => {
    const { publicClient, walletClient } = devnetClients(
      devnet.manifest.rpcUrl,
      devnet.manifest.deployer.privateKey as `0x${string}`,
    );
    const hash = await walletClient.writeContract({
      address: devnet.manifest.tokens.USDT.address,
      abi: devStablecoinAbi,
      functionName: "seedTransfers",
      args: [
        entries.map((e) => e[0] as `0x${string}`),
        entries.map((e) => e[1] as `0x${string}`),
        entries.map((e) => e[2]),
      ],
    });
    const receipt = await waitForReceipt(publicClient, { hash, pollingInterval: 50 });
    expect(receipt.status).toBe("success");
    return Number(receipt.blockNumber);
  };

  beforeAll(async () => {
    env = await indexedDevnet({ wallets: 12, months: 12, seed: 7 });
    ({ devnet, slot } = env);
    indexer = await env.index();
    before = (await waitForBlock(indexer, devnet.manifest.headBlock)).transfers;
  }, 240_000);

  afterAll(() => env?.stop());

  it("drops the transfers of orphaned blocks and keeps the new branch's", async () => {
    const salaried = devnet.manifest.personas.salaried!.address;
    const orphanPayee = actorAddress(1, "reorg-orphan-payee");
    const newPayee = actorAddress(1, "reorg-new-payee");
    const head = devnet.manifest.headBlock;
    const snapshot = await rpc<string>(devnet.manifest.rpcUrl, "evm_snapshot");

    // The branch that will be orphaned: two blocks moving the salaried persona's money.
    await seedTransfers([
      [salaried, orphanPayee, 1_000_000_000n],
      [ZERO, orphanPayee, 5_000_000n],
    ]);
    const orphanHead = await seedTransfers([[orphanPayee, salaried, 250_000_000n]]);
    expect(orphanHead).toBe(head + 2);
    const seen = await waitForBlock(indexer, orphanHead);
    expect(seen.transfers).toBe(before + 3);

    // Reorg: back to `head`, then a longer branch with a different transfer.
    expect(await rpc<boolean>(devnet.manifest.rpcUrl, "evm_revert", [snapshot])).toBe(true);
    await seedTransfers([[salaried, newPayee, 42_000_000n]]);
    await rpc(devnet.manifest.rpcUrl, "evm_mine");
    await rpc(devnet.manifest.rpcUrl, "evm_mine");
    const newHead = Number(BigInt(await rpc<string>(devnet.manifest.rpcUrl, "eth_blockNumber")));
    expect(newHead).toBe(head + 3);

    await waitFor(
      "the new branch",
      async () => {
        const s = await stats(indexer);
        return s.latestIndexedBlock?.number === newHead && s.transfers === before + 1 ? s : undefined;
      },
      indexer,
    );

    const tokens = [devnet.manifest.tokens.USDT.address, devnet.manifest.tokens.USDC.address];
    const transfers: ChainTransfer[] = await chainTransfers(
      devnet.manifest.rpcUrl,
      tokens,
      BigInt(devnet.manifest.startBlock),
    );
    expect(transfers.some((t) => t.to === orphanPayee || t.from === orphanPayee)).toBe(false);

    await indexer.stop();
    const wallets = [salaried, orphanPayee, newPayee];
    const rows = await slot.read(async (query) => ({
      transfers: await query<{ n: string }>("select count(*) as n from transfer"),
      accounts: await query(`select * from account where address in ('${wallets.join("','")}')`),
      balances: await query(
        `select * from balance where address in ('${wallets.join("','")}') order by address, token`,
      ),
      months: await query(
        `select * from account_month where address in ('${wallets.join("','")}') order by address, token, month`,
      ),
      pairs: await query(
        `select * from counterparty where address in ('${wallets.join("','")}') order by address, counterparty, token`,
      ),
      received: await query(`select address, total from received where address in ('${wallets.join("','")}')`),
    }));
    expect(String(rows.transfers[0]!.n)).toBe(String(transfers.length));
    for (const wallet of wallets) {
      const expected = expectedAggregates(wallet, transfers);
      const mine = (list: Record<string, unknown>[]) => list.filter((r) => r.address === wallet);
      expect(normalise(mine(rows.accounts)), `account ${wallet}`).toEqual(
        normalise(expected.account ? [expected.account] : []),
      );
      expect(normalise(mine(rows.balances)), `balance ${wallet}`).toEqual(normalise(expected.balances));
      expect(normalise(mine(rows.months)), `months ${wallet}`).toEqual(normalise(expected.months));
      expect(normalise(mine(rows.pairs)), `counterparties ${wallet}`).toEqual(normalise(expected.counterparties));
      expect(normalise(mine(rows.received)), `received ${wallet}`).toEqual(
        normalise(expected.received ? [expected.received] : []),
      );
    }
  });
});
