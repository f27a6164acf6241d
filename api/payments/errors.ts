import type { ContentfulStatusCode } from "hono/utils/http-status";

/**
 * Every way a payment can be refused, with its HTTP status. 402 answers carry the payment
 * requirements again so a client can sign a fresh authorization; the others are client bugs.
 */
export const PAYMENT_ERRORS = {
  payment_required: 402,
  payment_malformed: 400,
  payment_header_too_large: 431,
  unsupported_scheme: 402,
  unsupported_network: 402,
  unsupported_token: 402,
  wrong_recipient: 402,
  insufficient_amount: 402,
  amount_too_large: 402,
  authorization_expired: 402,
  authorization_not_yet_valid: 402,
  authorization_window_too_long: 402,
  invalid_signature: 402,
  nonce_already_used: 402,
  insufficient_balance: 402,
  verification_failed: 402,
  caller_mismatch: 400,
  sanctioned_payer: 403,
  payment_reused: 409,
  payment_id_reused: 409,
  settlement_failed: 402,
  unsettled_payment: 402,
  settlement_unavailable: 503,
  settlement_pending: 503,
  /** Prepaid credit: the balance is below this call's price (the 402 lets a client pay per call instead). */
  credit_insufficient: 402,
  /** Prepaid credit: the bearer token is unknown or revoked. */
  credit_token_invalid: 401,
} as const satisfies Record<string, ContentfulStatusCode>;

export type PaymentErrorCode = keyof typeof PAYMENT_ERRORS;

export class PaymentError extends Error {
  constructor(
    readonly code: PaymentErrorCode,
    message: string,
    readonly details?: unknown,
    /** What the call costs this payer (micro-USD) when it differs from the route's price: the 402 asks for it. */
    readonly price?: bigint,
  ) {
    super(message);
  }
  get status(): ContentfulStatusCode {
    return PAYMENT_ERRORS[this.code];
  }
}
