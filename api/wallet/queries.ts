import { desc, sql } from "ponder";
import type { Address } from "../../config/addresses.ts";
import { report } from "../../ponder.schema.ts";
import { arrayParam, builderArrayParam, type IndexDb, queryPrepared } from "../db.ts";
import { sanctionsOf } from "../sanctions/queries.ts";
import { type WalletFacts, type WalletTransfer, WINDOW_DAYS } from "../scoring/facts.ts";
import { DRAIN_SECONDS, DRAIN_SINK_PAYMENTS, DUST_FLOOR_UNITS } from "../scoring/rules.ts";
import { type IndexedHead, indexedHead, windowStart } from "../stats/queries.ts";
import { MAX_TRACED_FLOWS, type Outflow, type OutflowReader, traceFunding } from "./funding.ts";

/** A wallet's lifetime position: balance per token and activity across tokens. */
export type WalletPosition = {
  balances: WalletFacts["balances"];
  account: WalletFacts["account"];
  /** Changes exactly when an indexed transfer touches the wallet: the result cache's key. */
  fingerprint: string;
};

/** The positions of wallets in one statement (a batch's cache check is one round trip, not one per wallet), balances in token order. */
export async function walletPositions(
  db: IndexDb,
  schema: string,
  addresses: readonly Address[],
): Promise<Map<Address, WalletPosition>> {
  const rows = await queryPrepared<{
    address: Address;
    token: Address;
    balance: string;
    transfers_in: number;
    transfers_out: number;
    first_at: string;
    last_at: string;
  }>(
    db,
    `positions:${schema}`,
    `select address, token, balance::text, transfers_in, transfers_out, first_at::text, last_at::text from "${schema}".balance where address = any(${arrayParam(1, "text")}) order by address, token`,
    [addresses],
  );
  return new Map(addresses.map((address) => [address, positionOf(rows.filter((r) => r.address === address))]));
}

function positionOf(
  rows: {
    token: Address;
    balance: string;
    transfers_in: number;
    transfers_out: number;
    first_at: string;
    last_at: string;
  }[],
): WalletPosition {
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
    fingerprint:
      rows
        .map((r) => `${r.token}:${r.transfers_in}:${r.transfers_out}:${r.last_at}`)
        .sort()
        .join(",") || "none",
  };
}

/**
 * Each wallet's transfers, both ways, over the `windowDays` before the indexed head. The window is
 * taken from the checkpoint inside the statement, so this read need not wait for the head's.
 */
async function windowTransfers(
  db: IndexDb,
  schema: string,
  addresses: readonly Address[],
  windowDays: number,
): Promise<Map<Address, WalletTransfer[]>> {
  const since = windowStart(schema, "$2");
  const rows = await queryPrepared<{
    wallet: Address;
    direction: "in" | "out";
    counterparty: Address;
    token: Address;
    value: string;
    at: string;
  }>(
    db,
    `window_transfers:${schema}`,
    // Per wallet, two index-only range scans; all wallets in one round trip.
    `select w.address as wallet, t.* from unnest(${arrayParam(1, "text")}) as w(address) cross join lateral (
       select 'out' as direction, "to" as counterparty, token, value::text, timestamp::text as at
         from "${schema}".transfer where "from" = w.address and timestamp > ${since}
       union all
       select 'in', "from", token, value::text, timestamp::text
         from "${schema}".transfer where "to" = w.address and timestamp > ${since}) t`,
    [addresses, windowDays],
  );
  const byWallet = new Map<Address, WalletTransfer[]>(addresses.map((a) => [a, []]));
  for (const r of rows)
    byWallet.get(r.wallet)!.push({
      direction: r.direction,
      counterparty: r.counterparty,
      token: r.token,
      value: BigInt(r.value),
      at: Number(r.at),
    });
  for (const list of byWallet.values()) list.sort((a, b) => a.at - b.at);
  return byWallet;
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
  const { head, wallets } = await loadWalletsFacts(db, schema, [address], {
    windowDays: options.windowDays,
    positions: options.position && new Map([[address, options.position]]),
  });
  return { head, ...wallets.get(address)! };
}

/**
 * loadWalletFacts for many wallets at once, with the same statements: each reads every wallet's
 * rows in one round trip, and the funding traces' hops share theirs. A batch of 100 wallets costs
 * a handful of statements, not 100 times as many.
 */
export async function loadWalletsFacts(
  db: IndexDb,
  schema: string,
  addresses: readonly Address[],
  options: {
    windowDays?: number;
    positions?: Map<Address, WalletPosition>;
    /** Read each wallet's standing on the sanctions oracle; `complete` when its listings are indexed from its creation. */
    sanctions?: { complete: boolean };
  } = {},
): Promise<{ head: IndexedHead | null; wallets: Map<Address, { facts: WalletFacts; position: WalletPosition }> }> {
  const windowDays = options.windowDays ?? WINDOW_DAYS;
  const unknown = addresses.filter((a) => !options.positions?.has(a));
  const window = windowTransfers(db, schema, addresses, windowDays);
  const outflows = coalesced(outflowsOf(db, schema));
  const [read, head, transfers, firstSeen, funding, sanctions] = await Promise.all([
    unknown.length ? walletPositions(db, schema, unknown) : new Map<Address, WalletPosition>(),
    indexedHead(db, schema),
    window,
    drainSinksFirstSeen(db, schema, addresses, windowDays),
    Promise.all(
      addresses.map((a) =>
        traceFunding(a, outflows, async () =>
          (await window)
            .get(a)!
            .filter((t) => t.direction === "in")
            .map((t) => t.counterparty),
        ),
      ),
    ),
    options.sanctions && sanctionsOf(db, schema, addresses, windowDays, options.sanctions.complete),
  ]);
  const asOf = head ? Number(head.timestamp) : Math.floor(Date.now() / 1000);
  const wallets = new Map(
    addresses.map((address, i) => {
      const position = options.positions?.get(address) ?? read.get(address)!;
      const facts: WalletFacts = {
        address,
        asOf,
        account: position.account,
        balances: position.balances,
        transfers: transfers.get(address)!,
        firstSeen: firstSeen.get(address)!,
        funding: funding[i]!,
        ...(sanctions ? { sanctions: sanctions.get(address)! } : {}),
      };
      return [address, { facts, position }];
    }),
  );
  return { head, wallets };
}

/**
 * First activity of the payee of each drain candidate: api/scoring/rules.ts `drainCandidates`, in
 * SQL with its constants (paid exactly DRAIN_SINK_PAYMENTS times in the window, at most
 * DRAIN_SECONDS after an inflow of at least DUST_FLOOR_UNITS or from the wallet itself). Only these
 * payees need their first activity, so ordinary spending costs no extra reads. It is the earliest
 * entry of the payee's transfer index on either side: two index probes per candidate, however busy
 * it is (a candidate can be an exchange). test/db/screen.test.ts holds the two equal.
 */
async function drainSinksFirstSeen(
  db: IndexDb,
  schema: string,
  addresses: readonly Address[],
  windowDays: number,
): Promise<Map<Address, WalletFacts["firstSeen"]>> {
  const since = windowStart(schema, "$2");
  const rows = await queryPrepared<{ wallet: Address; address: Address; first_at: string }>(
    db,
    `first_seen:${schema}`,
    `select w.address as wallet, o.payee as address, least(
       (select min(timestamp) from "${schema}".transfer where "to" = o.payee),
       (select min(timestamp) from "${schema}".transfer where "from" = o.payee))::text as first_at
     from unnest(${arrayParam(1, "text")}) as w(address)
     cross join lateral (
       select "to" as payee, min(timestamp) as paid_at from "${schema}".transfer
       where "from" = w.address and timestamp > ${since} group by "to" having count(*) = ${DRAIN_SINK_PAYMENTS}
     ) o
     where exists (
       select 1 from "${schema}".transfer i
       where i."to" = w.address and i.timestamp > ${since} and i.timestamp between o.paid_at - ${DRAIN_SECONDS} and o.paid_at
         and (i.value >= ${DUST_FLOOR_UNITS} or i."from" = w.address))`,
    [addresses, windowDays],
  );
  const byWallet = new Map<Address, WalletFacts["firstSeen"]>(addresses.map((a) => [a, []]));
  for (const r of rows) byWallet.get(r.wallet)!.push({ address: r.address, firstAt: Number(r.first_at) });
  return byWallet;
}

/**
 * An outflow reader shared by concurrent funding traces (a batch's wallets): the members asked
 * for in the same turn are read in one statement, and each trace gets its own members' rows.
 */
function coalesced(read: OutflowReader): OutflowReader {
  let queued: { members: Set<Address>; rows: Promise<Outflow[]> } | undefined;
  return async (members) => {
    if (!queued) {
      const batch = { members: new Set<Address>(), rows: undefined as unknown as Promise<Outflow[]> };
      batch.rows = new Promise<void>((r) => setImmediate(r)).then(() => {
        queued = undefined;
        return read([...batch.members]);
      });
      queued = batch;
    }
    for (const m of members) queued.members.add(m);
    const wanted = new Set(members);
    return (await queued.rows).filter((o) => wanted.has(o.member));
  };
}

/**
 * Members' outgoing flows, each read at most MAX_TRACED_FLOWS + 1 deep, with each payee's lifetime
 * inflow. A flow here is a payee, token and month: `flow` keeps one row per day, so its rows are
 * summed per month first (read in that order from the `(from, to, token, month, …)` index, which
 * lets the limit stop the read early).
 */
function outflowsOf(db: IndexDb, schema: string): OutflowReader {
  return async (members) => {
    const rows = await queryPrepared<{
      member: Address;
      payee: Address;
      total: string;
      flows: string;
      received: string;
    }>(
      db,
      `outflows:${schema}`,
      `select m.member, p.payee, p.total::text as total, p.flows, coalesce(r.total, 0)::text as received
       from unnest(${arrayParam(1, "text")}) as m(member)
       cross join lateral (
         select "to" as payee, sum(total) as total, sum(count(*)) over () as flows
         from (
           select "to", sum(total) as total from "${schema}".flow where "from" = m.member
           group by "to", token, month order by "to", token, month limit ${MAX_TRACED_FLOWS + 1}
         ) x
         group by "to"
       ) p
       left join "${schema}".received r on r.address = p.payee`,
      [members],
    );
    return rows.map((r) => ({
      member: r.member,
      payee: r.payee,
      total: BigInt(r.total),
      flows: Number(r.flows),
      received: BigInt(r.received),
    }));
  };
}

export type ValidReport = typeof report.$inferSelect;

/** How many of a wallet's latest passports are read: enough history to find the one still valid. */
const RECENT_REPORTS = 20;

/** The wallet's latest passports, newest first: enough history to find the one still valid. */
export async function recentReports(db: IndexDb, wallet: Address): Promise<ValidReport[]> {
  return (await recentReportsOf(db, [wallet])).get(wallet) ?? [];
}

/**
 * recentReports of many wallets in one statement (a batch). Passports are few per wallet (each is
 * a paid, attested report), so all of theirs are read and each list is cut after.
 */
export async function recentReportsOf(db: IndexDb, wallets: readonly Address[]): Promise<Map<Address, ValidReport[]>> {
  const rows = await reportsOf(db).execute({ wallets: [...wallets] });
  const byWallet = new Map<Address, ValidReport[]>(wallets.map((w) => [w, []]));
  for (const r of rows) {
    const list = byWallet.get(r.wallet as Address);
    if (list && list.length < RECENT_REPORTS) list.push(r);
  }
  return byWallet;
}

/**
 * The passports of wallets (every screen's lookup), as a statement prepared once per connection,
 * its array read through arrayParam: built by the builder at each call, it was parsed and planned
 * again each time.
 */
const preparedReports = new WeakMap<IndexDb, ReturnType<typeof prepareReports>>();
const prepareReports = (db: IndexDb) =>
  db
    .select()
    .from(report)
    .where(sql`${report.wallet} = any(${builderArrayParam(sql.placeholder("wallets"), "text")})`)
    .orderBy(desc(report.publishedAt))
    .prepare("recent_reports");
function reportsOf(db: IndexDb) {
  let prepared = preparedReports.get(db);
  if (!prepared) preparedReports.set(db, (prepared = prepareReports(db)));
  return prepared;
}

/** A passport's standing at `asOf` from its attestation alone (its pinned content's integrity aside). */
export function attestedStatus(r: ValidReport, asOf: number): "revoked" | "superseded" | "expired" | "confirmed" {
  if (r.revokedAt !== null) return "revoked";
  if (r.supersededBy !== null) return "superseded";
  if (r.expiresAt !== null && Number(r.expiresAt) <= asOf) return "expired";
  return "confirmed";
}

/** The latest of `reports` still valid at `asOf`: not revoked, not expired, not superseded. */
export function validReport(reports: ValidReport[], asOf: number): ValidReport | null {
  return reports.find((r) => attestedStatus(r, asOf) === "confirmed") ?? null;
}
