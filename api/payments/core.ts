import { createHash } from "node:crypto";
import { encodePaymentResponseHeader } from "@x402/core/http";
import type { SettleResponse } from "@x402/core/types";
import type { PublicClient } from "viem";
import type { Address } from "../../config/addresses.ts";
import type { PaymentSettings } from "../../config/payments.ts";
import { errorBody } from "../http/errors.ts";
import { unitsToUsd } from "../money.ts";
import type { Billing } from "./billing.ts";
import { PaymentError } from "./errors.ts";
import type { Facilitator } from "./facilitator.ts";
import { decodePayment, type PaymentHeaders } from "./header.ts";
import { isAbandoned, type PaymentKey, type PaymentLedger, type StoredAnswer } from "./ledger.ts";
import { paymentRequiredAnswer } from "./requirements.ts";
import { checkPayment, type VerifiedPayment, verifyPayment } from "./verify.ts";
import type { PaymentRow } from "../store/schema.ts";

/** A priced operation as the payment core sees it (built from its route declaration and the price table). */
export type PricedRoute = {
  /** "POST /api/lender/screen": how the ledger names the route. */
  name: string;
  description: string;
  /** Price in micro-USD (the smallest unit of both 6-decimal stablecoins). */
  microUsd: bigint;
  /** When set, the call is free to a payer who paid for one of these routes about the same wallet recently. */
  freeRead?: { after: readonly string[]; rule: string };
};

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

/** An answer complete in itself: a refusal, or the answer a payment already bought. */
export type Reply = { status: number; headers: Record<string, string>; body: string };

/** A payment claimed for this request: the handler may run on it. */
export type Claim = { key: PaymentKey; verified: VerifiedPayment; waived: boolean; billing: Billing };

/** How the handler ended: its answer, or a failure (an error status, or a throw). */
export type HandlerOutcome = { answer: StoredAnswer } | { failed: string };

export type PaymentDeps = {
  settings: PaymentSettings;
  facilitator: Facilitator;
  chain: Pick<PublicClient, "readContract" | "getBalance">;
  ledger: PaymentLedger;
  /** How long a paid analysis makes single-signal reads of that wallet free (the result cache lifetime). */
  cacheLifetimeMs: number;
};

/** How long a copy of a request waits for the copy that is settling its payment. */
const IN_FLIGHT_WAIT_MS = 90_000;

/**
 * x402 payment for priced calls, framework-free:
 *   admit:    decode -> check -> verify (facilitator) -> claim in the ledger
 *   conclude: settle -> record the answer -> receipt headers
 * Bad input never gets here (adapters validate first). A handler that fails settles nothing; a
 * failed settlement returns no data. A retry of a settled request with the same payment gets the
 * stored answer; the same payment on another request is refused.
 */
export class PaymentCore {
  readonly settings: PaymentSettings;
  readonly facilitator: Facilitator;
  readonly chain: PaymentDeps["chain"];
  readonly ledger: PaymentLedger;

  constructor(private readonly deps: PaymentDeps) {
    ({ settings: this.settings, facilitator: this.facilitator, chain: this.chain, ledger: this.ledger } = deps);
  }

  /** Before the handler: a claimed payment to run on, or the reply to send instead. */
  async admit(route: PricedRoute, request: PaymentRequest): Promise<{ claim: Claim } | { reply: Reply }> {
    try {
      return await this.claim(route, request);
    } catch (error) {
      if (error instanceof PaymentError) return { reply: this.refusal(route, request.url, error) };
      throw error;
    }
  }

  /** After the handler: settle and record, then the receipt headers to add, or the reply that replaces the answer. */
  async conclude(route: PricedRoute, request: Pick<PaymentRequest, "url">, claim: Claim, outcome: HandlerOutcome): Promise<{ headers: Record<string, string> } | { reply: Reply }> {
    const { ledger, facilitator } = this.deps;
    const { key, verified, waived } = claim;
    if ("failed" in outcome) {
      await ledger.failed(key, `${outcome.failed}; nothing settled`);
      return { headers: {} };
    }
    if (waived) {
      await ledger.waived(key, outcome.answer);
      return { headers: {} };
    }
    let settlement: SettleResponse;
    try {
      settlement = await facilitator.settle(verified.payload, verified.requirements);
    } catch (error) {
      await ledger.failed(key, `settlement error: ${(error as Error).message.split("\n")[0]}`);
      const refused = new PaymentError("settlement_unavailable", "The payment could not be settled right now; nothing was charged and no data is returned. Retry with the same payment.");
      return { reply: this.refusal(route, request.url, refused) };
    }
    if (!settlement.success) {
      await ledger.failed(key, settlement.errorReason ?? "settlement failed", settlement.transaction || undefined);
      const refused = new PaymentError("settlement_failed", `The payment was verified but its settlement failed (${settlement.errorReason ?? "unknown reason"}); no data is returned.`, {
        reason: settlement.errorReason,
        transaction: settlement.transaction || null,
      });
      return { reply: this.refusal(route, request.url, refused) };
    }
    // The money has moved: the payer gets the data even if recording it fails (the row then stays
    // pending and is visible to reconciliation by its transaction on chain).
    await ledger.settled(key, settlement.transaction, outcome.answer).catch((error: Error) => {
      console.error(`[payments] settled in ${settlement.transaction} but the ledger update failed: ${error.message}`);
    });
    return { headers: receiptHeaders(settlement.transaction, this.settings.network, settlement.payer ?? verified.payer) };
  }

  private async claim(route: PricedRoute, request: PaymentRequest): Promise<{ claim: Claim } | { reply: Reply }> {
    const { settings, ledger } = this.deps;
    const attempt = decodePayment(request.headers, settings.maxHeaderBytes);
    if (!attempt) {
      throw new PaymentError("payment_required", `${route.name} costs ${unitsToUsd(route.microUsd)} USD per call: pay with an x402 payment (EIP-3009 authorization in USDT or USDC on Celo).`);
    }
    const token = await checkPayment(attempt, route.microUsd, settings, request.caller, Math.floor(Date.now() / 1000));
    const key = { token: token.address, payer: attempt.authorization.from, nonce: attempt.authorization.nonce };
    const fingerprint = sha256(`${route.name}\n${request.path}\n${JSON.stringify(request.input)}`);
    const signatureHash = sha256(attempt.signature.toLowerCase());

    for (let round = 0; ; round++) {
      const existing = await ledger.find(key);
      if (existing && (existing.fingerprint !== fingerprint || existing.signatureHash !== signatureHash)) {
        throw new PaymentError("payment_reused", "This payment authorization was already presented with another request; sign a new one for this request.");
      }
      if (existing?.status === "pending" && !isAbandoned(existing)) {
        await waitWhilePending(ledger, key);
        continue;
      }
      if (existing?.status === "settled" || existing?.status === "waived") return { reply: this.replay(existing) };
      if (round > 2) throw new PaymentError("settlement_failed", `The payment could not be settled: ${existing?.failure ?? "unknown failure"}.`);

      const verified = await verifyPayment(attempt, token, this.deps);
      const waived = await this.isFreeRead(route, verified.payer, request.subject);
      const entry = { ...key, amount: verified.amount, route: route.name, subject: request.subject ?? null, fingerprint, signatureHash, encoding: attempt.encoding };
      if (await ledger.claim(entry)) {
        const billing = { chargedUnits: waived ? 0n : verified.amount, token: verified.token, payer: verified.payer, waived };
        return { claim: { key, verified, waived, billing } };
      }
    }
  }

  private async isFreeRead(route: PricedRoute, payer: Address, subject: Address | undefined): Promise<boolean> {
    if (!route.freeRead || subject === undefined) return false;
    return this.deps.ledger.paidFor(payer, subject, [...route.freeRead.after], new Date(Date.now() - this.deps.cacheLifetimeMs));
  }

  /** The refusal for `error`: a 402 with the payment requirements, or the error body with its status. */
  refusal(route: PricedRoute, url: string, error: PaymentError): Reply {
    if (error.status !== 402) return jsonReply(error.status, errorBody(error.code, error.message, error.details));
    const answer = paymentRequiredAnswer(this.settings, route, url, error);
    return jsonReply(402, answer.body, answer.headers);
  }

  /** The answer a settled (or waived) payment bought, again: same body, same status, one charge. */
  private replay(row: PaymentRow): Reply {
    const headers: Record<string, string> = { "content-type": row.responseType ?? "application/json", "x-payment-replayed": "true" };
    if (row.transaction) Object.assign(headers, receiptHeaders(row.transaction, this.settings.network, row.payer as Address));
    return { status: row.responseStatus ?? 200, headers, body: row.responseBody ?? "" };
  }
}

/** PAYMENT-RESPONSE (v2) and X-PAYMENT-RESPONSE (v1): the settlement receipt. */
function receiptHeaders(transaction: string, network: PaymentSettings["network"], payer: string): Record<string, string> {
  const encoded = encodePaymentResponseHeader({ success: true, transaction, network, payer });
  return { "PAYMENT-RESPONSE": encoded, "X-PAYMENT-RESPONSE": encoded, "Access-Control-Expose-Headers": "PAYMENT-RESPONSE, X-PAYMENT-RESPONSE" };
}

const jsonReply = (status: number, body: unknown, headers: Record<string, string> = {}): Reply => ({
  status,
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(body),
});

async function waitWhilePending(ledger: PaymentLedger, key: PaymentKey) {
  const deadline = Date.now() + IN_FLIGHT_WAIT_MS;
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    const row = await ledger.find(key);
    if (!row || row.status !== "pending" || isAbandoned(row)) return;
  }
  throw new PaymentError("settlement_unavailable", "Another copy of this request is still settling this payment; retry with the same payment to get its answer.");
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
