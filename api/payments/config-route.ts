import type { RouteConfig, RouteHandler } from "@hono/zod-openapi";
import { z } from "zod";
import { declareRoute, routeName } from "../http/declare.ts";
import type { AppEnv } from "../http/env.ts";
import { unitsToUsd } from "../money.ts";
import type { PaymentCore } from "./core.ts";
import { PLANNED_ROUTES, PRICES, type RouteId } from "./prices.ts";

const priceSchema = z.object({
  route: z.string().describe('"METHOD /path"'),
  method: z.string(),
  path: z.string(),
  description: z.string(),
  free: z.boolean(),
  amountUnits: z.string().describe("Price in the token's smallest units"),
  usd: z.number(),
  available: z.boolean().describe("false: in the service interface, not served by this build yet"),
  freeWhen: z.string().optional(),
});

export const configSchema = z.object({
  publicPayTo: z.string().describe("The treasury every payment is made out to"),
  chainId: z.number(),
  network: z.string(),
  x402Versions: z.array(z.number()),
  scheme: z.string(),
  tokens: z.array(z.object({ symbol: z.string(), address: z.string(), decimals: z.number(), eip712: z.object({ name: z.string(), version: z.string() }) })),
  prices: z.array(priceSchema),
  settlement: z.object({ mode: z.enum(["self", "facilitator"]), relayer: z.string().optional(), url: z.string().optional(), description: z.string() }),
  limits: z.object({ maxTimeoutSeconds: z.number(), maxAuthorizationLifetimeSeconds: z.number(), maxAmountUnits: z.string(), maxPaymentHeaderBytes: z.number() }),
  headers: z.object({ request: z.array(z.string()), response: z.array(z.string()) }),
});

export const configRoute = declareRoute("config", {
  method: "get",
  path: "/api/x402/config",
  tags: ["Payments"],
  summary: "How to pay",
  description: "The treasury (publicPayTo), accepted tokens and their EIP-712 domains, every route's price, the settlement mode and limits. Free.",
  ok: configSchema,
  rateLimited: true,
});

export type ConfigDeps = { payments: PaymentCore; routes: readonly RouteConfig[] };

/** GET /api/x402/config: everything a client needs to pay, from the settings and the declared routes. */
export function configHandler({ payments, routes }: ConfigDeps): RouteHandler<typeof configRoute, AppEnv> {
  const { settings, facilitator } = payments;
  const price = (id: RouteId, route: { method: string; path: string; description?: string; "x-price"?: { freeWhen?: string } }, available: boolean) => ({
    route: routeName(route),
    method: route.method.toUpperCase(),
    path: route.path,
    description: route.description ?? "",
    free: PRICES[id] === 0n,
    amountUnits: PRICES[id].toString(),
    usd: unitsToUsd(PRICES[id]),
    available,
    ...(route["x-price"]?.freeWhen ? { freeWhen: route["x-price"].freeWhen } : {}),
  });
  const body: z.infer<typeof configSchema> = {
    publicPayTo: settings.payTo,
    chainId: settings.chainId,
    network: settings.network,
    x402Versions: [1, 2],
    scheme: "exact",
    tokens: settings.tokens.map((t) => ({ symbol: t.symbol, address: t.address, decimals: t.decimals, eip712: { name: t.name, version: t.version } })),
    prices: [
      ...routes.map((r) => price(r.operationId as RouteId, r as Parameters<typeof price>[1], true)),
      ...(Object.entries(PLANNED_ROUTES) as [RouteId, NonNullable<(typeof PLANNED_ROUTES)[RouteId]>][]).map(([id, r]) => price(id, r, false)),
    ],
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
  return (c) => c.json(body, 200);
}
