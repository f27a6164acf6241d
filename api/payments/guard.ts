import { createHash } from "node:crypto";
import { encodePaymentResponseHeader } from "@x402/core/http";
import type { SettleResponse } from "@x402/core/types";
import type { Context, MiddlewareHandler } from "hono";
import type { Address } from "../../config/addresses.ts";
import type { TokenInfo } from "../../config/celo.ts";
import { errorBody } from "../http/errors.ts";
import { requestWallet, type WalletRequest } from "../http/validate.ts";
import { unitsToUsd } from "../money.ts";
import { PaymentError } from "./errors.ts";
import { decodePayment } from "./header.ts";
import { isAbandoned, type PaymentKey, type PaymentLedger, type StoredAnswer } from "./ledger.ts";
import { type PriceEntry, PRICES, type PricedRoute } from "./prices.ts";
import { paymentRequiredAnswer } from "./requirements.ts";
import { checkPayment, type VerifiedPayment, type VerifyDeps, verifyPayment } from "./verify.ts";
import type { PaymentRow } from "../store/schema.ts";

/** What the handler may say about the payment that let it run. */
export type Billing = { chargedUnits: bigint; token: TokenInfo; payer: Address; waived: boolean };
export type PaidEnv = { Variables: { billing: Billing } };

export type PaymentDeps = VerifyDeps & {
  ledger: PaymentLedger;
  /** How long a paid analysis makes single-signal reads of that wallet free (the result cache lifetime). */
  cacheLifetimeMs: number;
};

/** Paid calls whose payer may then read single signals of the same wallet for free. */
const ANALYSIS_ROUTES = [PRICES.screen, PRICES.analyze, PRICES.analysis, PRICES.signals].map(routeName);
/** How long a copy of a request waits for the copy that is settling its payment. */
const IN_FLIGHT_WAIT_MS = 90_000;

export function routeName(route: { method: string; path: string }) {
  return `${route.method} ${route.path}`;
}

/**
 * x402 payment for one priced route, put after the request is validated (bad input is a 400,
 * never a charge) and before the handler. The validated request names the wallet the payment is
 * about and, when given, the caller who must be the payer:
 * decode -> check -> verify (facilitator) -> claim in the ledger -> handler -> settle -> answer.
 * A handler that fails settles nothing; a failed settlement returns no data. A retry of a settled
 * request with the same payment gets the stored answer; the same payment on another request is refused.
 */
export function paid(routeId: PricedRoute, deps: PaymentDeps): MiddlewareHandler<PaidEnv> {
  const route: PriceEntry = PRICES[routeId];
  const name = routeName(route);
  const { settings, ledger, facilitator } = deps;

  const refuse = (c: Context, error: PaymentError) => {
    if (error.status !== 402) return c.json(errorBody(error.code, error.message, error.details), error.status);
    const answer = paymentRequiredAnswer(settings, route, c.req.url, error);
    return c.json(answer.body, 402, answer.headers);
  };

  /** Before the handler: the payment this request may run on, or the answer it already bought. */
  async function claim(c: Context): Promise<{ key: PaymentKey; verified: VerifiedPayment; waived: boolean } | { answer: Response }> {
    const attempt = decodePayment({ xPayment: c.req.header("x-payment"), paymentSignature: c.req.header("payment-signature") }, settings.maxHeaderBytes);
    if (!attempt) {
      throw new PaymentError("payment_required", `${name} costs ${unitsToUsd(route.microUsd)} USD per call: pay with an x402 payment (EIP-3009 authorization in USDT or USDC on Celo).`);
    }
    const request = c.get("input") as WalletRequest;
    const subject = requestWallet(c);
    const caller = request.callerAddress;
    const token = await checkPayment(attempt, route, settings, caller, Math.floor(Date.now() / 1000));
    const key = { token: token.address, payer: attempt.authorization.from, nonce: attempt.authorization.nonce };
    const fingerprint = sha256(`${name}\n${c.req.path}\n${JSON.stringify(request)}`);
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
      if (existing?.status === "settled" || existing?.status === "waived") return { answer: storedAnswer(c, existing, settings.network) };
      if (round > 2) throw new PaymentError("settlement_failed", `The payment could not be settled: ${existing?.failure ?? "unknown failure"}.`);

      const verified = await verifyPayment(attempt, token, deps);
      const waived =
        route.freeAfterPaidAnalysis === true &&
        subject !== undefined &&
        (await ledger.paidFor(verified.payer, subject, ANALYSIS_ROUTES, new Date(Date.now() - deps.cacheLifetimeMs)));
      const entry = { ...key, amount: verified.amount, route: name, subject: subject ?? null, fingerprint, signatureHash, encoding: attempt.encoding };
      if (await ledger.claim(entry)) return { key, verified, waived };
    }
  }

  return async (c, next) => {
    let claimed;
    try {
      claimed = await claim(c);
    } catch (error) {
      if (error instanceof PaymentError) return refuse(c, error);
      throw error;
    }
    if ("answer" in claimed) return claimed.answer;
    const { key, verified, waived } = claimed;

    c.set("billing", { chargedUnits: waived ? 0n : verified.amount, token: verified.token, payer: verified.payer, waived });
    await next();
    if (c.error || c.res.status >= 400) {
      await ledger.failed(key, `handler answered ${c.res.status}; nothing settled`);
      return;
    }
    const answer: StoredAnswer = { status: c.res.status, type: c.res.headers.get("content-type") ?? "application/json", body: await c.res.clone().text() };
    if (waived) {
      await ledger.waived(key, answer);
      return;
    }

    let settlement: SettleResponse;
    try {
      settlement = await facilitator.settle(verified.payload, verified.requirements);
    } catch (error) {
      await ledger.failed(key, `settlement error: ${(error as Error).message.split("\n")[0]}`);
      c.res = refuse(c, new PaymentError("settlement_unavailable", "The payment could not be settled right now; nothing was charged and no data is returned. Retry with the same payment."));
      return;
    }
    if (!settlement.success) {
      await ledger.failed(key, settlement.errorReason ?? "settlement failed", settlement.transaction || undefined);
      c.res = refuse(
        c,
        new PaymentError("settlement_failed", `The payment was verified but its settlement failed (${settlement.errorReason ?? "unknown reason"}); no data is returned.`, {
          reason: settlement.errorReason,
          transaction: settlement.transaction || null,
        }),
      );
      return;
    }
    // The money has moved: the payer gets the data even if recording it fails (the row then stays
    // pending and is visible to reconciliation by its transaction on chain).
    await ledger.settled(key, settlement.transaction, answer).catch((error: Error) => {
      console.error(`[payments] settled in ${settlement.transaction} but the ledger update failed: ${error.message}`);
    });
    setPaymentResponse(c.res.headers, settlement);
  };
}

function setPaymentResponse(headers: Headers, settlement: SettleResponse) {
  const encoded = encodePaymentResponseHeader({ success: true, transaction: settlement.transaction, network: settlement.network, payer: settlement.payer });
  headers.set("PAYMENT-RESPONSE", encoded);
  headers.set("X-PAYMENT-RESPONSE", encoded);
  headers.append("Access-Control-Expose-Headers", "PAYMENT-RESPONSE, X-PAYMENT-RESPONSE");
}

/** The answer a settled (or waived) payment bought, again: same body, same status, one charge. */
function storedAnswer(c: Context, row: PaymentRow, network: `${string}:${string}`) {
  const headers = new Headers({ "content-type": row.responseType ?? "application/json", "x-payment-replayed": "true" });
  if (row.transaction) setPaymentResponse(headers, { success: true, transaction: row.transaction, network, payer: row.payer });
  return c.body(row.responseBody ?? "", (row.responseStatus ?? 200) as 200, Object.fromEntries(headers));
}

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
