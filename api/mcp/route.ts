import type { RouteHandler } from "@hono/zod-openapi";
import type { Context } from "hono";
import { z } from "zod";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute, jsonBody } from "../http/declare.ts";
import { answerMcp, type RouteDispatcher } from "./server.ts";
import { TOOLS } from "./tools.ts";

const jsonRpcMessage = z.looseObject({ jsonrpc: z.literal("2.0") });

export const mcpRoute = declareRoute("mcp", {
  method: "post",
  path: "/mcp",
  tags: ["Agent"],
  summary: "MCP server (Streamable HTTP) for AI agents",
  description: `The Model Context Protocol over Streamable HTTP (stateless, JSON answers): tools ${TOOLS.map((t) => t.name).join(", ")}, each one of this API's routes with its schemas, prices and payment. Paid tools are paid with the x402 MCP transport (the payment in _meta["x402/payment"], the settlement in the result's _meta["x402/payment-response"]); one payment is single-use across HTTP and MCP. The endpoint itself is free.`,
  request: { body: jsonBody(z.union([jsonRpcMessage, z.array(jsonRpcMessage)]), "A JSON-RPC 2.0 message or batch") },
  ok: z.record(z.string(), z.unknown()).describe("The JSON-RPC 2.0 response"),
});

export function mcpHandler(app: RouteDispatcher): RouteHandler<typeof mcpRoute, AppEnv> {
  // The transport writes its own answer (JSON-RPC, or 202 for a notification): a plain Response.
  const handler = async (c: Context<AppEnv>) => answerMcp(app, c.req.raw, await c.req.json(), c.env);
  return handler as unknown as RouteHandler<typeof mcpRoute, AppEnv>;
}
