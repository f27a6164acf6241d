import { type Address, createPublicClient, http, zeroAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sanctionsListAbi } from "../../abis/SanctionsList.ts";
import { type Stats, statsSchema } from "../../api/stats/schema.ts";
import { SANCTIONS_ORACLE } from "../../config/celo.ts";
import { devnetChain } from "../../devnet/chain.ts";
import {
  balanceAtHead,
  type ChainListing,
  type ChainTransfer,
  chainListings,
  chainTransfers,
  expectedAggregates,
  normalise,
  TRANSFER_COLUMNS,
  transferRow,
} from "../support/chain-truth.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { type DatabaseSlot, type Indexer, type Query, testDatabase, waitForBlock } from "../support/indexer.ts";

// The indexer's tables against the chain itself: every aggregate of every persona and of a sample
// of background wallets equals what eth_getLogs and balanceOf say.
describe(`aggregates match the chain (${testDatabase})`, () => {
  let env: IndexedDevnet;
  let devnet: TestDevnet;
  let slot: DatabaseSlot;
  let indexer: Indexer;
  let transfers: ChainTransfer[];
  let wallets: string[];
  let statsBody: Stats;
  let tables: {
    transfers: { n: string; total: string };
    sampleTransfers: Record<string, unknown>[];
    accounts: Row[];
    balances: Row[];
    months: Row[];
    pairs: Row[];
    received: Row[];
    listings: Row[];
  };
  let listings: ChainListing[];

  beforeAll(async () => {
    env = await indexedDevnet({});
    ({ devnet, slot } = env);
    indexer = await env.index();
    const tokens = [devnet.manifest.tokens.USDT.address, devnet.manifest.tokens.USDC.address];
    transfers = await chainTransfers(devnet.manifest.rpcUrl, tokens, BigInt(devnet.manifest.startBlock));
    listings = await chainListings(devnet.manifest.rpcUrl, SANCTIONS_ORACLE);
    await waitForBlock(indexer, devnet.manifest.headBlock);
    statsBody = statsSchema.parse(await (await fetch(`${indexer.url}/api/stats`)).json());

    // Personas, lenders and every 7th other wallet that ever moved money.
    const everyone = [...new Set(transfers.flatMap((t) => [t.from, t.to]))].filter((w) => w !== zeroAddress).sort();
    wallets = [
      ...Object.values(devnet.manifest.personas).map((p) => p.address),
      ...devnet.manifest.lenders.map((l) => l.address),
      ...everyone.filter((_, i) => i % 7 === 0),
    ];
    // Read the tables themselves (PGlite admits one process at a time: stop the indexer first).
    await indexer.stop();
    tables = await slot.read(async (query: Query) => ({
      transfers: (
        await query<{ n: string; total: string }>("select count(*) as n, sum(value) as total from transfer")
      )[0]!,
      sampleTransfers: await query(
        `select ${TRANSFER_COLUMNS} from transfer where "from" in (${list(wallets.slice(0, 12))}) or "to" in (${list(wallets.slice(0, 12))}) order by block_number, log_index`,
      ),
      accounts: await query(`select * from account where address in (${list(wallets)})`),
      balances: await query(`select * from balance where address in (${list(wallets)}) order by address, token`),
      months: await query(
        `select * from account_month where address in (${list(wallets)}) order by address, token, month`,
      ),
      pairs: await query(
        `select * from counterparty where address in (${list(wallets)}) order by address, counterparty, token`,
      ),
      received: await query(`select address, total from received where address in (${list(wallets)}) order by address`),
      listings: await query(
        "select address, listed_block, listed_tx, delisted_block, delisted_tx from sanctions_listing order by listed_block, address",
      ),
    }));
  }, 240_000);

  afterAll(() => env?.stop());

  // The devnet ends its history with Ponder's 30 unfinalized blocks empty (devnet/seed.ts), so an
  // indexer backfills every seeded transfer in batches instead of taking them block by block.
  it("seeds no transfer into the devnet's last 30 blocks of history", () => {
    const last = Math.max(...transfers.map((t) => Number(t.block)));
    expect(last).toBeLessThanOrEqual(devnet.manifest.headBlock - 30);
  });

  it("indexes every Transfer log exactly once", () => {
    expect(statsBody.transfers).toBe(transfers.length);
    expect(String(tables.transfers.n)).toBe(String(transfers.length));
    expect(String(tables.transfers.total)).toBe(String(transfers.reduce((sum, t) => sum + t.value, 0n)));
  });

  it("has the transfer rows of sampled wallets as the chain has them", () => {
    const sample = wallets.slice(0, 12);
    const rows = tables.sampleTransfers;
    const expected = transfers.filter((t) => sample.includes(t.from) || sample.includes(t.to)).map(transferRow);
    expect(normalise(rows)).toEqual(normalise(expected));
  });

  it("keeps account, balance, monthly and counterparty aggregates equal to the chain's", () => {
    expect(wallets.length).toBeGreaterThan(30);
    const { accounts, balances, months, pairs } = tables;

    for (const wallet of wallets) {
      const expected = expectedAggregates(wallet, transfers);
      const mine = (rows: Record<string, unknown>[]) => rows.filter((r) => r.address === wallet);
      expect(normalise(mine(accounts)), `account ${wallet}`).toEqual(
        normalise(expected.account ? [expected.account] : []),
      );
      expect(normalise(mine(balances)), `balance ${wallet}`).toEqual(normalise(expected.balances));
      expect(normalise(mine(months)), `months ${wallet}`).toEqual(normalise(expected.months));
      expect(normalise(mine(pairs)), `counterparties ${wallet}`).toEqual(normalise(expected.counterparties));
    }
  });

  it("keeps what each wallet ever received, across tokens, equal to its incoming Transfer logs", () => {
    const expected = [...new Set(wallets)].flatMap((wallet) => expectedAggregates(wallet, transfers).received ?? []);
    expect(expected.length).toBeGreaterThan(30);
    expect(normalise(tables.received)).toEqual(normalise(expected.sort((a, b) => (a.address < b.address ? -1 : 1))));
  });

  it("holds each sampled wallet's running balance equal to balanceOf at head", async () => {
    const rows = tables.balances as { address: string; token: string; balance: string }[];
    expect(rows.length).toBeGreaterThan(wallets.length / 2);
    for (const row of rows) {
      expect(String(row.balance), `${row.token} ${row.address}`).toBe(
        String(await balanceAtHead(devnet.manifest.rpcUrl, row.token, row.address)),
      );
    }
  });

  it("keeps every sanctions listing as the oracle's logs have it, open exactly when isSanctioned says so", async () => {
    expect(listings.length).toBeGreaterThanOrEqual(2);
    const expected = [...listings]
      .sort((a, b) => Number(a.listedBlock - b.listedBlock) || a.address.localeCompare(b.address))
      .map((l) => ({
        address: l.address,
        listed_block: String(l.listedBlock),
        listed_tx: l.listedTx,
        delisted_block: l.delistedBlock === null ? null : String(l.delistedBlock),
        delisted_tx: l.delistedTx,
      }));
    expect(normalise(tables.listings)).toEqual(normalise(expected));
    const { rpcUrl } = devnet.manifest;
    const publicClient = createPublicClient({ chain: devnetChain(rpcUrl), transport: http(rpcUrl) });
    for (const l of listings) {
      const onChain = await publicClient.readContract({
        address: SANCTIONS_ORACLE,
        abi: sanctionsListAbi,
        functionName: "isSanctioned",
        args: [l.address as Address],
      });
      expect(onChain, l.address).toBe(l.delistedBlock === null);
    }
  });

  it("answers /api/stats with the indexed head, tokens and lag", () => {
    const body = statsBody;
    expect(body.network).toBe("devnet");
    expect(body.latestIndexedBlock?.number).toBe(devnet.manifest.headBlock);
    expect(body.chainHead?.number).toBe(devnet.manifest.headBlock);
    expect(body.lag).toEqual({ blocks: 0, seconds: 0 });
    expect(body.wallets).toBe(new Set(transfers.flatMap((t) => [t.from, t.to]).filter((w) => w !== zeroAddress)).size);
    expect(body.tokens.map((t) => [t.symbol, t.transfers])).toEqual([
      ["USDT", transfers.filter((t) => t.token === devnet.manifest.tokens.USDT.address).length],
      ["USDC", transfers.filter((t) => t.token === devnet.manifest.tokens.USDC.address).length],
    ]);
    // Volumes from the indexer's running totals (index_total) equal the chain's sums.
    const volumeUsd = (token: string) =>
      Number(transfers.filter((t) => t.token === token).reduce((n, t) => n + t.value, 0n)) / 1e6;
    expect(body.tokens.map((t) => [t.symbol, t.volumeUsd])).toEqual([
      ["USDT", volumeUsd(devnet.manifest.tokens.USDT.address)],
      ["USDC", volumeUsd(devnet.manifest.tokens.USDC.address)],
    ]);
  });
});

type Row = Record<string, unknown>;
const list = (wallets: string[]) => wallets.map((w) => `'${w}'`).join(",");
