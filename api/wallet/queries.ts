import { and, desc, eq, gt, inArray, sql } from "ponder";
import type { Address } from "../../config/addresses.ts";
import { ZERO_ADDRESS } from "../../config/addresses.ts";
import { account, balance, flow, report, transfer } from "../../ponder.schema.ts";
import type { IndexDb } from "../db.ts";
import { DAY, WINDOW_DAYS, type WalletFacts, type WalletTransfer } from "../scoring/facts.ts";

/** How many hops back from a wallet's payers the funding trail is followed. */
const FUNDING_HOPS = 6;
/**
 * A wallet with more incoming flows (funder x token x month) than this is a business or an
 * exchange, not a relay of someone's own money: its funding is not traced. At 6M transfers one
 * exchange has 21,000 funders, and reading them all cost more than the rest of a screen.
 */
export const MAX_TRACED_FLOWS = 1000;

/** The wallet's activity fingerprint: it changes exactly when an indexed transfer touches it. */
export async function walletActivity(db: IndexDb, address: Address) {
  const [row] = await db.select().from(account).where(eq(account.address, address));
  return row ?? null;
}

/**
 * Reads everything the scoring model needs about one wallet: a handful of indexed lookups on the
 * wallet's own rows (flows, its transfers of the last year), never a scan of the chain.
 */
export async function loadWalletFacts(
  db: IndexDb,
  schema: string,
  address: Address,
  asOf: number,
  options: { windowDays?: number; activity?: Awaited<ReturnType<typeof walletActivity>> } = {},
): Promise<WalletFacts> {
  const since = BigInt(asOf - (options.windowDays ?? WINDOW_DAYS) * DAY);
  // Independent lookups run together (Postgres serves them on separate connections).
  const [activity, balances, sent, received] = await Promise.all([
    options.activity !== undefined ? options.activity : walletActivity(db, address),
    db.select({ token: balance.token, balance: balance.balance }).from(balance).where(eq(balance.address, address)),
    db
      .select({ counterparty: transfer.to, token: transfer.token, value: transfer.value, at: transfer.timestamp })
      .from(transfer)
      .where(and(eq(transfer.from, address), gt(transfer.timestamp, since))),
    db
      .select({ counterparty: transfer.from, token: transfer.token, value: transfer.value, at: transfer.timestamp })
      .from(transfer)
      .where(and(eq(transfer.to, address), gt(transfer.timestamp, since))),
  ]);
  const transfers: WalletTransfer[] = [
    ...sent.map((t) => ({ ...t, direction: "out" as const, at: Number(t.at) })),
    ...received.map((t) => ({ ...t, direction: "in" as const, at: Number(t.at) })),
  ].sort((a, b) => a.at - b.at);
  const [firstSeen, funding] = await Promise.all([
    firstSeenOf(db, drainCandidates(transfers)),
    fundingTrail(db, schema, address, [...new Set(received.map((t) => t.counterparty))]),
  ]);

  return {
    address,
    asOf,
    account: activity && {
      firstAt: Number(activity.firstAt),
      lastAt: Number(activity.lastAt),
      transfersIn: activity.transfersIn,
      transfersOut: activity.transfersOut,
    },
    balances,
    transfers,
    firstSeen,
    funding,
  };
}

/**
 * Payees that could be drain sinks: paid exactly once in the window, within 48 hours of an inflow.
 * Only these need their first activity looked up, so ordinary spending costs no extra reads.
 */
export function drainCandidates(transfers: WalletTransfer[]): Address[] {
  const paid = new Map<Address, number>();
  for (const t of transfers) if (t.direction === "out") paid.set(t.counterparty, (paid.get(t.counterparty) ?? 0) + 1);
  const inflows = transfers.filter((t) => t.direction === "in").map((t) => t.at);
  return transfers
    .filter((t) => t.direction === "out" && paid.get(t.counterparty) === 1 && inflows.some((at) => at <= t.at && t.at - at <= 2 * DAY))
    .map((t) => t.counterparty);
}

async function firstSeenOf(db: IndexDb, wallets: Address[]): Promise<WalletFacts["firstSeen"]> {
  if (wallets.length === 0) return [];
  const rows = await db
    .select({ address: flow.to, firstAt: sql<string>`min(${flow.firstAt})`.mapWith(Number) })
    .from(flow)
    .where(inArray(flow.to, wallets))
    .groupBy(flow.to);
  const sentFirst = await db
    .select({ address: flow.from, firstAt: sql<string>`min(${flow.firstAt})`.mapWith(Number) })
    .from(flow)
    .where(inArray(flow.from, wallets))
    .groupBy(flow.from);
  const first = new Map<Address, number>();
  for (const r of [...rows, ...sentFirst]) first.set(r.address, Math.min(first.get(r.address) ?? Infinity, r.firstAt));
  return [...first].map(([address, firstAt]) => ({ address, firstAt }));
}

/**
 * Who funded the wallets that paid `address`, hop by hop: each hop follows only the funders that
 * gave a wallet most of its money, so the walk stays small (customers funded by exchanges or mints
 * stop at the first hop) yet follows a chain of fresh wallets all the way back.
 */
async function fundingTrail(db: IndexDb, schema: string, address: Address, payers: Address[]): Promise<WalletFacts["funding"]> {
  const rows: WalletFacts["funding"] = [];
  const visited = new Set<Address>([address, ZERO_ADDRESS]);
  let frontier = payers.filter((p) => !visited.has(p));
  for (let hop = 0; hop < FUNDING_HOPS && frontier.length > 0; hop++) {
    frontier.forEach((w) => visited.add(w));
    // Each frontier wallet's incoming flows, read at most MAX_TRACED_FLOWS + 1 deep: a wallet
    // with more is a hub and is left out without reading all of it.
    const result = await db.execute(sql`
      select wallet, funder, sum(total)::text as total from (
        select w.wallet, f.funder, f.total, count(*) over (partition by w.wallet) as n
        from unnest(array[${sql.join(frontier.map((a) => sql`${a}`), sql`, `)}]::text[]) as w(wallet)
        cross join lateral (
          select "from" as funder, total from ${sql.identifier(schema)}.flow where "to" = w.wallet limit ${MAX_TRACED_FLOWS + 1}
        ) f
      ) x
      where n <= ${MAX_TRACED_FLOWS}
      group by wallet, funder`);
    const funded = (result.rows as { wallet: Address; funder: Address; total: string }[]).map((r) => ({ wallet: r.wallet, funder: r.funder, total: BigInt(r.total) }));
    rows.push(...funded);
    const totals = new Map<Address, bigint>();
    for (const f of funded) totals.set(f.wallet, (totals.get(f.wallet) ?? 0n) + f.total);
    frontier = [...new Set(funded.filter((f) => f.total * 2n > (totals.get(f.wallet) ?? 0n) && !visited.has(f.funder)).map((f) => f.funder))];
  }
  return rows;
}

export type ValidReport = typeof report.$inferSelect;

/** The wallet's latest passport that is still valid: not revoked, not expired, not superseded. */
export async function latestValidReport(db: IndexDb, wallet: Address, asOf: number): Promise<ValidReport | null> {
  const rows = await db.select().from(report).where(eq(report.wallet, wallet)).orderBy(desc(report.publishedAt)).limit(20);
  return rows.find((r) => r.revokedAt === null && r.supersededBy === null && (r.expiresAt === null || Number(r.expiresAt) > asOf)) ?? null;
}
