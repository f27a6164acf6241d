import { and, count, eq, gt, inArray, isNotNull, isNull, lt, or, sql } from "drizzle-orm";
import type { Address } from "../../config/addresses.ts";
import { payment, type PaymentRow, type PaymentStatus } from "../store/schema.ts";
import type { ServiceDb } from "../store/store.ts";

export type PaymentKey = { token: Address; payer: Address; nonce: string };

export type NewPayment = PaymentKey & {
  amount: bigint;
  route: string;
  subject: string | null;
  fingerprint: string;
  signatureHash: string;
  encoding: string;
  /** The authorization's validBefore (unix seconds). */
  validBefore: bigint;
};

/** A settlement about to be broadcast: recorded first, so that its outcome can always be found on chain. */
export type SettlementRecord = { transaction?: string; settler?: string; settlerNonce?: number; rawTransaction?: string };

/** How a payment whose outcome was unknown ended, read from the chain. */
export type Resolution =
  | { status: "settled"; transaction: string; note?: string }
  | { status: "failed" | "expired" | "used_elsewhere"; failure: string; transaction?: string };

/** Payments by outcome (stats and health): `reconciled` counts outcomes decided from the chain, whatever they are. */
export type OutcomeCounts = Record<PaymentStatus, number> & { reconciled: number };

/** Paid calls answered (settled, or waived as a free read), by route and token, with the revenue settled. */
export type ServedTotals = { rows: { route: string; token: string; status: "settled" | "waived"; calls: number; amount: bigint }[]; payers: number };

/** A row pending longer than STALE_PENDING_MS is reported by health: its settlement needs attention. */
export const STALE_PENDING_MS = 5 * 60_000;

export type StoredAnswer = { status: number; type: string; body: string };

/**
 * A claim older than this with no outcome belongs to a request that died (a crashed replica): it may
 * be claimed again. Verification runs first, so a payment that did settle is refused, not taken twice.
 */
export const ABANDONED_AFTER_MS = 120_000;

/**
 * A settled payment whose answer was never stored is answered again by one request at a time: that
 * request marks the row with this response status (HTTP 102 Processing) and no body until it stores
 * the answer. A mark older than RERUN_LEASE_MS belongs to a request that died: another may take over.
 */
export const RERUN_MARK = 102;
export const RERUN_LEASE_MS = 30_000;

/** Whether another request is producing this settled payment's answer again right now. */
export const isRerunning = (row: Pick<PaymentRow, "status" | "responseStatus" | "responseBody" | "updatedAt">, now = Date.now()) =>
  row.status === "settled" && row.responseBody === null && row.responseStatus === RERUN_MARK && now - row.updatedAt.getTime() <= RERUN_LEASE_MS;

export const isAbandoned = (row: Pick<PaymentRow, "status" | "updatedAt">, now = Date.now()) =>
  row.status === "pending" && now - row.updatedAt.getTime() > ABANDONED_AFTER_MS;

const byKey = (k: PaymentKey) => and(eq(payment.token, k.token), eq(payment.payer, k.payer), eq(payment.nonce, k.nonce));

/**
 * The payment ledger. A payment is claimed by inserting its row: the primary key on
 * (token, payer, nonce) lets exactly one request, on any replica, go on to settle it.
 */
export class PaymentLedger {
  /** Takes the store as a promise: the API module is loaded synchronously, the store opens later. */
  constructor(private readonly store: Promise<ServiceDb> | ServiceDb) {}

  /** A round trip to the store, for health checks. */
  async ping(): Promise<void> {
    await (await this.store).select({ nonce: payment.nonce }).from(payment).limit(1);
  }

  async find(key: PaymentKey): Promise<PaymentRow | undefined> {
    const [row] = await (await this.store).select().from(payment).where(byKey(key)).limit(1);
    return row;
  }

  /**
   * Claims the payment for this request: true when this request now owns it (a new row, or a row
   * whose earlier attempt failed or was abandoned, for the same request and signature).
   */
  async claim(entry: NewPayment): Promise<boolean> {
    const inserted = await (await this.store)
      .insert(payment)
      .values({ ...entry, amount: entry.amount.toString(), validBefore: entry.validBefore.toString(), status: "pending" })
      .onConflictDoNothing()
      .returning({ nonce: payment.nonce });
    if (inserted.length) return true;
    const reclaimed = await (await this.store)
      .update(payment)
      .set({ status: "pending", failure: null, transaction: null, settler: null, settlerNonce: null, rawTransaction: null, updatedAt: new Date() })
      .where(
        and(
          byKey(entry),
          or(eq(payment.status, "failed"), and(eq(payment.status, "pending"), lt(payment.updatedAt, new Date(Date.now() - ABANDONED_AFTER_MS)))),
          eq(payment.fingerprint, entry.fingerprint),
          eq(payment.signatureHash, entry.signatureHash),
        ),
      )
      .returning({ nonce: payment.nonce });
    return reclaimed.length > 0;
  }

  /**
   * The settlement is about to be broadcast: the row becomes `settling` with the answer the payer
   * bought and, in self-settlement, the transaction (hash, relayer, nonce, signed bytes). Written
   * before the transaction leaves, so a crash or a timeout leaves a row the chain can settle.
   */
  async settling(key: PaymentKey, answer: StoredAnswer | null, record: SettlementRecord = {}): Promise<boolean> {
    const updated = await (await this.store)
      .update(payment)
      .set({
        status: "settling",
        transaction: record.transaction ?? null,
        settler: record.settler ?? null,
        settlerNonce: record.settlerNonce ?? null,
        rawTransaction: record.rawTransaction ?? null,
        ...(answer ? { responseStatus: answer.status, responseType: answer.type, responseBody: answer.body } : {}),
        updatedAt: new Date(),
      })
      .where(and(byKey(key), inArray(payment.status, ["pending", "settling"])))
      .returning({ nonce: payment.nonce });
    return updated.length > 0;
  }

  /** The money moved in `transaction`. `answer` is what was sent (kept when already stored). */
  async settled(key: PaymentKey, transaction: string, answer?: StoredAnswer): Promise<void> {
    const now = new Date();
    await (await this.store)
      .update(payment)
      .set({
        status: "settled",
        transaction,
        failure: null,
        ...(answer ? { responseStatus: answer.status, responseType: answer.type, responseBody: answer.body } : {}),
        settledAt: now,
        updatedAt: now,
      })
      .where(and(byKey(key), inArray(payment.status, ["pending", "settling", "failed"])));
  }

  /**
   * A settled payment whose answer was never stored: claims the right to produce it again (one
   * request at a time, on any replica). False if another request holds it.
   */
  async claimRerun(key: PaymentKey): Promise<boolean> {
    const claimed = await (await this.store)
      .update(payment)
      .set({ responseStatus: RERUN_MARK, updatedAt: new Date() })
      .where(
        and(
          byKey(key),
          eq(payment.status, "settled"),
          isNull(payment.responseBody),
          or(isNull(payment.responseStatus), lt(payment.updatedAt, new Date(Date.now() - RERUN_LEASE_MS))),
        ),
      )
      .returning({ nonce: payment.nonce });
    return claimed.length > 0;
  }

  /** The answer could not be produced again (the handler failed): another request may try. */
  async releaseRerun(key: PaymentKey): Promise<void> {
    await (await this.store)
      .update(payment)
      .set({ responseStatus: null, updatedAt: new Date() })
      .where(and(byKey(key), eq(payment.status, "settled"), isNull(payment.responseBody), eq(payment.responseStatus, RERUN_MARK)));
  }

  /** A settled payment whose answer was never stored (crash between settlement and record): keep the answer produced again. */
  async answered(key: PaymentKey, answer: StoredAnswer): Promise<void> {
    await (await this.store)
      .update(payment)
      .set({ responseStatus: answer.status, responseType: answer.type, responseBody: answer.body, updatedAt: new Date() })
      .where(and(byKey(key), eq(payment.status, "settled"), isNull(payment.responseBody)));
  }

  /** Records an answer given without settlement (a free read); the authorization stays unspent on chain. */
  async waived(key: PaymentKey, answer: StoredAnswer): Promise<void> {
    await (await this.store)
      .update(payment)
      .set({ status: "waived", responseStatus: answer.status, responseType: answer.type, responseBody: answer.body, updatedAt: new Date() })
      .where(byKey(key));
  }

  /** Nothing was charged (decided before broadcast, or from a reverted or dropped transaction). */
  async failed(key: PaymentKey, failure: string, transaction?: string): Promise<void> {
    await (await this.store)
      .update(payment)
      .set({ status: "failed", failure, transaction: transaction ?? null, updatedAt: new Date() })
      .where(and(byKey(key), inArray(payment.status, ["pending", "settling"])));
  }

  /** Keeps a row `settling` but marks it as looked at (so stale reports and polling see progress). */
  async touch(key: PaymentKey): Promise<void> {
    await (await this.store).update(payment).set({ updatedAt: new Date() }).where(and(byKey(key), eq(payment.status, "settling")));
  }

  /** An outcome read from the chain for a row whose outcome was unknown. Returns false if the row moved on meanwhile. */
  async resolve(key: PaymentKey, resolution: Resolution): Promise<boolean> {
    const now = new Date();
    const set =
      resolution.status === "settled"
        ? { status: "settled" as const, transaction: resolution.transaction, failure: resolution.note ?? null, settledAt: now }
        : { status: resolution.status, failure: resolution.failure, ...(resolution.transaction ? { transaction: resolution.transaction } : {}) };
    const updated = await (await this.store)
      .update(payment)
      .set({ ...set, reconciledAt: now, updatedAt: now })
      .where(and(byKey(key), inArray(payment.status, ["pending", "settling", "failed"])))
      .returning({ nonce: payment.nonce });
    return updated.length > 0;
  }

  /**
   * Rows whose outcome is not known: every `settling` row not touched for `settlingIdleMs`, and
   * `pending` rows abandoned by their request (claimed, never concluded).
   */
  async unresolved(settlingIdleMs: number, limit = 200): Promise<PaymentRow[]> {
    const now = Date.now();
    return (await this.store)
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
  }

  /** Payments by outcome, for stats and health. `pending` includes nothing of `settling`: add them for "outcome unknown". */
  async outcomeCounts(): Promise<OutcomeCounts> {
    const db = await this.store;
    const rows = await db.select({ status: payment.status, n: count() }).from(payment).groupBy(payment.status);
    const [reconciled] = await db.select({ n: count() }).from(payment).where(isNotNull(payment.reconciledAt));
    const counts = Object.fromEntries(["pending", "settling", "settled", "failed", "waived", "expired", "used_elsewhere"].map((s) => [s, 0])) as OutcomeCounts;
    for (const row of rows) counts[row.status] = Number(row.n);
    counts.reconciled = Number(reconciled?.n ?? 0);
    return counts;
  }

  /** What GET /api/stats reports as served: settled and waived rows by route and token, and the distinct payers of settled ones. */
  async servedTotals(): Promise<ServedTotals> {
    const db = await this.store;
    const rows = await db
      .select({ route: payment.route, token: payment.token, status: payment.status, n: count(), amount: sql<string>`coalesce(sum(${payment.amount}), 0)::text` })
      .from(payment)
      .where(inArray(payment.status, ["settled", "waived"]))
      .groupBy(payment.route, payment.token, payment.status);
    const [payers] = await db.select({ n: sql<string>`count(distinct ${payment.payer})` }).from(payment).where(eq(payment.status, "settled"));
    return {
      rows: rows.map((r) => ({ route: r.route, token: r.token.toLowerCase(), status: r.status as "settled" | "waived", calls: Number(r.n), amount: BigInt(r.amount) })),
      payers: Number(payers?.n ?? 0),
    };
  }

  /** Rows whose outcome has been unknown (pending or settling) for longer than `olderThanMs` (health: STALE_PENDING_MS). */
  async stalePending(olderThanMs = STALE_PENDING_MS): Promise<{ count: number; oldest: Date | null }> {
    const [row] = await (await this.store)
      .select({ n: count(), oldest: sql<string | null>`min(${payment.createdAt})` })
      .from(payment)
      .where(and(inArray(payment.status, ["pending", "settling"]), lt(payment.createdAt, new Date(Date.now() - olderThanMs))));
    return { count: Number(row?.n ?? 0), oldest: row?.oldest ? new Date(row.oldest) : null };
  }

  /** Whether `payer` settled a payment for any of `routes` about `subject` since `since`. */
  async paidFor(payer: Address, subject: string, routes: string[], since: Date): Promise<boolean> {
    const [row] = await (await this.store)
      .select({ nonce: payment.nonce })
      .from(payment)
      .where(and(eq(payment.payer, payer), eq(payment.subject, subject), eq(payment.status, "settled"), inArray(payment.route, routes), gt(payment.settledAt, since)))
      .limit(1);
    return row !== undefined;
  }
}
