import { Hono } from "hono";
import type { PaymentSettings } from "../../config/payments.ts";
import { unitsToUsd } from "../money.ts";
import type { Facilitator } from "./facilitator.ts";
import { routeName } from "./guard.ts";
import { type PriceEntry, PRICES } from "./prices.ts";
import { FREE_SIGNAL_READ_RULE } from "./requirements.ts";

/** GET /api/x402/config: everything a client needs to pay, free. */
export function paymentConfigRoutes(settings: PaymentSettings, facilitator: Pick<Facilitator, "mode" | "relayer">) {
  const body = {
    publicPayTo: settings.payTo,
    chainId: settings.chainId,
    network: settings.network,
    x402Versions: [1, 2],
    scheme: "exact",
    tokens: settings.tokens.map((t) => ({ symbol: t.symbol, address: t.address, decimals: t.decimals, eip712: { name: t.name, version: t.version } })),
    prices: Object.values(PRICES).map((route: PriceEntry) => ({
      route: routeName(route),
      method: route.method,
      path: route.path,
      description: route.description,
      free: route.microUsd === 0n,
      amountUnits: route.microUsd.toString(),
      usd: unitsToUsd(route.microUsd),
      available: route.available ?? true,
      ...(route.freeAfterPaidAnalysis ? { freeWhen: FREE_SIGNAL_READ_RULE } : {}),
    })),
    settlement:
      settings.settlement.mode === "self"
        ? { mode: "self", relayer: facilitator.relayer, description: "The service submits transferWithAuthorization itself; payers need no gas." }
        : { mode: "facilitator", url: settings.settlement.url, description: "A remote x402 facilitator verifies and settles." },
    limits: {
      maxTimeoutSeconds: settings.maxTimeoutSeconds,
      maxAuthorizationLifetimeSeconds: settings.maxLifetimeSeconds,
      maxAmountUnits: settings.maxAmountMicroUsd.toString(),
      maxPaymentHeaderBytes: settings.maxHeaderBytes,
    },
    headers: {
      request: ["X-PAYMENT (service JSON or x402 v1 base64)", "PAYMENT-SIGNATURE (x402 v2 base64)"],
      response: ["PAYMENT-RESPONSE", "X-PAYMENT-RESPONSE", "PAYMENT-REQUIRED (on 402)"],
    },
  };
  return new Hono().get("/config", (c) => c.json(body));
}
