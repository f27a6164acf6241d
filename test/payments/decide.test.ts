import { describe, expect, it } from "vitest";
import { decide, type Identity, MAX_ROUNDS } from "../../api/payments/core/decide.ts";
import { PaymentError } from "../../api/payments/errors.ts";
import { ABANDONED_AFTER_MS } from "../../api/payments/lifecycle.ts";
import { PAYMENT_STATUSES, type PaymentRow, type PaymentStatus } from "../../api/store/schema.ts";

// The admission's decision from the row of the payment an attempt is for: a pure table, every status.

const attempt = { fingerprint: "f", signatureHash: "s" };
const row = (status: PaymentStatus, more: Partial<PaymentRow> = {}) =>
  ({
    status,
    fingerprint: "f",
    signatureHash: "s",
    responseBody: "{}",
    failure: "why",
    updatedAt: new Date(),
    ...more,
  }) as PaymentRow;
const next = (r: PaymentRow | undefined, round = 0, who: Identity = attempt) => {
  const d = decide(r, who, round);
  return d.next === "refuse" ? `refuse ${d.error.code}` : d.next;
};
/** The same attempt, its authorization past validBefore. */
const lapsed = {
  ...attempt,
  lapsed: new PaymentError("authorization_expired", "The authorization expired (validBefore 1, now 2)."),
};
const abandoned = () => ({ updatedAt: new Date(Date.now() - ABANDONED_AFTER_MS - 1) });

describe("decide", () => {
  it("maps every status to what the attempt does", () => {
    const table = Object.fromEntries(PAYMENT_STATUSES.map((status) => [status, next(row(status))]));
    expect(table).toEqual({
      pending: "wait_for_claim",
      queued: "replay",
      settling: "wait_for_settlement",
      settled: "replay",
      failed: "pay",
      waived: "replay",
      expired: "refuse authorization_expired",
      used_elsewhere: "refuse nonce_already_used",
    });
  });

  it("pays with no row, and for a claim abandoned by a dead request", () => {
    expect(next(undefined)).toBe("pay");
    expect(next(row("pending", abandoned()))).toBe("pay");
  });

  it("reruns a settled payment whose answer was never stored", () => {
    expect(next(row("settled", { responseBody: null }))).toBe("rerun");
  });

  it("refuses a row of another request or signature, whatever its status", () => {
    for (const status of PAYMENT_STATUSES) {
      expect(next(row(status, { fingerprint: "other" }))).toBe("refuse payment_reused");
      expect(next(row(status, { signatureHash: "other" }))).toBe("refuse payment_reused");
    }
  });

  it("judges a lapsed authorization by its own row: what was charged or answered is collected, what may have been charged after all is asked of the chain, the rest refused with the clock's refusal", () => {
    const table = Object.fromEntries(PAYMENT_STATUSES.map((status) => [status, next(row(status), 0, lapsed)]));
    expect(table).toEqual({
      pending: "wait_for_claim",
      queued: "replay",
      settling: "wait_for_settlement",
      settled: "replay",
      failed: "ask_chain",
      waived: "replay",
      expired: "refuse authorization_expired",
      used_elsewhere: "refuse authorization_expired",
    });
    expect(next(row("settled", { responseBody: null }), 0, lapsed)).toBe("rerun");
    expect(next(row("settled", { responseBody: null }), MAX_ROUNDS, lapsed)).toBe("rerun");
    // A claim whose request died: the chain says whether anyone sent it; never paid again.
    expect(next(row("pending", abandoned()), 0, lapsed)).toBe("ask_chain");
    expect(next(row("failed"), MAX_ROUNDS, lapsed)).toBe("ask_chain");
    // Never claimed: nothing to collect, nothing to pay.
    expect(next(undefined, 0, lapsed)).toBe("refuse authorization_expired");
    expect(next(undefined, MAX_ROUNDS, lapsed)).toBe("refuse authorization_expired");
    // Another request's row, or another signature's: the clock's refusal, as before the row is read.
    for (const status of PAYMENT_STATUSES) {
      expect(next(row(status, { fingerprint: "other" }), 0, lapsed)).toBe("refuse authorization_expired");
      expect(next(row(status, { signatureHash: "other" }), 0, lapsed)).toBe("refuse authorization_expired");
    }
    const refused = decide(row("expired"), lapsed, 0);
    expect(refused.next === "refuse" && refused.error).toBe(lapsed.lapsed);
  });

  it("stops paying after MAX_ROUNDS rounds with the last failure, and only where it would pay", () => {
    expect(next(row("failed"), MAX_ROUNDS - 1)).toBe("pay");
    const exhausted = decide(row("failed", { failure: "reverted" }), attempt, MAX_ROUNDS);
    expect(exhausted.next === "refuse" && [exhausted.error.code, exhausted.error.message]).toEqual([
      "settlement_failed",
      "The payment could not be settled: reverted.",
    ]);
    expect(next(undefined, MAX_ROUNDS)).toBe("refuse settlement_failed");
    expect(next(row("settled"), MAX_ROUNDS)).toBe("replay");
    expect(next(row("pending"), MAX_ROUNDS)).toBe("wait_for_claim");
  });
});
