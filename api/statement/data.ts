import type { Address } from "../../config/addresses.ts";
import type { TokenInfo } from "../../config/celo.ts";
import { monthOf } from "../../shared/month.ts";
import { type IndexDb, queryPrepared } from "../db.ts";
import { indexedHead } from "../stats/queries.ts";

/** The periods a statement covers, counted back from the latest indexed block. */
export const STATEMENT_PERIODS = ["1M", "3M", "6M", "12M"] as const;
export type StatementPeriod = (typeof STATEMENT_PERIODS)[number];
export const DEFAULT_PERIOD: StatementPeriod = "3M";

/**
 * The period's first second: `months` calendar months before `to`, same UTC time of day, the day
 * clamped to the month's last (31 May - 3M = 28/29 Feb). Both ends are included.
 */
export function periodStart(to: number, period: StatementPeriod): number {
  const months = Number(period.slice(0, -1));
  const d = new Date(to * 1000);
  const month = d.getUTCMonth() - months;
  const lastDay = new Date(Date.UTC(d.getUTCFullYear(), month + 1, 0)).getUTCDate();
  return (
    Date.UTC(
      d.getUTCFullYear(),
      month,
      Math.min(d.getUTCDate(), lastDay),
      d.getUTCHours(),
      d.getUTCMinutes(),
      d.getUTCSeconds(),
    ) / 1000
  );
}

/** One side of a transfer seen from the wallet (a transfer to itself is two rows, out and in, as in the aggregates). */
export type StatementRow = {
  timestamp: number;
  blockNumber: bigint;
  logIndex: number;
  transactionHash: string;
  direction: "in" | "out";
  counterparty: Address;
  token: TokenInfo;
  value: bigint;
};

type TokenTotals = {
  token: TokenInfo;
  opening: bigint;
  totalIn: bigint;
  totalOut: bigint;
  closing: bigint;
  transfersIn: number;
  transfersOut: number;
};

type MonthTotals = {
  month: string;
  token: TokenInfo;
  totalIn: bigint;
  totalOut: bigint;
  transfersIn: number;
  transfersOut: number;
};

/** Everything a statement shows, in token units (bigint) until it is formatted. */
export type StatementData = {
  wallet: Address;
  period: StatementPeriod;
  /** Unix seconds, both included. */
  from: number;
  to: number;
  asOf: { block: bigint; timestamp: number };
  /** Oldest first (block, log index, direction). */
  rows: StatementRow[];
  /** One entry per indexed token, in the target's order, with or without activity. */
  tokens: TokenTotals[];
  /** Per UTC month and token with activity in the period, oldest first. */
  months: MonthTotals[];
};

/** Nothing has been indexed yet: there is no block to count the period back from. */
export class IndexNotReady extends Error {}

/**
 * Reads a wallet's statement from the indexed tables. The latest indexed block fixes the period's
 * end. One statement then reads, in one snapshot, the wallet's `transfer` rows since the period's
 * start (both ways, from the (from, timestamp) and (to, timestamp) indexes) and its lifetime
 * `balance` per token; the opening balance is the lifetime balance less what moved since the start.
 * Rows past the indexed block (a flush under way) are left out of the period but counted back out
 * of the balance, so the figures always agree with each other.
 */
export async function loadStatement(
  db: IndexDb,
  target: { schema: string; tokens: readonly TokenInfo[] },
  wallet: Address,
  period: StatementPeriod,
): Promise<StatementData> {
  const head = await indexedHead(db, target.schema);
  if (!head) throw new IndexNotReady("nothing is indexed yet");
  const to = Number(head.timestamp);
  const from = periodStart(to, period);
  const s = target.schema;
  const raw = await queryPrepared<{
    kind: "in" | "out" | "balance";
    counterparty: Address | null;
    token: Address;
    value: string;
    block: string | null;
    at: string | null;
    tx: string | null;
    log: number | null;
  }>(
    db,
    `statement:${s}`,
    `select 'out' as kind, "to" as counterparty, token, value::text as value, block_number::text as block, timestamp::text as at, transaction_hash as tx, log_index as log
       from "${s}".transfer where "from" = $1 and timestamp >= $2
     union all
     select 'in', "from", token, value::text, block_number::text, timestamp::text, transaction_hash, log_index
       from "${s}".transfer where "to" = $1 and timestamp >= $2
     union all
     select 'balance', null, token, balance::text, null, null, null, null from "${s}".balance where address = $1`,
    [wallet, from],
  );

  const byAddress = new Map(target.tokens.map((t) => [t.address.toLowerCase(), t]));
  const totals = new Map(
    target.tokens.map((t) => [
      t.address.toLowerCase(),
      { token: t, lifetime: 0n, since: 0n, after: 0n, totalIn: 0n, totalOut: 0n, transfersIn: 0, transfersOut: 0 },
    ]),
  );
  const rows: StatementRow[] = [];
  for (const r of raw) {
    const t = totals.get(r.token.toLowerCase());
    if (!t) continue; // not a token this service indexes (cannot happen with its own tables)
    const value = BigInt(r.value);
    if (r.kind === "balance") {
      t.lifetime = value;
      continue;
    }
    const signed = r.kind === "in" ? value : -value;
    t.since += signed;
    const block = BigInt(r.block!);
    if (block > head.blockNumber) {
      t.after += signed;
      continue;
    }
    if (r.kind === "in") {
      t.totalIn += value;
      t.transfersIn++;
    } else {
      t.totalOut += value;
      t.transfersOut++;
    }
    rows.push({
      timestamp: Number(r.at),
      blockNumber: block,
      logIndex: r.log!,
      transactionHash: r.tx!,
      direction: r.kind,
      counterparty: r.counterparty!,
      token: byAddress.get(r.token.toLowerCase())!,
      value,
    });
  }
  rows.sort((a, b) =>
    a.blockNumber === b.blockNumber
      ? a.logIndex - b.logIndex || a.direction.localeCompare(b.direction)
      : a.blockNumber < b.blockNumber
        ? -1
        : 1,
  );

  const months = new Map<string, MonthTotals>();
  for (const r of rows) {
    const key = `${monthOf(r.timestamp)}:${target.tokens.indexOf(r.token)}`;
    const m = months.get(key) ?? {
      month: monthOf(r.timestamp),
      token: r.token,
      totalIn: 0n,
      totalOut: 0n,
      transfersIn: 0,
      transfersOut: 0,
    };
    if (r.direction === "in") {
      m.totalIn += r.value;
      m.transfersIn++;
    } else {
      m.totalOut += r.value;
      m.transfersOut++;
    }
    months.set(key, m);
  }

  return {
    wallet,
    period,
    from,
    to,
    asOf: { block: head.blockNumber, timestamp: to },
    rows,
    tokens: [...totals.values()].map((t) => ({
      token: t.token,
      opening: t.lifetime - t.since,
      totalIn: t.totalIn,
      totalOut: t.totalOut,
      closing: t.lifetime - t.after,
      transfersIn: t.transfersIn,
      transfersOut: t.transfersOut,
    })),
    months: [...months.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, m]) => m),
  };
}
