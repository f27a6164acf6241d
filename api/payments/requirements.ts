import { decodePaymentRequiredHeader, encodePaymentRequiredHeader } from "@x402/core/http";
import type { Network, PaymentRequired, PaymentRequirements, PaymentRequirementsV1 } from "@x402/core/types";
import { declarePaymentIdentifierExtension, PAYMENT_IDENTIFIER } from "@x402/extensions/payment-identifier";
import { getAddress } from "viem";
import type { TokenInfo } from "../../config/celo.ts";
import type { PaymentSettings } from "../../config/payments.ts";
import { creditOffer } from "./credit-offer.ts";
import type { PricedRoute, Reply } from "./priced-route.ts";
import { priceInUnits } from "./prices.ts";
import type { PaymentRequiredBody } from "./schema.ts";

/**
 * The x402 extensions every 402 declares: `payment-identifier` (optional), an idempotency key
 * beside the request fingerprint (docs/payments.md, "No double charge").
 */
export const PAYMENT_EXTENSIONS: Record<string, unknown> = {
  [PAYMENT_IDENTIFIER]: declarePaymentIdentifierExtension(false),
};

/** x402 v1 names networks; v2 uses CAIP-2 (`eip155:42220`). */
export const V1_NETWORK = "celo" as Network;

/** What one call to `route` costs in `token`: the x402 `exact` scheme over EIP-3009. */
export function requirementFor(settings: PaymentSettings, token: TokenInfo, amount: bigint): PaymentRequirements {
  return {
    scheme: "exact",
    network: settings.network,
    asset: getAddress(token.address),
    amount: amount.toString(),
    payTo: getAddress(settings.payTo),
    maxTimeoutSeconds: settings.maxTimeoutSeconds,
    extra: { name: token.name, version: token.version },
  };
}

export function requirementsFor(
  settings: PaymentSettings,
  route: Pick<PricedRoute, "microUsd">,
): PaymentRequirements[] {
  return settings.tokens.map((token) => requirementFor(settings, token, priceInUnits(route.microUsd, token.decimals)));
}

/**
 * The 402 answer: the x402 v1 body (`accepts`, plus our stable `code`) and the v2
 * `PAYMENT-REQUIRED` header, so a client of either version can pay.
 */
export function paymentRequiredAnswer(
  settings: PaymentSettings,
  route: PricedRoute,
  resourceUrl: string,
  error: { code: string; message: string; details?: unknown },
) {
  const accepts = requirementsFor(settings, route);
  const v2: PaymentRequired = {
    x402Version: 2,
    error: error.message,
    resource: { url: resourceUrl, description: route.description, mimeType: "application/json" },
    accepts,
    extensions: PAYMENT_EXTENSIONS,
  };
  const v1Accepts: PaymentRequirementsV1[] = accepts.map((r) => ({
    scheme: r.scheme,
    network: V1_NETWORK,
    maxAmountRequired: r.amount,
    resource: resourceUrl,
    description: route.description,
    mimeType: "application/json",
    outputSchema: {},
    payTo: r.payTo,
    maxTimeoutSeconds: r.maxTimeoutSeconds,
    asset: r.asset,
    extra: r.extra,
  }));
  const body: PaymentRequiredBody = {
    x402Version: 1,
    error: error.message,
    code: error.code,
    ...(error.details === undefined ? {} : { details: error.details }),
    accepts: v1Accepts,
    ...(route.freeRead ? { freeWhen: route.freeRead.rule } : {}),
    ...(route.buysCredit ? {} : { credit: creditOffer(settings) }),
    extensions: PAYMENT_EXTENSIONS,
  };
  return { body, headers: { "PAYMENT-REQUIRED": encodePaymentRequiredHeader(v2) } };
}

/**
 * A 402 reply with x402 `extensions` (e.g. the sign-in-with-x challenge, fresh per answer) in
 * both places a client reads: the v1 body and the v2 PAYMENT-REQUIRED header (`inHeader`, when
 * the header must carry less: a response header over 16 KB is refused by Node's fetch).
 */
export function withExtensions(
  reply: Reply,
  extensions: Record<string, unknown>,
  inHeader: Record<string, unknown> = extensions,
): Reply {
  const header = reply.headers["PAYMENT-REQUIRED"];
  const decoded = header ? decodePaymentRequiredHeader(header) : undefined;
  const headers = decoded
    ? {
        ...reply.headers,
        "PAYMENT-REQUIRED": encodePaymentRequiredHeader({
          ...decoded,
          extensions: { ...decoded.extensions, ...inHeader },
        }),
      }
    : reply.headers;
  const body = JSON.parse(reply.body) as { extensions?: Record<string, unknown> };
  return { ...reply, headers, body: JSON.stringify({ ...body, extensions: { ...body.extensions, ...extensions } }) };
}
