import { readFileSync } from "node:fs";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { describe, expect, it } from "vitest";
import { BRIEF_MAX_CHARS, brief } from "../api/discovery/brief.ts";
import { exampleOf } from "../api/discovery/example.ts";
import { routeSchemas } from "../api/discovery/route-schemas.ts";
import { routeName } from "../api/http/declare.ts";
import { TOOLS } from "../api/mcp/tools.ts";
import { unitsToUsd } from "../api/money.ts";
import { priceOfRoute } from "../api/payments/prices.ts";
import { ROUTES } from "../api/routes.ts";

const ajv = new Ajv2020({ strict: false });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);

describe("discovery metadata from the route declarations", () => {
  it("builds an example every route's own schemas accept, for its request and its answer", () => {
    for (const { route } of ROUTES) {
      const s = routeSchemas(route);
      for (const [what, schema] of [
        ["body", s.body],
        ["answer", s.ok],
        ["path", { type: "object", ...s.pathParams }],
      ] as const) {
        if (!schema) continue;
        const validate = ajv.compile(schema);
        expect(
          validate(exampleOf(schema)),
          `${route.method} ${route.path} ${what}: ${ajv.errorsText(validate.errors)}`,
        ).toBe(true);
      }
    }
  });

  it("names path parameters in the colon form routers and x402 use", () => {
    const signal = ROUTES.find((r) => r.route.path === "/api/wallet/{address}/signals/{signal}")!.route;
    expect(routeSchemas(signal)).toMatchObject({
      method: "GET",
      routeTemplate: "/api/wallet/:address/signals/:signal",
      pathParams: { required: ["address", "signal"] },
    });
  });

  it("keeps descriptions under the catalogues' limit by whole sentences", () => {
    const long = `${"A sentence that says something. ".repeat(30)}The end.`;
    const short = brief(long);
    expect(short.length).toBeLessThanOrEqual(BRIEF_MAX_CHARS);
    expect(short).toMatch(/something\.$/);
    expect(brief("Short. Enough.")).toBe("Short. Enough.");
    expect(brief("x".repeat(600)).length).toBe(BRIEF_MAX_CHARS);
  });
});

describe("docs/agents.md", () => {
  it("lists every MCP tool with its route and price, as the tool table has them", () => {
    const doc = readFileSync(new URL("../docs/agents.md", import.meta.url), "utf8");
    const rows = [...doc.matchAll(/^\| `(\w+)` \| `(\w+ [^`]+)` \| ([^|]+) \|$/gm)].map(([, tool, route, price]) => ({
      tool,
      route,
      price: price!.trim(),
    }));
    expect(rows).toEqual(
      TOOLS.map((tool) => {
        const units = priceOfRoute(tool.route);
        const usd = units === 0n ? "free" : unitsToUsd(units).toFixed(2);
        return {
          tool: tool.name,
          route: routeName(tool.route),
          price: "advice" in tool ? `${usd} per wallet answered` : usd,
        };
      }),
    );
  });
});
