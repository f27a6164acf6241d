import { type Address, createPublicClient, http, parseAbiItem, zeroAddress } from "viem";
import { devnetChain } from "../../devnet/chain.ts";
import type { Query } from "../../harness/indexer.ts";
import { monthOf } from "../../shared/month.ts";

const transferEvent = parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)");

export type ChainTransfer = {
  token: string;
  from: string;
  to: string;
  value: bigint;
  block: bigint;
  timestamp: bigint;
  txHash: string;
  logIndex: number;
};

/**
 * What the chain itself says: every Transfer log of the tokens (eth_getLogs) with its block time,
 * and the aggregates recomputed from them independently of the indexer's code.
 */
export async function chainTransfers(rpcUrl: string, tokens: string[], fromBlock: bigint): Promise<ChainTransfer[]> {
  const client = createPublicClient({
    chain: devnetChain(rpcUrl),
    transport: http(rpcUrl, { batch: { batchSize: 500 } }),
  });
  const logs = await client.getLogs({
    address: tokens as Address[],
    event: transferEvent,
    fromBlock,
    toBlock: "latest",
  });
  const blocks = [...new Set(logs.map((l) => l.blockNumber!))];
  const times = new Map<bigint, bigint>();
  await Promise.all(blocks.map(async (n) => times.set(n, (await client.getBlock({ blockNumber: n })).timestamp)));
  return logs.map((l) => ({
    token: l.address.toLowerCase(),
    from: l.args.from!.toLowerCase(),
    to: l.args.to!.toLowerCase(),
    value: l.args.value!,
    block: l.blockNumber!,
    timestamp: times.get(l.blockNumber!)!,
    txHash: l.transactionHash!,
    logIndex: l.logIndex!,
  }));
}

export async function balanceAtHead(rpcUrl: string, token: string, wallet: string): Promise<bigint> {
  const client = createPublicClient({ chain: devnetChain(rpcUrl), transport: http(rpcUrl) });
  return client.readContract({
    address: token as Address,
    abi: [parseAbiItem("function balanceOf(address) view returns (uint256)")],
    functionName: "balanceOf",
    args: [wallet as Address],
  });
}

type Sides = { wallet: string; other: string; dir: "in" | "out"; t: ChainTransfer }[];

function sidesOf(wallet: string, transfers: ChainTransfer[]): Sides {
  const sides: Sides = [];
  for (const t of transfers) {
    if (t.from === wallet) sides.push({ wallet, other: t.to, dir: "out", t });
    if (t.to === wallet) sides.push({ wallet, other: t.from, dir: "in", t });
  }
  return sides;
}

/** Expected rows of every aggregate table for one wallet, as strings keyed like the SQL columns. */
export function expectedAggregates(wallet: string, transfers: ChainTransfer[]) {
  if (wallet === zeroAddress) throw new Error("the zero address has no aggregates");
  const sides = sidesOf(wallet, transfers);
  const s = (v: bigint | number) => String(v);

  const account = sides.length
    ? {
        address: wallet,
        first_at: s(sides[0]!.t.timestamp),
        last_at: s(sides.at(-1)!.t.timestamp),
        transfers_in: s(sides.filter((x) => x.dir === "in").length),
        transfers_out: s(sides.filter((x) => x.dir === "out").length),
      }
    : null;

  const balances = new Map<string, Record<string, string>>();
  const months = new Map<
    string,
    { row: Record<string, bigint | number>; cps: Set<string>; payers: Set<string>; payees: Set<string> }
  >();
  const pairs = new Map<string, Record<string, bigint | null>>();
  const running = new Map<string, bigint>();
  for (const { other, dir, t } of sides) {
    const isIn = dir === "in";
    const bal = (running.get(t.token) ?? 0n) + (isIn ? t.value : -t.value);
    running.set(t.token, bal);

    const b = balances.get(t.token) ?? {
      address: wallet,
      token: t.token,
      total_in: "0",
      total_out: "0",
      transfers_in: "0",
      transfers_out: "0",
      first_at: s(t.timestamp),
      last_at: "",
    };
    if (isIn) {
      b.total_in = s(BigInt(b.total_in!) + t.value);
      b.transfers_in = s(Number(b.transfers_in) + 1);
    } else {
      b.total_out = s(BigInt(b.total_out!) + t.value);
      b.transfers_out = s(Number(b.transfers_out) + 1);
    }
    b.last_at = s(t.timestamp);
    b.balance = s(bal);
    balances.set(t.token, b);

    const key = `${t.token}:${monthOf(t.timestamp)}`;
    const m = months.get(key) ?? {
      row: { inflow: 0n, outflow: 0n, transfers_in: 0, transfers_out: 0, first_at: t.timestamp },
      cps: new Set(),
      payers: new Set(),
      payees: new Set(),
    };
    m.row.last_at = t.timestamp;
    m.cps.add(other);
    if (isIn) {
      m.row.inflow = (m.row.inflow as bigint) + t.value;
      m.row.transfers_in = (m.row.transfers_in as number) + 1;
      m.payers.add(other);
    } else {
      m.row.outflow = (m.row.outflow as bigint) + t.value;
      m.row.transfers_out = (m.row.transfers_out as number) + 1;
      m.payees.add(other);
    }
    months.set(key, m);

    const pk = `${other}:${t.token}`;
    const p = pairs.get(pk) ?? {
      total_in: 0n,
      total_out: 0n,
      transfers_in: 0n,
      transfers_out: 0n,
      first_at: t.timestamp,
      last_at: 0n,
      first_in_at: null,
      last_in_at: null,
      first_out_at: null,
      last_out_at: null,
    };
    p.last_at = t.timestamp;
    if (isIn) {
      p.total_in! += t.value;
      p.transfers_in! += 1n;
      p.first_in_at ??= t.timestamp;
      p.last_in_at = t.timestamp;
    } else {
      p.total_out! += t.value;
      p.transfers_out! += 1n;
      p.first_out_at ??= t.timestamp;
      p.last_out_at = t.timestamp;
    }
    pairs.set(pk, p);
  }

  const str = (v: bigint | number | null) => (v === null ? null : String(v));
  const incoming = transfers.filter((t) => t.to === wallet);
  return {
    account,
    received: incoming.length ? { address: wallet, total: s(incoming.reduce((sum, t) => sum + t.value, 0n)) } : null,
    balances: [...balances.values()].sort((a, b) => a.token!.localeCompare(b.token!)),
    months: [...months]
      .map(([key, m]) => {
        const [token, month] = key.split(":");
        return {
          address: wallet,
          token: token!,
          month: month!,
          ...Object.fromEntries(Object.entries(m.row).map(([k, v]) => [k, str(v)])),
          counterparties: String(m.cps.size),
          payers: String(m.payers.size),
          payees: String(m.payees.size),
        };
      })
      .sort((a, b) => `${a.token}${a.month}`.localeCompare(`${b.token}${b.month}`)),
    counterparties: [...pairs]
      .map(([key, p]) => {
        const [counterparty, token] = key.split(":");
        return {
          address: wallet,
          counterparty: counterparty!,
          token: token!,
          ...Object.fromEntries(Object.entries(p).map(([k, v]) => [k, str(v)])),
        };
      })
      .sort((a, b) => `${a.counterparty}${a.token}`.localeCompare(`${b.counterparty}${b.token}`)),
  };
}

/** The `transfer` table's columns that the chain's log says (all but Ponder's event id), as SQL. */
export const TRANSFER_COLUMNS = 'token, "from", "to", value, block_number, timestamp, transaction_hash, log_index';

/** A transfer's row in the `transfer` table (TRANSFER_COLUMNS), as the chain's log has it. */
export const transferRow = (t: ChainTransfer) => ({
  token: t.token,
  from: t.from,
  to: t.to,
  value: t.value,
  block_number: t.block,
  timestamp: t.timestamp,
  transaction_hash: t.txHash,
  log_index: t.logIndex,
});

/**
 * Every row the index derives from Transfer logs, recomputed from the chain's logs alone: its tables
 * (`transfer` without Ponder's event id, `flow`, `received`, `index_total`, `wallet_seen`) and its
 * per-wallet views (`account`, `balance`, `account_month`, `counterparty`), each in one order
 * (normalised rows, sorted), as `indexRows` reads them from a database.
 */
export function expectedIndex(transfers: ChainTransfer[]): IndexRows {
  const flows = new Map<string, Flow>();
  const received = new Map<string, bigint>();
  const totals = new Map<string, { count: bigint; volume: bigint }>();
  for (const t of transfers) {
    // The handler's key: (from, to, token, UTC day).
    const day = t.timestamp / 86_400n;
    const key = `${t.from}:${t.to}:${t.token}:${day}`;
    const flow = flows.get(key);
    if (flow) Object.assign(flow, { total: flow.total + t.value, transfers: flow.transfers + 1, last_at: t.timestamp });
    else
      flows.set(key, {
        from: t.from,
        to: t.to,
        token: t.token,
        day,
        month: monthOf(t.timestamp),
        total: t.value,
        transfers: 1,
        first_at: t.timestamp,
        last_at: t.timestamp,
      });
    received.set(t.to, (received.get(t.to) ?? 0n) + t.value);
    const total = totals.get(`transfers:${t.token}`) ?? { count: 0n, volume: 0n };
    totals.set(`transfers:${t.token}`, { count: total.count + 1n, volume: total.volume + t.value });
  }
  const wallets = [...new Set(transfers.flatMap((t) => [t.from, t.to]))].filter((w) => w !== zeroAddress);
  totals.set("wallets", { count: BigInt(wallets.length), volume: 0n });
  const perWallet = wallets.map((wallet) => expectedAggregates(wallet, transfers));
  return sortedRows({
    transfer: transfers.map(transferRow),
    flow: [...flows.values()],
    received: [...received].map(([address, total]) => ({ address, total })),
    index_total: [...totals].map(([key, { count, volume }]) => ({ key, count, volume })),
    wallet_seen: wallets.map((address) => ({ address })),
    account: perWallet.flatMap((a) => (a.account ? [a.account] : [])),
    balance: perWallet.flatMap((a) => a.balances),
    account_month: perWallet.flatMap((a) => a.months),
    counterparty: perWallet.flatMap((a) => a.counterparties),
  });
}

/** The relations `expectedIndex` recomputes, in the order `indexRows` reads them. */
const INDEX_RELATIONS = [
  "transfer",
  "flow",
  "received",
  "index_total",
  "wallet_seen",
  "account",
  "balance",
  "account_month",
  "counterparty",
] as const;
type IndexRelation = (typeof INDEX_RELATIONS)[number];

/** What `expectedIndex` recomputes, read from an index's database (every row of each relation). */
export async function indexRows(query: Query): Promise<IndexRows> {
  const read = async (relation: IndexRelation) =>
    [relation, await query(`select ${relation === "transfer" ? TRANSFER_COLUMNS : "*"} from ${relation}`)] as const;
  const relations = [];
  for (const relation of INDEX_RELATIONS) relations.push(await read(relation));
  return sortedRows(Object.fromEntries(relations) as Record<IndexRelation, Record<string, unknown>[]>);
}

type IndexRows = Record<IndexRelation, Record<string, string | null>[]>;
type Flow = {
  from: string;
  to: string;
  token: string;
  day: bigint;
  month: string;
  total: bigint;
  transfers: number;
  first_at: bigint;
  last_at: bigint;
};

/** Each relation's rows normalised and in one order (by their JSON), whatever order they came in. */
const sortedRows = (relations: Record<IndexRelation, Record<string, unknown>[]>): IndexRows =>
  Object.fromEntries(
    Object.entries(relations).map(([relation, rows]) => [
      relation,
      normalise(rows)
        .map((row) => [JSON.stringify(row), row] as const)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([, row]) => row),
    ]),
  ) as IndexRows;

/** Table rows normalised the same way (every value a string or null, keys sorted). */
export function normalise(rows: Record<string, unknown>[]): Record<string, string | null>[] {
  return rows.map((row) =>
    Object.fromEntries(
      Object.keys(row)
        .sort()
        .map((k) => [k, row[k] === null || row[k] === undefined ? null : String(row[k])]),
    ),
  );
}

const listedEvent = parseAbiItem("event SanctionedAddressesAdded(address[] addrs)");
const delistedEvent = parseAbiItem("event SanctionedAddressesRemoved(address[] addrs)");

export type ChainListing = {
  address: string;
  listedBlock: bigint;
  listedTx: string;
  delistedBlock: bigint | null;
  delistedTx: string | null;
};

/**
 * The sanctions oracle's listings as its logs tell them (eth_getLogs, in log order): a wallet added
 * opens a listing unless one is open; removed closes the open one. Each wallet's on-chain
 * `isSanctioned` is whether a listing is open.
 */
export async function chainListings(rpcUrl: string, oracle: string): Promise<ChainListing[]> {
  const client = createPublicClient({ chain: devnetChain(rpcUrl), transport: http(rpcUrl) });
  const logs = await client.getLogs({
    address: oracle as Address,
    events: [listedEvent, delistedEvent],
    fromBlock: 0n,
    toBlock: "latest",
  });
  const listings: ChainListing[] = [];
  const open = new Map<string, ChainListing>();
  for (const log of logs) {
    for (const wallet of log.args.addrs!.map((a) => a.toLowerCase())) {
      const current = open.get(wallet);
      if (log.eventName === "SanctionedAddressesAdded" && !current) {
        const listing = {
          address: wallet,
          listedBlock: log.blockNumber!,
          listedTx: log.transactionHash!,
          delistedBlock: null,
          delistedTx: null,
        };
        listings.push(listing);
        open.set(wallet, listing);
      } else if (log.eventName === "SanctionedAddressesRemoved" && current) {
        Object.assign(current, { delistedBlock: log.blockNumber!, delistedTx: log.transactionHash! });
        open.delete(wallet);
      }
    }
  }
  return listings;
}
