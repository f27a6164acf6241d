import { and, eq, lt, or } from "drizzle-orm";
import { payment, settlementTransaction } from "../../../store/schema.ts";
import { ABANDONED_AFTER_MS, RESOLVED } from "../../lifecycle.ts";
import type { Reconciliation } from "../ledger.ts";
import { guard, target } from "./rules.ts";
import { byKey, type Store } from "./statements.ts";

/** Outcomes read from the chain for rows whose outcome was unknown. */
export function sqlReconciliation(store: Store): Reconciliation {
  return {
    async resolve(key, resolution) {
      const now = new Date();
      const event = RESOLVED[resolution.status];
      const set =
        resolution.status === "settled"
          ? { transaction: resolution.transaction, failure: resolution.note ?? null, settledAt: now }
          : { failure: resolution.failure, ...(resolution.transaction ? { transaction: resolution.transaction } : {}) };
      const updated = await (await store)
        .update(payment)
        .set({ ...set, status: target(event), reconciledAt: now, updatedAt: now })
        .where(and(byKey(key), guard(event)))
        .returning({ nonce: payment.nonce });
      return updated.length > 0;
    },
    async signedTransaction(transaction) {
      const [row] = await (await store)
        .select({ raw: settlementTransaction.rawTransaction })
        .from(settlementTransaction)
        .where(eq(settlementTransaction.transaction, transaction));
      return row?.raw;
    },
    async unresolved(settlingIdleMs, limit = 200) {
      const now = Date.now();
      return (await store)
        .select()
        .from(payment)
        .where(
          or(
            and(eq(payment.status, "settling"), lt(payment.updatedAt, new Date(now - settlingIdleMs))),
            and(eq(payment.status, "pending"), lt(payment.updatedAt, new Date(now - ABANDONED_AFTER_MS))),
          ),
        )
        .orderBy(payment.updatedAt)
        .limit(limit);
    },
  };
}
