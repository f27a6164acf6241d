import type { PublicClient } from "viem";
import type { Address } from "../../../config/addresses.ts";
import type { PaymentSettings } from "../../../config/payments.ts";
import type { Billing } from "../billing.ts";
import type { Facilitator } from "../facilitator.ts";
import type { PaymentHeaders } from "../header.ts";
import type { LeaseSpend, Ledger, PaymentKey, StoredAnswer } from "../ledger/ledger.ts";
import type { PayerState } from "../local-verify.ts";
import type { OnOutcome, ReconcileChain } from "../reconcile.ts";
import type { VerifiedPayment } from "../verify.ts";
import type { Lease } from "./credit-leases.ts";

// Defined beside the modules below the core that need them (requirements, free reads), which must not import the core.
export type { PricedRoute, Reply } from "../priced-route.ts";
export type { Ledger };

import type { Reply } from "../priced-route.ts";

/** One paid request, as any HTTP adapter hands it over: already validated. */
export type PaymentRequest = {
  headers: PaymentHeaders;
  /** The full URL, named as the resource in 402 answers. */
  url: string;
  path: string;
  /** The validated request (body, path and query): a retry must be the same request. */
  input: unknown;
  /** The wallet the call is about. */
  subject?: Address;
  /** The request's callerAddress, which must be the payer when given. */
  caller?: Address;
};

/**
 * A payment claimed for this request: the handler may run on it. `paid` says the payment is
 * already settled on chain (its answer was never stored): run the handler, do not settle again.
 */
export type Claim = {
  key: PaymentKey;
  verified: VerifiedPayment | null;
  waived: boolean;
  billing: Billing;
  paid?: { transaction: string };
  /** To be answered now and settled by the worker afterwards (X402_SETTLEMENT=deferred), if its answer finds the caps with room (else settled first). */
  deferred?: boolean;
  /**
   * This payment also covers the payer's debts (failed deferred settlements) owed when it was
   * admitted, this many token units: settled first, those debts (and no later one) are repaid with it.
   */
  repays?: bigint;
  /**
   * Paid from prepaid credit (core/credit.ts): the spend holding the price, and the balance left
   * after it (micro-USD); `leased` when the price was taken from a lease (the spend is recorded once answered).
   * `tokenHash`: the credit token that pays a held call (its spend is refused once the token is revoked).
   */
  credit?: { spend: string; balance: bigint; leased?: LeasedCall; tokenHash?: string | null };
};

/** A call paid from a lease: the lease, and the spend to record once answered. */
export type LeasedCall = { lease: Lease; spend: Omit<LeaseSpend, "answer"> };

/** Before the handler: a claimed payment to run on, or the reply to send instead. */
export type Admission = { claim: Claim } | { reply: Reply };

/** Admission of a credit payer, who may also read free (it paid for this wallet recently): nothing charged, nothing to conclude. */
export type CreditAdmission = Admission | { free: Billing };

/** How the handler ended: its answer, or a failure (an error status, or a throw). */
export type HandlerOutcome = { answer: StoredAnswer } | { failed: string };

/** After the handler: the receipt headers to add to its answer, or the reply that replaces it. */
export type Conclusion = { headers: Record<string, string> } | { reply: Reply };

export type PaymentDeps = {
  settings: PaymentSettings;
  facilitator: Facilitator;
  chain: Pick<PublicClient, "readContract" | "getBalance"> & ReconcileChain;
  ledger: Ledger;
  /** How long a request waits for its settlement's receipt before answering settlement_pending (RECEIPT_WAIT_MS). */
  receiptWaitMs?: number;
  /** How long a retry waits for a settlement whose outcome is unknown before answering settlement_pending (SETTLING_WAIT_MS). */
  settlingWaitMs?: number;
  /** How long a credit call whose owner's lots are short waits for the owner's leases to come back before it is refused (LEASE_WAIT_MS). */
  leaseWaitMs?: number;
  /** What must follow an outcome read from the chain, before it is recorded (reconcile.ts OnOutcome): the report route revokes unpaid passports. */
  onOutcome?: OnOutcome;
  /** Deferred mode: the indexed payer state that verifies without RPC (api/payments/local-verify.ts). Without it, verification uses the RPC. */
  payerState?: PayerState;
  /** Called when a deferred payment joins the settlement queue (the in-process worker starts at once). */
  onQueued?: () => void;
  /** Payers refused before anything is served or settled (403 sanctioned_payer): those listed on the sanctions oracle. */
  sanctions?: { isListed(payer: Address): Promise<boolean> };
};
