import { z } from "zod";
import { analyzeRequestSchema } from "../analyze/route.ts";
import { errorBodySchema } from "../http/errors.ts";
import { unitsToUsd } from "../money.ts";
import { type PriceEntry, PRICES, type PricedRoute } from "../payments/prices.ts";
import { FREE_SIGNAL_READ_RULE } from "../payments/requirements.ts";
import { paymentRequiredBodySchema } from "../payments/schema.ts";
import { lenderScreenResultSchema, screenRequestSchema } from "../screen/schema.ts";
import { statsSchema } from "../stats/schema.ts";

const json = (schema: z.ZodType, io: "input" | "output" = "output") => z.toJSONSchema(schema, { io, unrepresentable: "any", target: "draft-2020-12" });
const content = (schema: z.ZodType | undefined, description: string, io?: "input" | "output") => ({
  description,
  content: { "application/json": { schema: schema ? json(schema, io) : { type: "object" } } },
});

/** What each served route takes and answers; everything else about it comes from the price table. */
const OPERATIONS: Partial<Record<PricedRoute, { summary: string; body?: z.ZodType; ok?: z.ZodType; notFound?: string }>> = {
  screen: { summary: "Screen a borrower's wallet", body: screenRequestSchema, ok: lenderScreenResultSchema, notFound: "wallet_not_indexed (tracked-wallets mode)" },
  analyze: { summary: "Analyse a wallet (fields narrows the answer)", body: analyzeRequestSchema, notFound: "wallet_not_indexed (tracked-wallets mode)" },
  analysis: { summary: "The wallet's full walletData (docs/api.md)" },
  signals: { summary: "Every named signal with its cache status" },
  signal: { summary: "One named signal", notFound: "unknown_signal (details.signals lists the names)" },
  history: { summary: "Scores at each of the last 12 month ends" },
  config: { summary: "How to pay: treasury, tokens and their EIP-712 domains, every price" },
  health: { summary: "Health of the chain, index, service store and settlement" },
  stats: { summary: "What the indexer holds and how far behind it is", ok: statsSchema },
  openapi: { summary: "This document" },
};

const PARAMETERS: Record<string, { description: string }> = {
  address: { description: "Wallet address, 0x followed by 40 hex characters" },
  signal: { description: "Signal name (GET /api/wallet/{address}/signals lists them)" },
};

/** The OpenAPI 3.1 document of the API, generated from the same zod schemas that validate it. */
export function openApiDocument(serverUrl: string) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [id, route] of Object.entries(PRICES) as [PricedRoute, PriceEntry][]) {
    const op = OPERATIONS[id];
    if (!op || route.available === false) continue;
    const paid = route.microUsd > 0n;
    const parameters = [...route.path.matchAll(/\{(\w+)\}/g)].map(([, name]) => ({ name, in: "path", required: true, schema: { type: "string" }, ...PARAMETERS[name!] }));
    const error = (why: string) => content(errorBodySchema, why);
    paths[route.path] ??= {};
    paths[route.path]![route.method.toLowerCase()] = {
      summary: op.summary,
      description: route.description,
      operationId: id,
      ...(parameters.length ? { parameters } : {}),
      ...(op.body ? { requestBody: { required: true, ...content(op.body, "JSON body", "input") } } : {}),
      ...(paid ? { security: [{ xPayment: [] }, { paymentSignature: [] }] } : {}),
      "x-price": {
        amountUnits: route.microUsd.toString(),
        usd: unitsToUsd(route.microUsd),
        ...(route.freeAfterPaidAnalysis ? { freeWhen: FREE_SIGNAL_READ_RULE } : {}),
      },
      responses: {
        200: content(op.ok, "The answer" + (paid ? "; PAYMENT-RESPONSE and X-PAYMENT-RESPONSE carry the settlement" : "")),
        ...(op.body || parameters.length ? { 400: error("Invalid input (invalid_json, invalid_request, invalid_address, unknown_field), malformed payment, caller_mismatch") } : {}),
        ...(paid ? { 402: content(paymentRequiredBodySchema, "Payment required or refused; the v2 PAYMENT-REQUIRED header is also set") } : {}),
        ...(op.notFound ? { 404: error(op.notFound) } : {}),
        ...(paid ? { 409: error("payment_reused: this payment was used for another request"), 431: error("payment_header_too_large") } : {}),
        ...(paid || id === "health" ? { 503: error("settlement_unavailable / an integration is down") } : {}),
      },
    };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Celo wallet screening and reputation",
      version: "1",
      description: "Pay-per-call wallet screening for lenders on Celo. Paid routes take an x402 payment (EIP-3009 in USDT or USDC); see GET /api/x402/config and docs/payments.md.",
    },
    servers: [{ url: serverUrl }],
    paths,
    components: {
      securitySchemes: {
        xPayment: { type: "apiKey", in: "header", name: "X-PAYMENT", description: "The service's payment JSON, or x402 v1 base64" },
        paymentSignature: { type: "apiKey", in: "header", name: "PAYMENT-SIGNATURE", description: "x402 v2 base64" },
      },
    },
  };
}
