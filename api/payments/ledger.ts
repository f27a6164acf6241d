import { and, eq, gt, inArray, lt, or } from "drizzle-orm";
import type { Address } from "../../config/addresses.ts";
import { payment, type PaymentRow } from "../store/schema.ts";
import type { ServiceDb } from "../store/store.ts";

export type PaymentKey = { token: Address; payer: Address; nonce: string };

export type NewPayment = PaymentKey & {
  amount: bigint;
  route: string;
  subject: string | null;
  fingerprint: string;
  signatureHash: string;
  encoding: string;
};

export type StoredAnswer = { status: number; type: string; body: string };

/**
 * A claim older than this with no outcome belongs to a request that died (a crashed replica): it may
 * be claimed again. Verification runs first, so a payment that did settle is refused, not taken twice.
 */
export const ABANDONED_AFTER_MS = 120_000;

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
      .values({ ...entry, amount: entry.amount.toString(), status: "pending" })
      .onConflictDoNothing()
      .returning({ nonce: payment.nonce });
    if (inserted.length) return true;
    const reclaimed = await (await this.store)
      .update(payment)
      .set({ status: "pending", failure: null, updatedAt: new Date() })
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

  async settled(key: PaymentKey, transaction: string, answer: StoredAnswer): Promise<void> {
    const now = new Date();
    await (await this.store)
      .update(payment)
      .set({ status: "settled", transaction, responseStatus: answer.status, responseType: answer.type, responseBody: answer.body, settledAt: now, updatedAt: now })
      .where(byKey(key));
  }

  /** Records an answer given without settlement (a free read); the authorization stays unspent on chain. */
  async waived(key: PaymentKey, answer: StoredAnswer): Promise<void> {
    await (await this.store)
      .update(payment)
      .set({ status: "waived", responseStatus: answer.status, responseType: answer.type, responseBody: answer.body, updatedAt: new Date() })
      .where(byKey(key));
  }

  async failed(key: PaymentKey, failure: string, transaction?: string): Promise<void> {
    await (await this.store)
      .update(payment)
      .set({ status: "failed", failure, transaction: transaction ?? null, updatedAt: new Date() })
      .where(byKey(key));
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
