import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import { type ErrorBody, errorBody } from "../../shared/errors.ts";
import { toolDiscoveryExtension } from "../discovery/bazaar.ts";
import { brief } from "../discovery/brief.ts";
import { routeSchemas } from "../discovery/route-schemas.ts";
import { creditTokenOf } from "../payments/credit-token.ts";
import { TOOLS, type Tool, toolDescription, toolInputSchema, toolOutputSchema } from "./tools.ts";
import { paymentHeader, toolResult } from "./x402.ts";

/** Where tool calls are answered: the service's own app, in process (same middleware, payment core and ledger). */
export type RouteDispatcher = { fetch: (request: Request, env?: unknown) => Response | Promise<Response> };

const SERVER_INFO = { name: "celo-wallet-reputation", version: "1.0.0" };
/** One JSON Schema validator for every request's server: the SDK would build an Ajv instance per server (a fifth of its time here). */
const validator = new AjvJsonSchemaValidator();
const INSTRUCTIONS =
  'Screening and reputation of wallets on Celo, from their USDT and USDC transfers. Paid tools follow the x402 MCP transport: a call without payment returns isError with the PaymentRequired in structuredContent; sign an EIP-3009 authorization for one of its `accepts` and call again with it in _meta["x402/payment"]. The settlement comes back in _meta["x402/payment-response"].';

type Listed = ReturnType<typeof listing>;
let listed: Map<string, Listed> | undefined;

/** A tool as tools/list gives it, and what its 402 results name. Built once, from the route declarations. */
function listing(tool: Tool) {
  const definition = {
    name: tool.name,
    title: tool.route.summary,
    description: toolDescription(tool),
    inputSchema: toolInputSchema(tool),
    outputSchema: toolOutputSchema(tool),
    annotations: { title: tool.route.summary, ...tool.annotations },
  };
  const short = brief(definition.description);
  return {
    tool,
    definition,
    short,
    discovery: toolDiscoveryExtension({ ...definition, description: short }),
  };
}

const toolListing = () => (listed ??= new Map(TOOLS.map((tool) => [tool.name, listing(tool)])));

/** Arguments that cannot make the route's request: refused as the route refuses bad input (400 invalid_request). */
const invalid = (message: string): ErrorBody => errorBody("invalid_request", message);

/** The route's HTTP request for a tool call: path and query parameters from the arguments, the rest as the JSON body. */
function routeRequest(
  tool: Tool,
  args: Record<string, unknown>,
  meta: Record<string, unknown> | undefined,
  origin: string,
  credit: string | undefined,
): Request | ErrorBody {
  const s = routeSchemas(tool.route);
  const rest = { ...args };
  let path = s.path;
  for (const name of Object.keys(s.pathParams.properties)) {
    const value = rest[name];
    delete rest[name];
    if (typeof value !== "string" || value === "") return invalid(`${name} is required: a string.`);
    path = path.replace(`{${name}}`, encodeURIComponent(value));
  }
  const url = new URL(path, origin);
  for (const name of Object.keys(s.query.properties)) {
    if (rest[name] !== undefined) url.searchParams.set(name, String(rest[name]));
    delete rest[name];
  }
  if (!s.body && Object.keys(rest).length > 0)
    return invalid(`Unknown argument(s) for ${tool.name}: ${Object.keys(rest).join(", ")}.`);
  const payment = paymentHeader(meta);
  return new Request(url, {
    method: s.method,
    headers: {
      accept: "application/json",
      ...(s.body ? { "content-type": "application/json" } : {}),
      ...(payment ? { "payment-signature": payment } : {}),
      ...(credit ? { authorization: credit } : {}),
    },
    ...(s.body ? { body: JSON.stringify(rest) } : {}),
  });
}

/**
 * One MCP request (Streamable HTTP, stateless, JSON answers): tools/list from the route
 * declarations, tools/call through the tool's HTTP route on `app`. `env` is the incoming request's
 * (per-client limits see the MCP client's connection).
 */
export async function answerMcp(
  app: RouteDispatcher,
  request: Request,
  parsedBody: unknown,
  env: unknown,
): Promise<Response> {
  const origin = new URL(request.url).origin;
  // A credit token the MCP client sends (its connection's Authorization header) pays each tool call
  // from prepaid credit, as on HTTP; no other authorization is passed on to the routes.
  const authorization = request.headers.get("authorization") ?? undefined;
  const credit = creditTokenOf(authorization) === undefined ? undefined : authorization;
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: {} },
    instructions: INSTRUCTIONS,
    jsonSchemaValidator: validator,
  });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [...toolListing().values()].map((t) => t.definition),
  }));
  server.setRequestHandler(CallToolRequestSchema, async ({ params }) => {
    const listed = toolListing().get(params.name);
    if (!listed) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${params.name}`);
    const routed = routeRequest(listed.tool, params.arguments ?? {}, params._meta, origin, credit);
    const answer =
      routed instanceof Request
        ? await app.fetch(routed, env)
        : new Response(JSON.stringify(routed), { status: 400, headers: { "content-type": "application/json" } });
    return toolResult(
      { name: listed.tool.name, description: listed.short },
      { status: answer.status, headers: answer.headers, body: await answer.text() },
      listed.discovery,
    );
  });
  const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true });
  await server.connect(transport);
  try {
    return await transport.handleRequest(request, { parsedBody });
  } finally {
    await server.close();
  }
}
