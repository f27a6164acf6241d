import type { RouteConfig, RouteHandler } from "@hono/zod-openapi";
import { z } from "zod";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute, routeName } from "../http/declare.ts";
import { TOOLS } from "../mcp/tools.ts";
import { unitsToUsd } from "../money.ts";
import { priceOfRoute } from "../payments/prices.ts";
import { brief } from "./brief.ts";

const HOW_TO_PAY =
  'Paid routes answer 402 with x402 payment requirements (v2 in the PAYMENT-REQUIRED header, v1 in the body); pay with an EIP-3009 authorization in USDT or USDC on Celo (x402 `exact` scheme) in PAYMENT-SIGNATURE (v2) or X-PAYMENT (v1), and the answer carries the settlement in PAYMENT-RESPONSE. Over MCP, the payment goes in _meta["x402/payment"]. GET /api/x402/config gives the treasury, tokens and prices. Many calls: buy prepaid credit once (POST /api/credit, paid as above) and send `Authorization: Bearer <creditToken>` instead of a payment (over MCP, as the connection\'s Authorization header).';

export const wellKnownRoute = declareRoute("wellKnownX402", {
  method: "get",
  path: "/.well-known/x402",
  tags: ["Payments"],
  summary: "The paid resources, for x402 scanners",
  description:
    'The x402 discovery document public scanners read: every paid route as "METHOD /path", and how to pay. Generated from the route table. Free.',
  ok: z.object({
    version: z.literal(1),
    resources: z.array(z.string()).describe('Every paid route, "METHOD /path" as in /openapi.json'),
    instructions: z.string(),
  }),
  rateLimited: true,
});

export const llmsRoute = declareRoute("llms", {
  method: "get",
  path: "/llms.txt",
  tags: ["Service"],
  summary: "This service, for language models",
  description:
    "What the service is, every route with its price, how to pay, and links to /openapi.json and the MCP endpoint, as Markdown (llmstxt.org). Generated from the route table. Free.",
  okContent: { "text/plain": z.string() },
  rateLimited: true,
});

type Declared = RouteConfig & {
  operationId?: string;
  summary?: string;
  description?: string;
  "x-price"?: { per?: string };
};

export function wellKnownHandler({
  routes,
}: {
  routes: readonly RouteConfig[];
}): RouteHandler<typeof wellKnownRoute, AppEnv> {
  const body = {
    version: 1 as const,
    resources: (routes as Declared[]).filter((r) => priceOfRoute(r) > 0n).map(routeName),
    instructions: HOW_TO_PAY,
  };
  return (c) => c.json(body, 200);
}

/** /llms.txt, from the route table and the MCP tools. */
function llmsText(routes: readonly RouteConfig[], origin: string): string {
  const line = (r: Declared) => {
    const price = priceOfRoute(r);
    const cost = price > 0n ? `${unitsToUsd(price)} USD${r["x-price"]?.per ? ` per ${r["x-price"].per}` : ""}` : "free";
    return `- \`${routeName(r)}\` (${cost}): ${brief(`${r.summary}. ${r.description ?? ""}`)}`;
  };
  return [
    "# Celo wallet reputation",
    "",
    "> Wallet screening and reputation for lenders on Celo: trust, scores, income and loan capacity of a wallet from its indexed USDT and USDC transfers, and verifiable passports attested on chain. Paid per call with x402.",
    "",
    "## How to pay",
    "",
    HOW_TO_PAY,
    "",
    "## Routes",
    "",
    ...(routes as Declared[]).map(line),
    "",
    "## MCP",
    "",
    `Streamable HTTP at ${origin}/mcp. Tools: ${TOOLS.map((t) => `\`${t.name}\``).join(", ")}.`,
    "",
    "## Links",
    "",
    `- [OpenAPI document](${origin}/openapi.json)`,
    `- [MCP endpoint](${origin}/mcp)`,
    `- [Payment configuration](${origin}/api/x402/config)`,
    `- [x402 discovery](${origin}/.well-known/x402)`,
    "",
  ].join("\n");
}

export function llmsHandler({ routes }: { routes: readonly RouteConfig[] }): RouteHandler<typeof llmsRoute, AppEnv> {
  return ((c) =>
    c.text(llmsText(routes, new URL(c.req.url).origin), 200, {
      "content-type": "text/plain; charset=utf-8",
    })) as RouteHandler<typeof llmsRoute, AppEnv>;
}
