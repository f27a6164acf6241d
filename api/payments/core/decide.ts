import type { PaymentRow, PaymentStatus } from "../../store/schema.ts";
import type { PaymentError } from "../errors.ts";
import { isAbandoned } from "../ledger/ledger.ts";
import { expiredUnused, paymentReused, roundsExhausted, usedElsewhere } from "./refusals.ts";

/** What an attempt does about the ledger row of the payment it is (pure: no I/O). */
export type RowDecision =
  /** No row, a claim that failed without charge, or one abandoned by a dead request: verify and claim. */
  | { next: "pay" }
  /** Another request holds the claim (its handler runs): wait for it, then decide again. */
  | { next: "wait_for_claim" }
  /** Its settlement's outcome is unknown: wait for it (or ask the chain), then decide again. */
  | { next: "wait_for_settlement" }
  /** Charged, but the answer was never stored (a crash between settlement and record): run the handler again, settle nothing. */
  | { next: "rerun" }
  /** Answered already (settled, waived, or queued for deferred settlement): the same answer again. */
  | { next: "replay" }
  /**
   * Recorded as never charged (failed, or a claim abandoned), its authorization past validBefore:
   * only the chain can still say it paid us (sent by someone else); then a rerun, else the refusal.
   */
  | { next: "ask_chain" }
  | { next: "refuse"; error: PaymentError };

/**
 * Rows an attempt is this request's payment for: the same request (fingerprint) and the same
 * signature. `lapsed`: its authorization is past validBefore (the refusal to give if the row has nothing).
 */
export type Identity = { fingerprint: string; signatureHash: string; lapsed?: PaymentError };

/** Settlement is tried this many rounds within one request (a failed claim is claimed again) before it is refused. */
export const MAX_ROUNDS = 3;

/** Statuses, by what they make of an attempt of the same request. */
const BY_STATUS: Record<PaymentStatus, (row: PaymentRow) => RowDecision | undefined> = {
  pending: (row) => (isAbandoned(row) ? undefined : { next: "wait_for_claim" }),
  settling: () => ({ next: "wait_for_settlement" }),
  settled: (row) => (row.responseBody === null ? { next: "rerun" } : { next: "replay" }),
  waived: () => ({ next: "replay" }),
  queued: () => ({ next: "replay" }),
  expired: () => ({ next: "refuse", error: expiredUnused() }),
  used_elsewhere: (row) => ({ next: "refuse", error: usedElsewhere(row.failure) }),
  failed: () => undefined,
};

/**
 * The decision for `row` (undefined: no row yet) in round `round` of this attempt. A row of
 * another request or signature is refused; a row whose status leaves the payment open (none,
 * failed, abandoned) is paid, unless this request already went round MAX_ROUNDS times. A lapsed
 * authorization is refused unless its own row was charged or answered (or is being decided, or the
 * chain may say so): the clock never stands between a payer and what it paid for.
 */
export function decide(row: PaymentRow | undefined, attempt: Identity, round: number): RowDecision {
  const own = row && row.fingerprint === attempt.fingerprint && row.signatureHash === attempt.signatureHash;
  const decided = own ? BY_STATUS[row.status](row) : undefined;
  if (attempt.lapsed && own && !decided) return { next: "ask_chain" };
  if (attempt.lapsed && (!decided || decided.next === "refuse")) return { next: "refuse", error: attempt.lapsed };
  if (row && !own) return { next: "refuse", error: paymentReused() };
  if (decided) return decided;
  if (round >= MAX_ROUNDS) return { next: "refuse", error: roundsExhausted(row?.failure) };
  return { next: "pay" };
}
