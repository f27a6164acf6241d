import type { RouteConfig } from "@hono/zod-openapi";
import { z } from "zod";
import { errorBodySchema } from "../../shared/errors.ts";
import { analyzeRoute } from "../analyze/route.ts";
import { chatRoute } from "../chat/route.ts";
import { brief } from "../discovery/brief.ts";
import { type JsonSchema, routeSchemas } from "../discovery/route-schemas.ts";
import { unitsToUsd } from "../money.ts";
import { reportRoute } from "../passport/report-route.ts";
import { verifyRoute } from "../passport/verify-route.ts";
import { priceOfRoute } from "../payments/prices.ts";
import { paymentRequiredV2Schema } from "../payments/schema.ts";
import { screenBatchRoute } from "../screen/batch-route.ts";
import { screenRoute } from "../screen/route.ts";
import { statementRoute } from "../statement/route.ts";
import { statsRoute } from "../stats/route.ts";
import { historyRoute, signalRoute, signalsRoute } from "../wallet/routes.ts";

/** What an MCP client may assume of a tool (MCP ToolAnnotations). */
type Annotations = {
  readOnlyHint: boolean;
  idempotentHint: boolean;
  destructiveHint?: boolean;
  openWorldHint?: boolean;
};

const READ: Annotations = { readOnlyHint: true, idempotentHint: true, openWorldHint: false };

/**
 * The MCP tools: each is one HTTP route, called through it (same validation, prices, payment core
 * and ledger). Only the name, what an agent may assume of it and a line of advice are written here;
 * its schemas and description come from the route's declaration.
 */
export const TOOLS = [
  { name: "screen_wallet", route: screenRoute, annotations: READ },
  { name: "screen_wallets", route: screenBatchRoute, annotations: READ, advice: "Priced per wallet answered." },
  { name: "analyze_wallet", route: analyzeRoute, annotations: READ },
  { name: "wallet_signals", route: signalsRoute, annotations: READ },
  { name: "wallet_signal", route: signalRoute, annotations: READ },
  { name: "wallet_history", route: historyRoute, annotations: READ },
  // A conversation remembers the wallets asked about: the same question may be answered differently later.
  { name: "ask_about_wallet", route: chatRoute, annotations: { ...READ, idempotentHint: false } },
  // Publishes an attestation on chain, superseding the wallet's previous passport.
  {
    name: "issue_passport",
    route: reportRoute,
    annotations: { readOnlyHint: false, idempotentHint: false, destructiveHint: false, openWorldHint: true },
  },
  { name: "verify_passport", route: verifyRoute, annotations: READ },
  // Pins a PDF and a CSV: the same data gives the same bytes, so the same CIDs.
  {
    name: "make_statement",
    route: statementRoute,
    annotations: { readOnlyHint: false, idempotentHint: true, destructiveHint: false, openWorldHint: false },
  },
  { name: "service_stats", route: statsRoute, annotations: READ },
] as const satisfies readonly { name: string; route: RouteConfig; annotations: Annotations; advice?: string }[];

export type Tool = (typeof TOOLS)[number];

/** The tool's arguments, one object: the route's path and query parameters and its JSON body's properties. */
export function toolInputSchema(tool: Tool): JsonSchema {
  const s = routeSchemas(tool.route);
  const body = (s.body ?? {}) as { properties?: Record<string, JsonSchema>; required?: string[] };
  const properties = { ...s.pathParams.properties, ...s.query.properties, ...body.properties };
  const required = [...s.pathParams.required, ...s.query.required, ...(body.required ?? [])];
  return { type: "object", properties, ...(required.length ? { required } : {}), additionalProperties: false };
}

const alsoAnswered = [
  { title: "PaymentRequired", ...z.toJSONSchema(paymentRequiredV2Schema, { io: "input" }) },
  { title: "Error", ...z.toJSONSchema(errorBodySchema, { io: "input" }) },
].map(({ $schema: _, ...schema }) => schema);

/**
 * What the tool answers (structuredContent): the route's 200 answer; or, in a result with isError,
 * the x402 PaymentRequired (the x402 MCP transport) or the route's error body.
 */
export function toolOutputSchema(tool: Tool): JsonSchema {
  const ok = routeSchemas(tool.route).ok;
  if (!ok) throw new Error(`${tool.name}: its route answers no JSON`);
  return { type: "object", anyOf: [ok, ...alsoAnswered] };
}

/** The tool's description: the route's, with its price and how to pay. */
export function toolDescription(tool: Tool): string {
  const route = tool.route as { summary: string; description?: string };
  const price = priceOfRoute(tool.route);
  const paying =
    price > 0n
      ? `Costs ${unitsToUsd(price)} USD${"advice" in tool ? "" : " per call"}, paid with x402: call without payment to get the requirements (isError, structuredContent = PaymentRequired), then again with an EIP-3009 authorization in _meta["x402/payment"] (USDT or USDC on Celo).`
      : "Free.";
  return [brief(`${route.summary}. ${route.description ?? ""}`), "advice" in tool ? tool.advice : "", paying]
    .filter(Boolean)
    .join(" ");
}
