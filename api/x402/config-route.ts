import type { RouteConfig, RouteHandler } from "@hono/zod-openapi";
import { SIGN_IN_WITH_X } from "@x402/extensions/sign-in-with-x";
import { z } from "zod";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute, routeName } from "../http/declare.ts";
import { PAYMENT_ID_HEADER } from "../http/payment.ts";
import { unitsToUsd } from "../money.ts";
import type { PaymentCore } from "../payments/core.ts";
import { creditOffer, creditOfferSchema } from "../payments/credit-offer.ts";
import { PRICES, type RouteId } from "../payments/prices.ts";
import { PAYMENT_EXTENSIONS } from "../payments/requirements.ts";
import { SIGN_IN_ERRORS, SIGN_IN_HEADER, SIGN_IN_MAX_AGE_MS, signInFor } from "../payments/sign-in.ts";

const priceSchema = z.object({
  route: z.string().describe('"METHOD /path"'),
  method: z.string(),
  path: z.string(),
  description: z.string(),
  free: z.boolean(),
  amountUnits: z.string().describe("Price in the token's smallest units"),
  usd: z.number(),
  available: z.boolean().describe("false: in the service interface, not served by this build yet"),
  per: z
    .string()
    .optional()
    .describe('Set when the price is per unit of the request (e.g. "wallet": amountUnits per wallet answered)'),
  freeWhen: z.string().optional(),
  signIn: z.string().optional().describe("Set where sign-in-with-x can make the call free: what it grants"),
});

const signInSchema = z.object({
  extension: z
    .literal(SIGN_IN_WITH_X)
    .describe("The x402 extension (@x402/extensions); 402 answers of these routes carry its challenge in extensions"),
  header: z.string().describe("The request header carrying the signed proof (base64 JSON)"),
  origin: z
    .string()
    .describe(
      "The origin the CAIP-122 message must name (domain and URI), from configuration: never the request's Host",
    ),
  chains: z.array(z.object({ chainId: z.string(), type: z.string() })),
  maxAgeSeconds: z.number().describe("A proof is accepted this long after its issuedAt; each nonce is accepted once"),
  ownWalletAnalysesPerHour: z
    .number()
    .describe("Free analyses of the signed-in wallet itself, per wallet per hour; then 429 rate_limited"),
  routes: z.array(z.string()),
  refusals: z
    .record(z.string(), z.number())
    .describe("Codes of a refused sign-in, with their status; nothing is charged"),
});

const configSchema = z.object({
  publicPayTo: z.string().describe("The treasury every payment is made out to"),
  chainId: z.number(),
  network: z.string(),
  x402Versions: z.array(z.number()),
  scheme: z.string(),
  tokens: z.array(
    z.object({
      symbol: z.string(),
      address: z.string(),
      decimals: z.number(),
      eip712: z.object({ name: z.string(), version: z.string() }),
    }),
  ),
  prices: z.array(priceSchema),
  settlement: z.object({
    mode: z.enum(["self", "facilitator"]),
    relayer: z.string().optional(),
    url: z.string().optional(),
    description: z.string(),
    timing: z
      .enum(["before", "deferred"])
      .describe(
        "X402_SETTLEMENT: settled before the answer, or answered first and settled by a worker (PAYMENT-RESPONSE extra.settlement = pending)",
      ),
    deferredMaxPerPayerUnits: z
      .string()
      .optional()
      .describe("Deferred: most unsettled value per payer (smallest units); past it a call settles first"),
  }),
  extensions: z
    .array(z.string())
    .describe(
      "x402 extensions honoured: payment-identifier (idempotency id in the payment payload's extensions), sign-in-with-x",
    ),
  limits: z.object({
    maxTimeoutSeconds: z.number(),
    maxAuthorizationLifetimeSeconds: z.number(),
    maxAmountUnits: z.string(),
    maxPaymentHeaderBytes: z.number(),
  }),
  headers: z.object({ request: z.array(z.string()), response: z.array(z.string()) }),
  signIn: signInSchema,
  credit: creditOfferSchema,
});

export const configRoute = declareRoute("config", {
  method: "get",
  path: "/api/x402/config",
  tags: ["Payments"],
  summary: "How to pay",
  description:
    "The treasury (publicPayTo), accepted tokens and their EIP-712 domains, every route's price, the settlement mode and limits, sign-in-with-x (signIn) and prepaid credit (credit). Free.",
  ok: configSchema,
  rateLimited: true,
});

export type ConfigDeps = { payments: PaymentCore; routes: readonly RouteConfig[] };

/** GET /api/x402/config: everything a client needs to pay, from the settings and the declared routes. */
export function configHandler({ payments, routes }: ConfigDeps): RouteHandler<typeof configRoute, AppEnv> {
  const { settings, facilitator } = payments;
  const price = (
    id: RouteId,
    route: {
      method: string;
      path: string;
      description?: string;
      "x-price"?: { freeWhen?: string; per?: string };
      "x-sign-in"?: string;
    },
  ) => ({
    route: routeName(route),
    method: route.method.toUpperCase(),
    path: route.path,
    description: route.description ?? "",
    free: PRICES[id] === 0n,
    amountUnits: PRICES[id].toString(),
    usd: unitsToUsd(PRICES[id]),
    available: true,
    ...(route["x-price"]?.per ? { per: route["x-price"].per } : {}),
    ...(route["x-price"]?.freeWhen ? { freeWhen: route["x-price"].freeWhen } : {}),
    ...(route["x-sign-in"] ? { signIn: route["x-sign-in"] } : {}),
  });
  const signIn = signInFor(payments).settings;
  const body: z.infer<typeof configSchema> = {
    publicPayTo: settings.payTo,
    chainId: settings.chainId,
    network: settings.network,
    x402Versions: [1, 2],
    scheme: "exact",
    tokens: settings.tokens.map((t) => ({
      symbol: t.symbol,
      address: t.address,
      decimals: t.decimals,
      eip712: { name: t.name, version: t.version },
    })),
    prices: routes.map((r) => price(r.operationId as RouteId, r as Parameters<typeof price>[1])),
    settlement: {
      ...(settings.settlement.mode === "self"
        ? {
            mode: "self" as const,
            relayer: facilitator.relayer,
            description: "The service submits transferWithAuthorization itself; payers need no gas.",
          }
        : {
            mode: "facilitator" as const,
            url: settings.settlement.url,
            description: "A remote x402 facilitator verifies and settles.",
          }),
      timing: settings.timing.mode,
      ...(settings.timing.mode === "deferred"
        ? { deferredMaxPerPayerUnits: settings.timing.maxPerPayerMicroUsd.toString() }
        : {}),
    },
    extensions: [...Object.keys(PAYMENT_EXTENSIONS), SIGN_IN_WITH_X],
    limits: {
      maxTimeoutSeconds: settings.maxTimeoutSeconds,
      maxAuthorizationLifetimeSeconds: settings.maxLifetimeSeconds,
      maxAmountUnits: settings.maxAmountMicroUsd.toString(),
      maxPaymentHeaderBytes: settings.maxHeaderBytes,
    },
    headers: {
      request: [
        "X-PAYMENT (service JSON or x402 v1 base64)",
        "PAYMENT-SIGNATURE (x402 v2 base64)",
        `${SIGN_IN_HEADER} (x402 sign-in-with-x, base64; instead of a payment where signIn says so, or to pay from the wallet's credit)`,
        "Authorization: Bearer crd_… (a credit token: the call is paid from prepaid credit)",
        `${PAYMENT_ID_HEADER} (with credit: an idempotency id; a retry is answered again, charged once)`,
      ],
      response: [
        "PAYMENT-RESPONSE",
        "X-PAYMENT-RESPONSE",
        "PAYMENT-REQUIRED (on 402)",
        "Credit-Spend, Credit-Balance (paid from credit: the spend's ledger reference, the balance left in micro-USD)",
      ],
    },
    signIn: {
      extension: SIGN_IN_WITH_X,
      header: SIGN_IN_HEADER,
      origin: signIn.origin,
      chains: [{ chainId: settings.network, type: "eip191" }],
      maxAgeSeconds: SIGN_IN_MAX_AGE_MS / 1000,
      ownWalletAnalysesPerHour: signIn.ownAnalysesPerHour,
      routes: routes.filter((r) => (r as { "x-sign-in"?: string })["x-sign-in"]).map(routeName),
      refusals: SIGN_IN_ERRORS,
    },
    credit: creditOffer(settings),
  };
  return (c) => c.json(body, 200);
}
