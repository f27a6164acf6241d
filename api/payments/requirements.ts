import type { Network, PaymentRequired, PaymentRequirements, PaymentRequirementsV1 } from "@x402/core/types";
import { encodePaymentRequiredHeader } from "@x402/core/http";
import { getAddress } from "viem";
import type { TokenInfo } from "../../config/celo.ts";
import type { PaymentSettings } from "../../config/payments.ts";
import type { PricedRoute } from "./core.ts";
import { priceInUnits } from "./prices.ts";
import type { PaymentRequiredBody } from "./schema.ts";

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

export function requirementsFor(settings: PaymentSettings, route: Pick<PricedRoute, "microUsd">): PaymentRequirements[] {
  return settings.tokens.map((token) => requirementFor(settings, token, priceInUnits(route.microUsd, token.decimals)));
}

/**
 * The 402 answer: the x402 v1 body (`accepts`, plus our stable `code`) and the v2
 * `PAYMENT-REQUIRED` header, so a client of either version can pay.
 */
export function paymentRequiredAnswer(settings: PaymentSettings, route: PricedRoute, resourceUrl: string, error: { code: string; message: string; details?: unknown }) {
  const accepts = requirementsFor(settings, route);
  const v2: PaymentRequired = {
    x402Version: 2,
    error: error.message,
    resource: { url: resourceUrl, description: route.description, mimeType: "application/json" },
    accepts,
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
  };
  return { body, headers: { "PAYMENT-REQUIRED": encodePaymentRequiredHeader(v2) } };
}

