import { writeFileSync } from "node:fs";
import type { Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { actorAddress } from "../../devnet/scenario/random.ts";
import { type ChainTransfer, chainTransfers, expectedAggregates, normalise } from "../support/chain-truth.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { type DatabaseSlot, type Indexer, testDatabase, waitForBlock } from "../support/indexer.ts";
import { x402Fetch } from "../support/payments.ts";

// Tracked-wallets mode: only transfers that touch a listed wallet are indexed (through
// indexed-argument filters), each once, and only listed wallets get aggregates. On PGlite only: tracked mode
// on Postgres is screen-batch.test.ts's (vitest.config.ts says why).
describe(`tracked wallets mode (${testDatabase})`, () => {
  let env: IndexedDevnet;
  let devnet: TestDevnet;
  let slot: DatabaseSlot;
  let indexer: Indexer;
  let tracked: string[];
  let transfers: ChainTransfer[];

  beforeAll(async () => {
    env = await indexedDevnet({ wallets: 20, months: 12, seed: 5 });
    ({ devnet, slot } = env);
    const personas = devnet.manifest.personas;
    // The self-funder and one of its own wallets pay each other: both tracked, counted once.
    tracked = [
      personas.salaried!.address,
      personas.merchant!.address,
      personas["self-funder"]!.address,
      actorAddress(devnet.manifest.population.seed, "self-funder-mule-0"),
    ];
    const listFile = devnet.manifestPath.replace(/manifest\.json$/, "tracked.txt");
    writeFileSync(listFile, `# wallets under watch\n${tracked.slice(1).join("\n")}\n`);
    indexer = await env.index({
      INDEX_MODE: "tracked",
      TRACKED_WALLETS: tracked[0]!.toUpperCase().replace("0X", "0x"),
      TRACKED_WALLETS_FILE: listFile,
    });
    const tokens = [devnet.manifest.tokens.USDT.address, devnet.manifest.tokens.USDC.address];
    transfers = await chainTransfers(devnet.manifest.rpcUrl, tokens, BigInt(devnet.manifest.startBlock));
    const stats = await waitForBlock(indexer, devnet.manifest.headBlock);
    expect(stats).toMatchObject({ indexing: { mode: "tracked", trackedWallets: 4 } });
    // The stats' wallet count (kept by the indexer) counts the tracked wallets only, as the views list them.
    expect((stats as unknown as { wallets: number }).wallets).toBe(
      tracked.filter((w) => transfers.some((t) => t.from === w || t.to === w)).length,
    );
    expect((stats as unknown as { transfers: number }).transfers).toBe(
      transfers.filter((t) => tracked.includes(t.from) || tracked.includes(t.to)).length,
    );
  }, 240_000);

  afterAll(() => env?.stop());

  it("answers 404 wallet_not_indexed for a wallet outside the tracked set", async () => {
    const untracked = devnet.manifest.personas.drainer!.address;
    const res = await fetch(`${indexer.url}/api/lender/screen`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ walletAddress: untracked }),
    });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: { code: "wallet_not_indexed" } });
    // An untracked wallet is a 404 before any payment is asked for; a tracked one is paid for.
    const tracked = await x402Fetch(
      devnet.manifest.lenders[0]!.privateKey as Hex,
      Object.values(devnet.manifest.tokens),
    )(`${indexer.url}/api/lender/screen`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ walletAddress: devnet.manifest.personas.salaried!.address }),
    });
    expect(tracked.status).toBe(200);
  });

  it("indexes exactly the transfers touching tracked wallets and aggregates only those wallets", async () => {
    await indexer.stop();
    const rows = await slot.read(async (query) => ({
      transfers: await query<{ id: string; from: string; to: string; value: string }>(
        `select "from", "to", value, block_number, log_index from transfer order by block_number, log_index`,
      ),
      accounts: await query<{ address: string }>("select * from account order by address"),
      balances: await query("select * from balance order by address, token"),
      months: await query("select * from account_month order by address, token, month"),
      pairs: await query("select * from counterparty order by address, counterparty, token"),
    }));
    const touching = transfers.filter((t) => tracked.includes(t.from) || tracked.includes(t.to));
    expect(touching.some((t) => tracked.includes(t.from) && tracked.includes(t.to))).toBe(true);
    expect(normalise(rows.transfers)).toEqual(
      normalise(
        touching.map((t) => ({ from: t.from, to: t.to, value: t.value, block_number: t.block, log_index: t.logIndex })),
      ),
    );
    expect(rows.accounts.map((a) => a.address).sort()).toEqual([...tracked].sort());
    for (const wallet of tracked) {
      const expected = expectedAggregates(wallet, transfers);
      const mine = (list: Record<string, unknown>[]) => list.filter((r) => r.address === wallet);
      expect(normalise(mine(rows.accounts)), `account ${wallet}`).toEqual(normalise([expected.account!]));
      expect(normalise(mine(rows.balances)), `balance ${wallet}`).toEqual(normalise(expected.balances));
      expect(normalise(mine(rows.months)), `months ${wallet}`).toEqual(normalise(expected.months));
      expect(normalise(mine(rows.pairs)), `counterparties ${wallet}`).toEqual(normalise(expected.counterparties));
    }
  });
});
