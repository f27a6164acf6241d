import type { RouteConfig } from "@hono/zod-openapi";
import { BAZAAR, bazaarResourceServerExtension, declareDiscoveryExtension } from "@x402/extensions/bazaar";
import type { Reply } from "../payments/priced-route.ts";
import { withExtensions } from "../payments/requirements.ts";
import { exampleOf } from "./example.ts";
import { type JsonSchema, routeSchemas } from "./route-schemas.ts";

const declarations = new WeakMap<RouteConfig, Record<string, unknown>>();

/**
 * The x402 Bazaar discovery declaration of a paid route (`@x402/extensions`): how to call it (method,
 * JSON body or query, path parameters) and what it answers, with the schemas of the route's own
 * declaration and an example of each built from them. Computed once per route.
 */
function discoveryDeclaration(route: RouteConfig): Record<string, unknown> {
  const known = declarations.get(route);
  if (known) return known;
  const s = routeSchemas(route);
  const paramsSchema = { properties: s.pathParams.properties, required: s.pathParams.required };
  const pathParams = Object.keys(s.pathParams.properties).length
    ? {
        pathParams: exampleOf({ type: "object", ...paramsSchema }) as Record<string, unknown>,
        pathParamsSchema: paramsSchema,
      }
    : {};
  const output = s.ok ? { output: { example: exampleOf(s.ok), schema: s.ok } } : {};
  const declared = s.body
    ? declareDiscoveryExtension({
        bodyType: "json",
        input: exampleOf(s.body) as Record<string, unknown>,
        inputSchema: s.body,
        ...pathParams,
        ...output,
      })
    : declareDiscoveryExtension({
        input: exampleOf({ type: "object", ...s.query }) as Record<string, unknown>,
        inputSchema: { properties: s.query.properties, required: s.query.required } as JsonSchema,
        ...pathParams,
        ...output,
      });
  const declaration = declared[BAZAAR.key] as unknown as Record<string, unknown>;
  declarations.set(route, declaration);
  return declaration;
}

/**
 * The `extensions` entry a 402 of `route` carries for a request to `path`: the declaration enriched
 * by the package's own server extension with the method, the routeTemplate (`/api/wallet/:address/signals`)
 * and this request's path parameters.
 */
function discoveryExtension(route: RouteConfig, path: string): Record<string, unknown> {
  const s = routeSchemas(route);
  const enriched = bazaarResourceServerExtension.enrichDeclaration!(discoveryDeclaration(route), {
    method: s.method,
    adapter: { getPath: () => path },
    routePattern: s.routeTemplate,
  } as never);
  return { [BAZAAR.key]: enriched };
}

/** The declaration without its answer's example and schema: what fits in a response header. */
function withoutOutput(extension: Record<string, unknown>): Record<string, unknown> {
  const { output: _, ...info } = extension.info as Record<string, unknown>;
  const schema = extension.schema as { properties: Record<string, unknown> };
  const { output: __, ...properties } = schema.properties;
  return { ...extension, info, schema: { ...schema, properties } };
}

/**
 * A 402 of `route` with its discovery metadata: whole in the JSON body (and so in MCP results),
 * without the answer's example and schema in the PAYMENT-REQUIRED header, which must stay under
 * the 16 KB a Node client accepts (the screen's answer schema alone is about 10 KB).
 */
export function advertiseDiscovery(reply: Reply, route: RouteConfig, path: string): Reply {
  if (reply.status !== 402) return reply;
  const extensions = discoveryExtension(route, path);
  return withExtensions(reply, extensions, { [BAZAAR.key]: withoutOutput(extensions[BAZAAR.key] as never) });
}

/** The Bazaar declaration of an MCP tool (its 402 results carry it): name, input schema and example, answer. */
export function toolDiscoveryExtension(tool: {
  name: string;
  description: string;
  inputSchema: JsonSchema;
  outputSchema?: JsonSchema;
}): Record<string, unknown> {
  return declareDiscoveryExtension({
    toolName: tool.name,
    description: tool.description,
    transport: "streamable-http",
    inputSchema: tool.inputSchema,
    example: exampleOf(tool.inputSchema) as Record<string, unknown>,
    ...(tool.outputSchema ? { output: { example: exampleOf(tool.outputSchema), schema: tool.outputSchema } } : {}),
  });
}
