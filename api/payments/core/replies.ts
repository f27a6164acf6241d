import { encodePaymentResponseHeader } from "@x402/core/http";
import type { Address } from "../../../config/addresses.ts";
import type { PaymentSettings } from "../../../config/payments.ts";
import { errorBody } from "../../../shared/errors.ts";
import type { PaymentRow } from "../../store/schema.ts";
import type { PaymentError } from "../errors.ts";
import { paymentRequiredAnswer } from "../requirements.ts";
import type { PricedRoute, Reply } from "./types.ts";

/** Retry-After (seconds) of settlement_pending and settlement_unavailable. */
const RETRY_AFTER_SECONDS = 5;

const jsonReply = (status: number, body: unknown, headers: Record<string, string> = {}): Reply => ({
  status,
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(body),
});

/** The refusal for `error`: a 402 with the payment requirements, or the error body with its status. */
export function refusalReply(settings: PaymentSettings, route: PricedRoute, url: string, error: PaymentError): Reply {
  // 503s also name their code at the top level, where 402 answers have it: a client reads both alike.
  if (error.status === 503)
    return jsonReply(
      503,
      { ...errorBody(error.code, error.message, error.details), code: error.code },
      { "Retry-After": String(RETRY_AFTER_SECONDS) },
    );
  if (error.status !== 402) return jsonReply(error.status, errorBody(error.code, error.message, error.details));
  const answer = paymentRequiredAnswer(
    settings,
    error.price === undefined ? route : { ...route, microUsd: error.price },
    url,
    error,
  );
  return jsonReply(402, answer.body, answer.headers);
}

/**
 * PAYMENT-RESPONSE (v2) and X-PAYMENT-RESPONSE (v1): the settlement receipt. A deferred payment's
 * (transaction null) has no transaction yet: `extra.settlement` is "pending", and the payment is
 * settled by the worker before its validBefore.
 */
export function receiptHeaders(
  transaction: string | null,
  network: PaymentSettings["network"],
  payer: string,
): Record<string, string> {
  const settlement = transaction === null ? { transaction: "", extra: { settlement: "pending" } } : { transaction };
  const encoded = encodePaymentResponseHeader({ success: true, ...settlement, network, payer });
  return {
    "PAYMENT-RESPONSE": encoded,
    "X-PAYMENT-RESPONSE": encoded,
    "Access-Control-Expose-Headers": "PAYMENT-RESPONSE, X-PAYMENT-RESPONSE",
  };
}

/**
 * Payment-Notice of a deferred call settled before its answer because the unsettled amount had
 * reached a cap (X402_DEFERRED_MAX_PER_PAYER, or X402_DEFERRED_MAX_TOTAL): why it took a block, and
 * the way to pay that settles nothing per call.
 */
export const capNotice = (): Record<string, string> => ({
  "Payment-Notice":
    "unsettled_cap: this payer's unsettled deferred calls (or the service's) reached their cap, so this call was settled before its answer. Prepaid credit (POST /api/credit) pays calls with no settlement each.",
  "Access-Control-Expose-Headers": "PAYMENT-RESPONSE, X-PAYMENT-RESPONSE, Payment-Notice",
});

/** The answer a settled (or waived, or queued) payment bought, again: same body, same status, one charge. */
export function replayReply(row: PaymentRow, network: PaymentSettings["network"]): Reply {
  const headers: Record<string, string> = {
    "content-type": row.responseType ?? "application/json",
    "x-payment-replayed": "true",
  };
  if (row.transaction || row.status === "queued")
    Object.assign(
      headers,
      receiptHeaders(row.status === "queued" ? null : row.transaction, network, row.payer as Address),
    );
  return { status: row.responseStatus ?? 200, headers, body: row.responseBody ?? "" };
}
