import type { OpenAPIHono, RouteHandler } from "@hono/zod-openapi";
import { z } from "zod";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute } from "../http/declare.ts";

export const openApiRoute = declareRoute("openapi", {
  method: "get",
  path: "/openapi.json",
  tags: ["Service"],
  summary: "This document",
  description:
    "The OpenAPI 3.1 document of this API, generated from the route declarations (also at /api/openapi.json). Free.",
  ok: z.record(z.string(), z.unknown()).describe("An OpenAPI 3.1 document"),
  rateLimited: true,
});

/** Older clients read the document here. */
export const OPENAPI_ALIAS = "/api/openapi.json";

/** The OpenAPI 3.1 document of `app`: every declared route, with prices and payment security schemes. */
export function openApiDocument(app: OpenAPIHono<AppEnv>, serverUrl: string) {
  return app.getOpenAPI31Document({
    openapi: "3.1.0",
    info: {
      title: "Celo wallet screening and reputation",
      version: "1",
      description:
        "Pay-per-call wallet screening for lenders on Celo. Paid routes take an x402 payment (an EIP-3009 authorization in USDT or USDC); " +
        "unpaid, they answer 402 with the payment requirements. See GET /api/x402/config and docs/payments.md. " +
        "Many calls? Buy prepaid credit once (POST /api/credit) and send its token (Authorization: Bearer crd_…) instead of a payment per call. " +
        "Every error is {error:{code, message, details?}}. " +
        "AI agents: the same routes as MCP tools at POST /mcp (paid with the x402 MCP transport), /llms.txt and /.well-known/x402 (docs/agents.md).",
    },
    servers: [{ url: serverUrl }],
  });
}

export function openApiHandler(app: OpenAPIHono<AppEnv>): RouteHandler<typeof openApiRoute, AppEnv> {
  let cached: { origin: string; doc: Record<string, unknown> } | undefined;
  return (c) => {
    const origin = new URL(c.req.url).origin;
    if (cached?.origin !== origin)
      cached = { origin, doc: openApiDocument(app, origin) as unknown as Record<string, unknown> };
    return c.json(cached.doc, 200);
  };
}
