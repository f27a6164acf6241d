import { Writable } from "node:stream";
import { OpenAPIHono } from "@hono/zod-openapi";
import { beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../api/app.ts";
import type { AppEnv } from "../api/http/app-env.ts";
import { requestLog } from "../api/http/log.ts";
import { createLogger } from "../shared/log.ts";
import { settingsOnlyCore } from "./support/paid-app.ts";

// The request log (one JSON line per request, nothing secret in it) and the free routes' limit.
const LIMIT = 6;

const lines: string[] = [];
const sink = new Writable({
  write: (chunk, _enc, done) => (lines.push(...chunk.toString().split("\n").filter(Boolean)), done()),
});
const logger = createLogger({ level: "info", destination: sink });
const logged = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);

const PRIVATE_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
const SIGNATURE = `0x${"ab".repeat(65)}`;
const PAYER = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
const payments = settingsOnlyCore();
const paymentHeader = Buffer.from(
  JSON.stringify({ signature: SIGNATURE, from: PAYER, privateKey: PRIVATE_KEY }),
).toString("base64");

describe("structured request logs", () => {
  const app = createApp({
    db: undefined as never,
    target: { network: "devnet", tokens: [], tracked: null, schema: "unused", reporters: [], sanctions: null },
    payments,
    ipfs: undefined as never,
    logger,
  });
  // A paid call as the payment middleware leaves it: c.var.billing set before the handler answers.
  const paid = new OpenAPIHono<AppEnv>();
  paid.use(requestLog(logger, [{ method: "post", path: "/api/lender/screen" }]));
  paid.post("/api/lender/screen", (c) => {
    c.set(
      "billing",
      Promise.resolve({
        payer: PAYER,
        chargedUnits: 10_000n,
        waived: false,
        token: { symbol: "USDT", address: "0x0000000000000000000000000000000000000001", decimals: 6 } as never,
      }),
    );
    return c.json({ ok: true, header: c.req.header("payment-signature")?.length }, 200);
  });

  beforeAll(() => void lines.splice(0));

  it("logs one line per request with id, route, status and latency; an unpaid call has no payer", async () => {
    const res = await app.request("/openapi.json", {
      headers: { "x-request-id": "lender-42.abc", "x-payment": paymentHeader, authorization: `Bearer ${PRIVATE_KEY}` },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-request-id")).toBe("lender-42.abc");
    const [line] = logged().filter((l) => l.requestId === "lender-42.abc");
    expect(line).toMatchObject({
      level: 30,
      msg: "request",
      method: "GET",
      route: "GET /openapi.json",
      status: 200,
      payer: null,
      chargedUnits: null,
    });
    expect(typeof line!.latencyMs).toBe("number");
    expect(typeof line!.time).toBe("string");
  });

  it("replaces a malformed incoming request id with its own", async () => {
    const res = await app.request("/api/x402/nope", { headers: { "x-request-id": "has spaces; and=more" } });
    expect(res.status).toBe(404);
    const id = res.headers.get("x-request-id")!;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(logged().find((l) => l.requestId === id)).toMatchObject({ status: 404, route: null });
  });

  it("logs the payer and the units charged of a paid call, the declared route name, and never a header value", async () => {
    const res = await paid.request("/api/lender/screen", {
      method: "POST",
      headers: { "payment-signature": paymentHeader, "x-payment": paymentHeader, "content-type": "application/json" },
      body: "{}",
    });
    expect(res.status).toBe(200);
    const id = res.headers.get("x-request-id")!;
    expect(logged().find((l) => l.requestId === id)).toMatchObject({
      route: "POST /api/lender/screen",
      status: 200,
      payer: PAYER,
      chargedUnits: "10000",
      token: "USDT",
    });
    const all = lines.join("\n");
    for (const secret of [paymentHeader, SIGNATURE, SIGNATURE.slice(2, 40), PRIVATE_KEY, PRIVATE_KEY.slice(2, 40)])
      expect(all).not.toContain(secret);
  });
});

describe("free routes are rate limited per client", () => {
  const app = createApp({
    db: undefined as never,
    target: { network: "devnet", tokens: [], tracked: null, schema: "unused", reporters: [], sanctions: null },
    payments,
    ipfs: undefined as never,
    logger: createLogger({ level: "silent" }),
    freeRateLimitPerMinute: LIMIT,
  });

  it("documents 429 rate_limited on the rate-limited routes", async () => {
    const doc = (await (await app.request("/openapi.json")).json()) as {
      paths: Record<string, Record<string, { responses: Record<string, { description: string }> }>>;
    };
    for (const [path, method] of [
      ["/api/stats", "get"],
      ["/api/x402/config", "get"],
      ["/api/health/integrations", "get"],
      ["/openapi.json", "get"],
    ] as const) {
      expect(doc.paths[path]![method]!.responses["429"]?.description, path).toContain("rate_limited");
    }
    expect(doc.paths["/api/lender/screen"]!.post!.responses["429"]).toBeUndefined();
  });

  it(`answers 429 with Retry-After past ${LIMIT} requests a minute, across the free routes`, async () => {
    const statuses: number[] = [];
    let limited: Response | undefined;
    for (let i = 0; i < LIMIT + 2 && !limited; i++) {
      const res = await app.request(i % 2 ? "/docs" : "/api/openapi.json");
      statuses.push(res.status);
      if (res.status === 429) limited = res;
    }
    expect(limited, statuses.join(",")).toBeDefined();
    expect(Number(limited!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(((await limited!.json()) as { error: { code: string } }).error.code).toBe("rate_limited");
    // The same client is limited on every free route; paid routes are not behind this limit.
    expect((await app.request("/openapi.json")).status).toBe(429);
  });
});
