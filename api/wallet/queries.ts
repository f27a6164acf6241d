import { desc, eq } from "ponder";
import type { Address } from "../../config/addresses.ts";
import { report } from "../../ponder.schema.ts";
import { type IndexDb, queryPrepared } from "../db.ts";
import { type IndexedHead, indexedHead } from "../stats/queries.ts";
import { DAY, WINDOW_DAYS, type WalletFacts, type WalletTransfer } from "../scoring/facts.ts";
import { DRAIN_SECONDS, DRAIN_SINK_PAYMENTS, DUST_FLOOR_UNITS } from "../scoring/rules.ts";
import { MAX_TRACED_FLOWS, type OutflowReader, traceFunding } from "./funding.ts";

/** A wallet's lifetime position: balance per token and activity across tokens. */
export type WalletPosition = {
  balances: WalletFacts["balances"];
  account: WalletFacts["account"];
  /** Changes exactly when an indexed transfer touches the wallet: the result cache's key. */
  fingerprint: string;
};

export async function walletPosition(db: IndexDb, schema: string, address: Address): Promise<WalletPosition> {
  const rows = await queryPrepared<{ token: Address; balance: string; transfers_in: number; transfers_out: number; first_at: string; last_at: string }>(
    db,
    `position:${schema}`,
    `select token, balance::text, transfers_in, transfers_out, first_at::text, last_at::text from "${schema}".balance where address = $1`,
    [address],
  );
  return {
    balances: rows.map((r) => ({ token: r.token, balance: BigInt(r.balance) })),
    account: rows.length
      ? {
          firstAt: Math.min(...rows.map((r) => Number(r.first_at))),
          lastAt: Math.max(...rows.map((r) => Number(r.last_at))),
          transfersIn: rows.reduce((n, r) => n + r.transfers_in, 0),
          transfersOut: rows.reduce((n, r) => n + r.transfers_out, 0),
        }
      : null,
    fingerprint: rows.map((r) => `${r.token}:${r.transfers_in}:${r.transfers_out}:${r.last_at}`).sort().join(",") || "none",
  };
}

/** SQL for the start of a window of `days` (a parameter) before the indexed head's time. */
const windowStart = (schema: string, days: string) =>
  `(select substr(latest_checkpoint, 1, 10)::numeric from "${schema}"._ponder_checkpoint limit 1) - ${days}::numeric * ${DAY}`;

/**
 * The wallet's transfers, both ways, over the `windowDays` before the indexed head. The window is
 * taken from the checkpoint inside the statement, so this read need not wait for the head's.
 */
async function windowTransfers(db: IndexDb, schema: string, address: Address, windowDays: number): Promise<WalletTransfer[]> {
  const since = windowStart(schema, "$2");
  const rows = await queryPrepared<{ direction: "in" | "out"; counterparty: Address; token: Address; value: string; at: string }>(
    db,
    `window_transfers:${schema}`,
    // Two index-only range scans in one round trip.
    `select 'out' as direction, "to" as counterparty, token, value::text, timestamp::text as at
       from "${schema}".transfer where "from" = $1 and timestamp > ${since}
     union all
     select 'in', "from", token, value::text, timestamp::text
       from "${schema}".transfer where "to" = $1 and timestamp > ${since}`,
    [address, windowDays],
  );
  return rows.map((r) => ({ direction: r.direction, counterparty: r.counterparty, token: r.token, value: BigInt(r.value), at: Number(r.at) })).sort((a, b) => a.at - b.at);
}

/**
 * Reads everything the scoring model needs about one wallet as of the indexed head: a handful of
 * indexed lookups on the wallet's own rows (position, its transfers of the last year, where its
 * money went, when its possible drain sinks first appeared), never a scan of the chain. They run
 * together in one round; only a wallet whose money may have come back to it needs a second.
 */
export async function loadWalletFacts(
  db: IndexDb,
  schema: string,
  address: Address,
  options: { windowDays?: number; position?: WalletPosition } = {},
): Promise<{ facts: WalletFacts; head: IndexedHead | null; position: WalletPosition }> {
  const windowDays = options.windowDays ?? WINDOW_DAYS;
  const window = windowTransfers(db, schema, address, windowDays);
  const [position, head, transfers, firstSeen, funding] = await Promise.all([
    options.position ?? walletPosition(db, schema, address),
    indexedHead(db, schema),
    window,
    drainSinksFirstSeen(db, schema, address, windowDays),
    traceFunding(address, outflowsOf(db, schema), async () => (await window).filter((t) => t.direction === "in").map((t) => t.counterparty)),
  ]);
  const asOf = head ? Number(head.timestamp) : Math.floor(Date.now() / 1000);
  const facts: WalletFacts = {
    address,
    asOf,
    account: position.account,
    balances: position.balances,
    transfers,
    firstSeen,
    funding,
  };
  return { facts, head, position };
}

/**
 * First activity of the payee of each drain candidate: api/scoring/rules.ts `drainCandidates`, in
 * SQL with its constants (paid exactly DRAIN_SINK_PAYMENTS times in the window, at most
 * DRAIN_SECONDS after an inflow of at least DUST_FLOOR_UNITS or from the wallet itself). Only these
 * payees need their first activity, so ordinary spending costs no extra reads. It is the earliest
 * entry of the payee's transfer index on either side: two index probes per candidate, however busy
 * it is (a candidate can be an exchange). test/db/drain-rule.test.ts holds the two equal.
 */
async function drainSinksFirstSeen(db: IndexDb, schema: string, address: Address, windowDays: number): Promise<WalletFacts["firstSeen"]> {
  const since = windowStart(schema, "$2");
  const rows = await queryPrepared<{ address: Address; first_at: string }>(
    db,
    `first_seen:${schema}`,
    `with once as (
       select "to" as payee, min(timestamp) as paid_at from "${schema}".transfer
       where "from" = $1 and timestamp > ${since} group by "to" having count(*) = ${DRAIN_SINK_PAYMENTS}
     )
     select o.payee as address, least(
       (select min(timestamp) from "${schema}".transfer where "to" = o.payee),
       (select min(timestamp) from "${schema}".transfer where "from" = o.payee))::text as first_at
     from once o
     where exists (
       select 1 from "${schema}".transfer i
       where i."to" = $1 and i.timestamp > ${since} and i.timestamp between o.paid_at - ${DRAIN_SECONDS} and o.paid_at
         and (i.value >= ${DUST_FLOOR_UNITS} or i."from" = $1))`,
    [address, windowDays],
  );
  return rows.map((r) => ({ address: r.address, firstAt: Number(r.first_at) }));
}

/** Members' outgoing flows, each read at most MAX_TRACED_FLOWS + 1 deep, with each payee's lifetime inflow. */
function outflowsOf(db: IndexDb, schema: string): OutflowReader {
  return async (members) => {
    const rows = await queryPrepared<{ member: Address; payee: Address; total: string; flows: string; received: string }>(
      db,
      `outflows:${schema}`,
      `select m.member, p.payee, p.total::text as total, p.flows, coalesce(r.total, 0)::text as received
       from unnest($1::text[]) as m(member)
       cross join lateral (
         select "to" as payee, sum(total) as total, sum(count(*)) over () as flows
         from (select "to", total from "${schema}".flow where "from" = m.member limit ${MAX_TRACED_FLOWS + 1}) x
         group by "to"
       ) p
       left join "${schema}".received r on r.address = p.payee`,
      [members],
    );
    return rows.map((r) => ({ member: r.member, payee: r.payee, total: BigInt(r.total), flows: Number(r.flows), received: BigInt(r.received) }));
  };
}

export type ValidReport = typeof report.$inferSelect;

/** The wallet's latest passports, newest first: enough history to find the one still valid. */
export function recentReports(db: IndexDb, wallet: Address): Promise<ValidReport[]> {
  return db.select().from(report).where(eq(report.wallet, wallet)).orderBy(desc(report.publishedAt)).limit(20);
}

/** The latest of `reports` still valid at `asOf`: not revoked, not expired, not superseded. */
export function validReport(reports: ValidReport[], asOf: number): ValidReport | null {
  return reports.find((r) => r.revokedAt === null && r.supersededBy === null && (r.expiresAt === null || Number(r.expiresAt) > asOf)) ?? null;
}
