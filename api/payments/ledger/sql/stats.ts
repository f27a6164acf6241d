import { and, count, eq, inArray, lt, sql } from "drizzle-orm";
import { AGED_STATUSES, PAYMENT_STATUSES, payment } from "../../../store/schema.ts";
import { type LedgerStats, type OutcomeCounts, STALE_PENDING_MS } from "../ledger.ts";
import { DEBT } from "./rules.ts";
import type { Store } from "./statements.ts";

/** Counters for stats and health. */
export function sqlLedgerStats(store: Store): LedgerStats {
  return {
    async ping() {
      await (await store).select({ nonce: payment.nonce }).from(payment).limit(1);
    },
    /** `pending` includes nothing of `settling`: add them for "outcome unknown". */
    async outcomeCounts() {
      const db = await store;
      const rows = await db.select({ status: payment.status, n: count() }).from(payment).groupBy(payment.status);
      const [extra] = await db
        .select({
          reconciled: sql<string>`count(*) filter (where ${payment.reconciledAt} is not null)`,
          deferredExpired: sql<string>`count(*) filter (where ${payment.deferred} and ${payment.status} = 'expired')`,
          owedUnits: sql<string>`coalesce(sum(${payment.amount}) filter (where ${DEBT}), 0)::text`,
        })
        .from(payment);
      const counts = Object.fromEntries(PAYMENT_STATUSES.map((s) => [s, 0])) as unknown as OutcomeCounts;
      for (const row of rows) counts[row.status] = Number(row.n);
      counts.reconciled = Number(extra?.reconciled ?? 0);
      counts.deferredExpired = Number(extra?.deferredExpired ?? 0);
      counts.owedUnits = extra?.owedUnits ?? "0";
      return counts;
    },
    /** Settled and waived rows by route and token, and the distinct payers of settled ones (GET /api/stats). */
    async servedTotals() {
      const db = await store;
      const rows = await db
        .select({
          route: payment.route,
          token: payment.token,
          status: payment.status,
          n: count(),
          amount: sql<string>`coalesce(sum(${payment.amount}), 0)::text`,
        })
        .from(payment)
        .where(inArray(payment.status, ["settled", "waived"]))
        .groupBy(payment.route, payment.token, payment.status);
      const [payers] = await db
        .select({ n: sql<string>`count(distinct ${payment.payer})` })
        .from(payment)
        .where(eq(payment.status, "settled"));
      return {
        rows: rows.map((r) => ({
          route: r.route,
          token: r.token.toLowerCase(),
          status: r.status as "settled" | "waived",
          calls: Number(r.n),
          amount: BigInt(r.amount),
        })),
        payers: Number(payers?.n ?? 0),
      };
    },
    async stalePending(olderThanMs = STALE_PENDING_MS) {
      const [row] = await (await store)
        .select({ n: count(), oldest: sql<string | null>`min(${payment.createdAt})` })
        .from(payment)
        .where(
          and(inArray(payment.status, [...AGED_STATUSES]), lt(payment.createdAt, new Date(Date.now() - olderThanMs))),
        );
      return { count: Number(row?.n ?? 0), oldest: row?.oldest ? new Date(row.oldest) : null };
    },
  };
}
