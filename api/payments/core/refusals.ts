import { exactUsd, unitsToUsd } from "../../money.ts";
import { PaymentError } from "../errors.ts";
import type { PricedRoute } from "./types.ts";

// Every refusal the payment core makes, in one place: its code (errors.ts gives the status) and the
// sentence a client reads. Verification's own refusals (verify.ts, local-verify.ts) are the
// facilitator's verdicts, worded there.

/** No payment header: the 402 that asks for one. */
export const paymentRequired = (route: PricedRoute) =>
  new PaymentError(
    "payment_required",
    `${route.name} costs ${unitsToUsd(route.microUsd)} USD per call: pay with an x402 payment (EIP-3009 authorization in USDT or USDC on Celo).`,
  );

/** The admission failed on something else than the payment (the service store down, most likely): nothing can have been charged. */
export const ledgerDown = () =>
  new PaymentError(
    "settlement_unavailable",
    "The payment could not be taken right now (the service's ledger did not answer); nothing was charged. Retry with the same payment.",
  );

/**
 * A credit call whose price went back while it ran (its replica stalled past ABANDONED_AFTER_MS and
 * the sweep closed its lease or released its hold): it is not answered, and nothing was taken.
 */
export const creditGivenBack = () =>
  new PaymentError(
    "settlement_unavailable",
    "This call's credit could not be recorded (what it was paid from was given back to your credit while it ran, as for a call that stalled); nothing was taken. Send the call again.",
  );

/** A payment-identifier retry whose request is not the one the identifier first named. */
export const paymentIdReused = (paymentId: string) =>
  new PaymentError(
    "payment_id_reused",
    `Payment identifier ${paymentId} already named another request; use a new identifier for a new request.`,
  );

/** The payer is listed on the sanctions oracle: nothing is served, settled or charged. */
export const sanctionedPayer = (payer: string) =>
  new PaymentError(
    "sanctioned_payer",
    `The paying wallet ${payer} is listed on the sanctions oracle (Chainalysis SanctionsList): this service takes no payment from it. Nothing was charged.`,
  );

/** The authorization was presented before with another request (or another signature). */
export const paymentReused = () =>
  new PaymentError(
    "payment_reused",
    "This payment authorization was already presented with another request; sign a new one for this request.",
  );

/** The stored payment expired unused (a deferred one the worker could not send in time). */
export const expiredUnused = () =>
  new PaymentError(
    "authorization_expired",
    "This authorization expired without being used: it was never charged. Sign a new one.",
  );

/** The stored payment's nonce was spent on chain by a transaction that did not pay us. */
export const usedElsewhere = (failure: string | null) =>
  new PaymentError(
    "nonce_already_used",
    `This authorization was used or cancelled on chain by a transaction that did not pay for this request (${failure}); it was not charged here. Sign a new one.`,
  );

/** The same payment failed to settle in every round of this request. */
export const roundsExhausted = (failure: string | null | undefined) =>
  new PaymentError("settlement_failed", `The payment could not be settled: ${failure ?? "unknown failure"}.`);

/** The outcome of this payment's settlement is not known yet: the client's way back is a retry with the same payment. */
export const settlementPending = () =>
  new PaymentError(
    "settlement_pending",
    "This payment's settlement is under way and its outcome is not known yet. Retry with the same payment (same request) to get the answer it paid for; it will not be charged twice.",
  );

/** The payer owes failed deferred settlements: this call costs its price plus the debt, settled before it answers. */
export const unsettledPayment = (route: PricedRoute, owedUnits: bigint) =>
  new PaymentError(
    "unsettled_payment",
    `An earlier answer to this payer was not paid: its deferred settlement failed (the authorization was cancelled or the balance moved). Pay the ${unitsToUsd(owedUnits)} USD owed with this call: authorize ${unitsToUsd(route.microUsd + owedUnits)} USD.`,
    { owedUnits: owedUnits.toString() },
    route.microUsd + owedUnits,
  );

export const shuttingDown = () =>
  new PaymentError(
    "settlement_unavailable",
    "The service is shutting down; nothing was charged. Retry with the same payment.",
  );

/** The settlement could not be sent (the chain did not answer, or the ledger could not record it first). */
export const chainUnavailable = () =>
  new PaymentError(
    "settlement_unavailable",
    "The payment could not be settled right now (the chain did not answer); nothing was charged and no data is returned. Retry with the same payment.",
  );

export const settlementFailed = (reason: string, transaction?: string) =>
  new PaymentError(
    "settlement_failed",
    `The payment was verified but its settlement failed (${reason}); nothing was charged and no data is returned.`,
    {
      reason,
      transaction: transaction ?? null,
    },
  );

/** The credit left is below this call's price: a 402 with the payment requirements, so a client can pay per call. */
export const creditInsufficient = (route: PricedRoute, balance: bigint) =>
  new PaymentError(
    "credit_insufficient",
    `${route.name} costs ${unitsToUsd(route.microUsd)} USD; the credit left is ${unitsToUsd(balance)} USD. Nothing was charged: pay for this call with x402, or buy credit (POST /api/credit).`,
    { balance: exactUsd(balance), price: exactUsd(route.microUsd) },
  );

/** A credit token that names no live account: never issued, or revoked by its owner. */
export const creditTokenInvalid = () =>
  new PaymentError(
    "credit_token_invalid",
    "This credit token is unknown or was revoked; nothing was charged. Use the token of your latest issue (POST /api/credit/token, signed in), or pay with x402.",
  );
