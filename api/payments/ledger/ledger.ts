import type { Address } from "../../../config/addresses.ts";
import type { CreditLotRow, CreditSpendRow, PaymentRow, PaymentStatus } from "../../store/schema.ts";

export { ABANDONED_AFTER_MS, isAbandoned, isRerunning, RERUN_MARK } from "../lifecycle.ts";

export type PaymentKey = { token: Address; payer: Address; nonce: string };
/** The transaction a decision read on its row (null: none): a write guarded by it is skipped once another was recorded. */
export type TransactionRead = { transaction: string | null };

export type NewPayment = PaymentKey & {
  amount: bigint;
  route: string;
  subject: string | null;
  fingerprint: string;
  signatureHash: string;
  encoding: string;
  /** The authorization's validBefore (unix seconds). */
  validBefore: bigint;
  /** The x402 payment-identifier the client sent, if any. */
  paymentId?: string | null;
};

/** What a deferred claim keeps so that the worker can submit the authorization later. */
export type DeferredAuthorization = { signature: string; validAfter: bigint };

/** Deferred-settlement caps, in the tokens' smallest units (micro-USD). */
export type ExposureCaps = { perPayer: bigint; total: bigint };

/** A payer's open amounts: `unsettled` in one token (spoken for in its balance), `owed` its debts, smallest units. */
export type OpenAmounts = { unsettled: bigint; owed: bigint };

export type StoredAnswer = { status: number; type: string; body: string };

/** A settlement about to be broadcast: recorded first, so that its outcome can always be found on chain. */
export type SettlementRecord = {
  transaction?: string;
  settler?: string;
  settlerNonce?: number;
  rawTransaction?: string;
};

/** How a payment whose outcome was unknown ended, read from the chain. */
export type Resolution =
  | { status: "settled"; transaction: string; note?: string }
  | {
      status: "failed" | "expired" | "used_elsewhere";
      failure: string;
      transaction?: string;
      /** Failed by our transaction as a whole (a batch reverted, a transaction dropped): the payer's transfer was never tried. */
      ours?: true;
    };

/** Payments by outcome (stats and health): `reconciled` counts outcomes decided from the chain, whatever they are. */
export type OutcomeCounts = Record<PaymentStatus, number> & {
  reconciled: number;
  /** Deferred payments answered but never settled in time (the service's loss). */
  deferredExpired: number;
  /** Debts: deferred answers whose settlement failed by the payer's doing, not paid again (smallest units). */
  owedUnits: string;
};

/** Paid calls answered (settled, or waived as a free read), by route and token, with the revenue settled. */
export type ServedTotals = {
  rows: { route: string; token: string; status: "settled" | "waived"; calls: number; amount: bigint }[];
  payers: number;
};

/** A row pending longer than STALE_PENDING_MS is reported by health: its settlement needs attention. */
export const STALE_PENDING_MS = 5 * 60_000;

/** One string per payment (maps and sets of payments). */
export const keyId = (key: PaymentKey) => `${key.token}:${key.payer}:${key.nonce}`;

/**
 * Claims and answers. A payment is claimed by creating its row: one claim per (token, payer,
 * nonce), on any replica, goes on to settle it. Writes the lifecycle does not allow are no-ops.
 */
export interface ClaimLedger {
  find(key: PaymentKey): Promise<PaymentRow | undefined>;
  /** The payment the payer sent under this x402 payment-identifier, if any. */
  findByPaymentId(payer: Address, paymentId: string): Promise<PaymentRow | undefined>;
  /** find(key) and openFor(key.payer, key.token) in one round trip: the first read of a paid call. */
  lookup(key: PaymentKey): Promise<{ row: PaymentRow | undefined; open: OpenAmounts }>;
  /** What is open for `payer`: claimed in `token` and not settled, and its debts. */
  openFor(payer: Address, token: Address): Promise<OpenAmounts>;
  /** Claims the payment for this request: true when it now owns it (a new row, or one failed or abandoned, same request and signature). */
  claim(entry: NewPayment): Promise<boolean>;
  /** claim, to be answered before it is settled: the row keeps the authorization for the worker. */
  claimDeferred(entry: NewPayment, authorization: DeferredAuthorization): Promise<boolean>;
  /** A deferred claim of a payment never seen, with what its payer had open before it; undefined when a row exists. */
  claimFirst(entry: NewPayment, authorization: DeferredAuthorization): Promise<OpenAmounts | undefined>;
  /** A claimFirst refused after all: its row goes, as if never claimed. */
  unclaim(key: PaymentKey, signatureHash: string): Promise<void>;
  /** Records what the claimed call made that must be undone if its payment fails, before making it. */
  reference(key: PaymentKey, reference: string): Promise<void>;
  /** An answer given without settlement (a free read): the authorization stays unspent. */
  waived(key: PaymentKey, answer: StoredAnswer): Promise<void>;
  /**
   * Nothing was charged (decided before broadcast, or from a reverted or dropped transaction).
   * With `read`, only while the row's transaction is still the one read (as requeue).
   */
  failed(key: PaymentKey, failure: string, transaction?: string, read?: TransactionRead): Promise<void>;
  /** The settlement is about to be broadcast, with the answer it buys (null: keep the stored one). False when the row is no longer this request's. */
  settling(key: PaymentKey, answer: StoredAnswer | null, record?: SettlementRecord): Promise<boolean>;
  /** The money moved in `transaction`. */
  settled(key: PaymentKey, transaction: string): Promise<void>;
  /** Keeps a row `settling` but marks it as looked at. */
  touch(key: PaymentKey): Promise<void>;
  /**
   * The payer's debts are paid by the settled payment `by`, oldest first, as many as `upTo` (token
   * units, what it was admitted to cover) pays in full: a debt that arose after its admission stays owed.
   */
  repay(payer: Address, by: PaymentKey, upTo: bigint): Promise<void>;
  /** A settled payment whose answer was never stored: the lease to produce it again. False if another request holds it. */
  claimRerun(key: PaymentKey): Promise<boolean>;
  /** The answer could not be produced again: the lease goes back. */
  releaseRerun(key: PaymentKey): Promise<void>;
  /** The answer of a settled payment, produced again, is stored. */
  answered(key: PaymentKey, answer: StoredAnswer): Promise<void>;
  /** Whether `payer` paid for any of `routes` about `subject` since `since` (settled, or deferred on its way). */
  paidFor(payer: Address, subject: string, routes: string[], since: Date): Promise<boolean>;
}

/** The deferred-settlement queue. */
export interface SettlementQueue {
  /** A deferred payment answered: queued with its answer if the caps hold (this row included); false: settle it first. */
  queuedWithinCaps(key: PaymentKey, answer: StoredAnswer, caps: ExposureCaps): Promise<boolean>;
  /** Up to `limit` queued rows in one of `tokens`, soonest validBefore first, now `settling`; never one row to two callers. */
  takeQueued(limit: number, tokens: readonly Address[]): Promise<PaymentRow[]>;
  /** Queued rows whose authorization runs out within `marginSeconds` are expired; how many. */
  expireQueued(nowSeconds: number, marginSeconds: number): Promise<number>;
  /**
   * A deferred row whose settlement did not go through for a reason of ours: back in the queue.
   * With `read`, only while its transaction is still the one read (null: none): a decision made from
   * a row read before the chain was asked must not forget a transaction recorded and sent meanwhile.
   */
  requeue(key: PaymentKey, attempted: boolean, read?: TransactionRead): Promise<void>;
}

/** Outcomes read from the chain. */
export interface Reconciliation {
  /** Records an outcome for a row whose outcome was unknown; false if the row moved on meanwhile. */
  resolve(key: PaymentKey, resolution: Resolution): Promise<boolean>;
  /** `settling` rows idle for `settlingIdleMs`, and abandoned `pending` ones, oldest first. */
  unresolved(settlingIdleMs: number, limit?: number): Promise<PaymentRow[]>;
  /** The signed transaction `settling` recorded under this hash (self-settlement), to send again if it was dropped. */
  signedTransaction(transaction: string): Promise<string | undefined>;
}

/** Sign-in-with-x nonces: one use per proof across replicas. */
export interface SignInNonces {
  /** True the first time, on any replica; false when already used. */
  spendSignInNonce(nonce: string, wallet: Address, expiresAt: Date): Promise<boolean>;
}

/** Counters for stats and health. */
export interface LedgerStats {
  /** A round trip to the store. */
  ping(): Promise<void>;
  outcomeCounts(): Promise<OutcomeCounts>;
  servedTotals(): Promise<ServedTotals>;
  /** Rows pending or settling for longer than `olderThanMs`. */
  stalePending(olderThanMs?: number): Promise<{ count: number; oldest: Date | null }>;
}

/** A call to be paid from credit: what it costs (micro-USD) and what identifies it for a retry. */
export type NewSpend = {
  id: string;
  /** Whose credit: the owner, or the sha256 of one of its live credit tokens (resolved in the same statement). */
  payer: { owner: Address } | { tokenHash: string };
  route: string;
  subject: string | null;
  fingerprint: string;
  paymentId: string | null;
  amount: bigint;
};

/**
 * A hold's outcome: `held` (the price is taken; `balance` is the owner's balance left, open leases
 * included), `existing` (a spend with the same Payment-Identifier is there: nothing taken), `short`
 * (nothing taken: the lots' balance, too low, and what open leases still hold, now asked back), or
 * `unknownToken` (no live token has that hash: nothing taken).
 */
export type CreditHold =
  | { held: CreditSpendRow; balance: bigint; token: Address }
  | { existing: CreditSpendRow }
  | { short: CreditShort }
  | { unknownToken: true };

/** The lots' balance when it is too low, and what the owner's open leases still hold (asked back). */
export type CreditShort = { balance: bigint; leased: bigint };

/** A lease to open: up to `want` of the owner's credit, and at least `least` (else nothing is taken). */
export type NewLease = { id: string; owner: Address; want: bigint; least: bigint };

/**
 * A lease's opening: `leased` (`amount` taken; `balance` is the owner's whole balance, this lease
 * included), or `short` (nothing taken): the lots' `balance`, and what other open leases still hold
 * (`leased`, now asked back).
 */
export type LeaseOpening =
  | { leased: { id: string; amount: bigint; balance: bigint; token: Address } }
  | { short: CreditShort };

/** A call paid from a lease, answered: recorded `spent` if its lease is open and its token (if any) still live. */
export type LeaseSpend = {
  id: string;
  lease: string;
  owner: Address;
  /** The sha256 of the credit token it was paid by; null for a signed-in wallet. */
  tokenHash: string | null;
  route: string;
  subject: string | null;
  fingerprint: string;
  amount: bigint;
  answer: StoredAnswer;
};

/** A held spend's answer: written, refused (its token was revoked), or too late (its hold was released). */
export type HeldSpendOutcome = "spent" | "revoked" | "released";

/** A spend's recording: done, refused (its token was revoked), or too late (its lease was closed). */
export type LeaseSpendOutcome = "recorded" | "revoked" | "closed";

/** A purchase of credit, with its payment's status (spendable only once `settled`). */
export type CreditLot = CreditLotRow & { status: PaymentStatus | null; transaction: string | null };

/** A hold whose request died, and what its call made that must not stand unpaid. */
export type AbandonedSpend = { id: string; route: string; reference: string };

/** What an owner spent, by route and UTC day (micro-USD). */
export type CreditSpending = { day: string; route: string; calls: number; amount: bigint };

/**
 * Prepaid credit (api/payments/credit-lifecycle.ts): lots bought with settled payments, and calls
 * paid from them. A hold takes the price from the owner's lots (soonest to expire first) in the
 * same write that claims the call, so two replicas never spend the same unit twice.
 */
export interface CreditLedger {
  /** The lot a purchase buys, written before its payment settles (spendable once it has). Idempotent per payment. */
  addLot(purchase: PaymentKey, amount: bigint, expiresAt: Date): Promise<void>;
  /** What `owner` can spend now: its unexpired lots whose payment settled, and what its open leases have not spent. */
  balance(owner: Address): Promise<bigint>;
  hold(spend: NewSpend): Promise<CreditHold>;
  find(owner: Address, paymentId: string): Promise<CreditSpendRow | undefined>;
  /**
   * The held call was answered: the price stays taken (the answer's body kept for a Payment-Identifier's
   * retries). Not written, and the answer must not leave: `revoked` when `tokenHash` (the credit
   * token that pays it) was revoked (the hold stays, to be released), `released` when the hold is no
   * longer there (released as abandoned).
   */
  spent(id: string, answer: StoredAnswer, tokenHash?: string | null): Promise<HeldSpendOutcome>;
  /** The held call failed before its answer left: the price goes back to its lots. */
  release(id: string): Promise<void>;
  /**
   * Names what the held call makes outside the ledger before it exists (a passport's report id): if
   * its request dies, the hold is not released with the others (releaseAbandoned) but listed by
   * abandonedReferenced, for the sweep to undo that first. Not written once the hold is abandoned.
   */
  reference(id: string, reference: string): Promise<void>;
  /** Holds older than ABANDONED_AFTER_MS (their request died) and naming nothing to undo are released; how many. */
  releaseAbandoned(): Promise<number>;
  /** Holds older than ABANDONED_AFTER_MS that name something to undo, oldest first: released (release) once it is undone. */
  abandonedReferenced(): Promise<AbandonedSpend[]>;
  /** Takes a slice of the owner's balance in one write (soonest to expire first), or asks other open leases back. */
  openLease(lease: NewLease): Promise<LeaseOpening>;
  /** Records an answered call (the calls of a moment in one write): its outcome, and whether another replica wants its lease back. */
  recordSpend(spend: LeaseSpend): Promise<{ outcome: LeaseSpendOutcome; wanted: boolean }>;
  /** Whether the call `id` was recorded `spent` (a recording whose acknowledgement was lost may have been). */
  spendRecorded(id: string): Promise<boolean>;
  /**
   * The call `id` of `lease` was refused after its recording could not be confirmed: if the
   * recording landed all the same, it is undone and the price goes back to the lease (still open).
   * Waits for a recording of the lease under way. True when one was undone.
   */
  voidSpend(id: string, lease: string): Promise<boolean>;
  /** Closes the lease: what it did not spend goes back to its lots (latest to expire first). What went back. */
  closeLease(id: string): Promise<bigint>;
  /** Leases not renewed for ABANDONED_AFTER_MS (their replica died) are closed; how many. */
  closeAbandonedLeases(): Promise<number>;
  lots(owner: Address): Promise<CreditLot[]>;
  spending(owner: Address): Promise<CreditSpending[]>;
  /** The latest spends, newest first (each its ledger reference). */
  recent(owner: Address, limit: number): Promise<CreditSpendRow[]>;
  /** Whether `owner` paid from credit for one of `routes` about `subject` since `since` (the free-read rule). */
  paidFor(owner: Address, subject: string, routes: string[], since: Date): Promise<boolean>;
  /** A new live token of `owner`'s credit (its sha256). */
  issueToken(owner: Address, tokenHash: string): Promise<void>;
  /** Every live token of `owner` is revoked; how many. */
  revokeTokens(owner: Address): Promise<number>;
  /** The owner of a live token, by its hash. */
  tokenOwner(tokenHash: string): Promise<Address | undefined>;
}

/** The payment ledger the core takes: SQL (ledger/sql) in service, in memory (ledger/memory.ts) in unit tests. */
export interface Ledger extends ClaimLedger, SettlementQueue, Reconciliation, SignInNonces, LedgerStats {
  readonly credit: CreditLedger;
}
