import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { Validator } from "@seriousme/openapi-schema-validator";
import { getAddress, type Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../../api/app.ts";
import { BODY_LIMIT_BYTES } from "../../api/http/limits.ts";
import { cidOf } from "../../api/ipfs/node.ts";
import { createPayments } from "../../api/payments/payments.ts";
import { ROUTES } from "../../api/routes.ts";
import { errorBodySchema } from "../../shared/errors.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { type Indexer, testDatabase, waitForBlock } from "../support/indexer.ts";
import { documentMismatch, type OpenApiDocument } from "../support/openapi.ts";
import { devnetPaymentSettings, signAuthorization, specHeader, tokenBalance } from "../support/payments.ts";

type Call = { method: string; path: string; headers?: Record<string, string>; body?: string | ReadableStream };
type Answer = { status: number; headers: Headers; body: any };

// The service's contract as its document states it: every route documented and served, every
// answer (good or bad) shaped as documented, one error model for whatever a client gets wrong.
describe(`requests and the OpenAPI document (${testDatabase})`, () => {
  let env: IndexedDevnet;
  let devnet: TestDevnet;
  let indexer: Indexer;
  let doc: OpenApiDocument;
  let lender: { address: Hex; privateKey: Hex };
  let wallet: Hex;
  let treasury: Hex;
  /** For GET /ipfs/{cid}: the statement made earlier in the run, else a CID nothing pinned. */
  let pinnedCid: string | undefined;
  let unpinnedCid: string;
  /** For GET /api/agent/verify/{id}: the passport POST /api/agent/report issued earlier in the run. */
  let reportId: string | undefined;
  const treasuryUsdt = () => tokenBalance(devnet.manifest.rpcUrl, devnet.manifest.tokens.USDT.address, treasury);

  const send = async ({ method, path, headers = {}, body }: Call): Promise<Answer> => {
    const res = await fetch(`${indexer.url}${path}`, {
      method,
      headers,
      body,
      ...(body instanceof ReadableStream ? { duplex: "half" } : {}),
    } as RequestInit);
    const text = await res.text();
    return {
      status: res.status,
      headers: res.headers,
      body: text && res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : text,
    };
  };
  const pay = async (value = 10_000n) => ({
    "x-payment": specHeader(
      await signAuthorization(lender.privateKey, devnet.manifest.tokens.USDT, { to: treasury, value }),
      devnet.manifest.tokens.USDT.address,
    ),
  });
  const json = { "content-type": "application/json" };
  /** The wallet in mixed case with one letter's case flipped: a wrong EIP-55 checksum. */
  const miscased = () => {
    const checksummed = getAddress(wallet);
    const at = [...checksummed].findIndex((ch, i) => i > 1 && /[a-f]/i.test(ch));
    const ch = checksummed[at]!;
    return `${checksummed.slice(0, at)}${ch === ch.toUpperCase() ? ch.toLowerCase() : ch.toUpperCase()}${checksummed.slice(at + 1)}`;
  };

  // The monitors' and the credit's routes want a sign-in or leave lasting state (monitors, endpoints,
  // credit): test/db/monitors.test.ts and test/db/credit.test.ts call each of them in process. POST /mcp
  // speaks JSON-RPC, each tool through one of these routes: test/db/mcp.test.ts calls it. Here they are
  // documented and served like the rest.
  const CALLED = ROUTES.filter((r) => !/^\/api\/(monitors|credit)/.test(r.route.path) && r.route.path !== "/mcp");

  /** A valid request to each declared route (the route ids of the price table). */
  const valid = (id: string): Call => {
    const route = ROUTES.find((r) => r.route.operationId === id)!.route;
    const path = route.path
      .replace("{address}", wallet)
      .replace("{signal}", "monthly-income")
      .replace("{cid}", pinnedCid ?? unpinnedCid)
      .replace("{id}", reportId ?? "REP-ZZZZZZZZZZ");
    const body =
      route.method === "post"
        ? JSON.stringify({
            walletAddress: wallet,
            callerAddress: lender.address,
            ...(id === "chat" ? { message: "is it trustworthy?" } : {}),
            ...(id === "screenBatch" ? { wallets: [wallet] } : {}),
          })
        : undefined;
    return { method: route.method.toUpperCase(), path, headers: body ? json : {}, body };
  };

  beforeAll(async () => {
    env = await indexedDevnet({ wallets: 4, months: 12, seed: 31 });
    devnet = env.devnet;
    indexer = await env.index();
    await waitForBlock(indexer, devnet.manifest.headBlock);
    lender = devnet.manifest.lenders[1] as unknown as typeof lender;
    wallet = devnet.manifest.personas.salaried!.address;
    treasury = devnet.manifest.service.treasury.address;
    doc = (await send({ method: "GET", path: "/openapi.json" })).body;
    unpinnedCid = await cidOf(new TextEncoder().encode("nothing pinned"));
  }, 240_000);

  afterAll(() => env?.stop());

  it("publishes a valid OpenAPI 3.1 document, the same at /openapi.json and /api/openapi.json", async () => {
    const result = await new Validator().validate(structuredClone(doc));
    expect(result.errors ?? null).toBeNull();
    expect(result.valid).toBe(true);
    expect((await send({ method: "GET", path: "/api/openapi.json" })).body).toEqual(doc);
  });

  it("documents every route the app serves, and serves every documented operation", async () => {
    const app = createApp({
      db: undefined as never,
      target: { network: "devnet", tokens: [], tracked: null, schema: "unused", reporters: [], sanctions: null },
      payments: createPayments(devnetPaymentSettings(devnet.manifestPath), undefined as never),
      ipfs: undefined as never,
    });
    const served = new Set(
      app.routes.filter((r) => r.method !== "ALL").map((r) => `${r.method} ${r.path.replace(/:(\w+)/g, "{$1}")}`),
    );
    const documented = new Set(
      Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`)),
    );
    // Pages and the document's old address are served but are not API operations.
    const notOperations = [
      "GET /docs",
      "GET /docs/scalar.js",
      "GET /api/openapi.json",
      "GET /api/agent/verify/{id}/badge.svg",
    ];
    expect([...served].filter((r) => !notOperations.includes(r)).sort()).toEqual([...documented].sort());
    for (const entry of ROUTES) expect(documented).toContain(`${entry.route.method.toUpperCase()} ${entry.route.path}`);

    // Unpaid calls, none changing anything: all at once.
    const answers = await Promise.all(
      [...documented].map(async (operation) => {
        const [method, path] = operation.split(" ") as [string, string];
        return [
          operation,
          await send({ method, path: path.replace("{address}", wallet).replace("{signal}", "reputation") }),
        ] as const;
      }),
    );
    for (const [operation, res] of answers)
      expect(
        [404, 405].includes(res.status) && ["not_found", "method_not_allowed"].includes(res.body?.error?.code),
        operation,
      ).toBe(false);
  });

  it("answers every route as documented when called properly, paid routes with x402Billing", async () => {
    for (const entry of CALLED) {
      const id = entry.route.operationId!;
      const paid = entry.route.security !== undefined;
      const call = valid(id);
      const res = await send({
        ...call,
        headers: { ...call.headers, ...(paid ? await pay(id === "report" ? 100_000n : undefined) : {}) },
      });
      expect(res.status, id).toBe(200);
      if (id === "report") reportId = res.body.reportId;
      if (id === "statement") pinnedCid = res.body.cid;
      // A file (GET /ipfs/{cid}) is checked against the media types its 200 documents; JSON against its schema.
      const type = res.headers.get("content-type")!;
      if (!type.startsWith("application/json"))
        expect(Object.keys(doc.paths[entry.route.path]!.get!.responses["200"]!.content!), id).toContain(
          type.split(";")[0],
        );
      else expect(documentMismatch(doc, call.method, entry.route.path, 200, res.body), id).toBe("");
      // The signal read comes after this payer's screen of the same wallet: free, and billed as such.
      const charged =
        id === "signal"
          ? { chargedUsdt: "0.00", chargedUnits: "0" }
          : id === "report"
            ? { chargedUsdt: "0.10", chargedUnits: "100000" }
            : { chargedUsdt: "0.01", chargedUnits: "10000" };
      if (paid)
        expect(res.body.x402Billing, id).toMatchObject({
          ...charged,
          token: "USDT",
          payer: lender.address.toLowerCase(),
        });
    }
  });

  it("counts the paid calls just answered in GET /api/stats: served per route, revenue per token, distinct payers", async () => {
    // Every paid route once at 0.01 (the free signal read at 0), the report at 0.10, all in USDT.
    const paidRoutes = CALLED.filter((r) => r.route.security !== undefined).length;
    const revenue = String(10_000n * BigInt(paidRoutes - 2) + 100_000n);
    const usdtUnits = (body: any) => body.served?.revenue?.find((t: { symbol: string }) => t.symbol === "USDT")?.units;
    // The ledger's figures are at most 2 s old: read until they count every call (the revenue only
    // grows), or once more after 2.1 s.
    const read = async () => (await send({ method: "GET", path: "/api/stats" })).body;
    const deadline = Date.now() + 2_100;
    let stats = await read();
    while (usdtUnits(stats) !== revenue && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, Math.min(200, Math.max(1, deadline - Date.now()))));
      stats = await read();
    }
    if (usdtUnits(stats) !== revenue) stats = await read(); // asked after the 2.1 s, as a reader would
    const { served, lag } = stats;
    expect(lag).not.toBeNull();
    expect(served).toMatchObject({ screens: 1, reports: 1, statements: 1, analyses: 2, payers: 1 });
    expect(
      served.byRoute.find((r: { route: string }) => r.route === "GET /api/wallet/{address}/signals/{signal}"),
    ).toMatchObject({ calls: 1, free: 1 });
    expect(usdtUnits(stats)).toBe(revenue);
  });

  it("refuses one bad request of each kind on every route with its status and code, shaped as documented, charging nothing", async () => {
    const before = await treasuryUsdt();
    const cases: [name: string, call: Call, status: number, code: string][] = [];
    const big = "x".repeat(BODY_LIMIT_BYTES + 1);
    for (const entry of CALLED) {
      const { route } = entry;
      const id = route.operationId!;
      const ok = valid(id);
      const paid = route.security !== undefined;
      const other = route.method === "get" ? "DELETE" : "GET";
      cases.push([`${id}: wrong method`, { ...ok, method: other, body: undefined }, 405, "method_not_allowed"]);
      if (route.method === "post") {
        cases.push([`${id}: malformed JSON`, { ...ok, body: "{not json" }, 400, "invalid_json"]);
        cases.push([
          `${id}: not JSON`,
          { ...ok, headers: { "content-type": "text/plain" }, body: "walletAddress=0x1" },
          415,
          "unsupported_media_type",
        ]);
        cases.push([
          `${id}: wrong shape`,
          { ...ok, body: JSON.stringify({ walletAddress: "0x123" }) },
          400,
          "invalid_request",
        ]);
        cases.push([
          `${id}: body over the limit`,
          { ...ok, body: JSON.stringify({ walletAddress: wallet, pad: big }) },
          413,
          "body_too_large",
        ]);
        cases.push([
          `${id}: wrong address checksum`,
          { ...ok, body: (ok.body as string).replaceAll(wallet, miscased()) },
          400,
          "invalid_request",
        ]);
      }
      if (route.path.includes("{address}")) {
        // With a payment: unpaid and bodiless, any paid call is the crawlers' probe, answered 402.
        const headers = paid ? { ...ok.headers, ...(await pay()) } : ok.headers;
        cases.push([
          `${id}: bad address`,
          { ...ok, headers, path: ok.path.replace(wallet, "0x123") },
          400,
          "invalid_address",
        ]);
        cases.push([
          `${id}: wrong address checksum`,
          { ...ok, headers, path: ok.path.replace(wallet, miscased()) },
          400,
          "invalid_address",
        ]);
        if (paid)
          cases.push([
            `${id}: bad address, unpaid`,
            { ...ok, path: ok.path.replace(wallet, "0x123") },
            402,
            "payment_required",
          ]);
      }
      if (paid) {
        cases.push([`${id}: no payment`, ok, 402, "payment_required"]);
        cases.push([
          `${id}: malformed payment`,
          { ...ok, headers: { ...ok.headers, "x-payment": "garbage" } },
          400,
          "payment_malformed",
        ]);
        cases.push([
          `${id}: payment header too large`,
          { ...ok, headers: { ...ok.headers, "x-payment": "x".repeat(9000) } },
          431,
          "payment_header_too_large",
        ]);
      }
    }
    // Names that are keys of every JS object: unknown signals, refused before any payment.
    for (const name of ["constructor", "__proto__", "toString", "valueOf", "hasOwnProperty", "nope"]) {
      cases.push([
        `signal ${name}`,
        { method: "GET", path: `/api/wallet/${wallet}/signals/${name}`, headers: await pay() },
        404,
        "unknown_signal",
      ]);
    }
    // Not an id: 0x and 63 or 65 hex digits, and a base-encoded string that is no CID.
    for (const id of [
      `0x${"a".repeat(63)}`,
      `0x${"a".repeat(65)}`,
      `0X${"a".repeat(64)}`,
      "abcdefghijklmnopqrstuvwxyz",
    ]) {
      cases.push([`verify: ${id}`, { method: "GET", path: `/api/agent/verify/${id}` }, 400, "invalid_report_id"]);
    }
    cases.push([
      "analyze: unknown field",
      { ...valid("analyze"), body: JSON.stringify({ walletAddress: wallet, fields: ["summary", "nope"] }) },
      400,
      "unknown_field",
    ]);

    for (const [name, call, status, code] of cases) {
      const res = await send(call);
      const got = res.body?.error?.code ?? res.body?.code;
      expect(`${name}: ${res.status} ${got}`).toBe(`${name}: ${status} ${code}`);
      expect(res.headers.get("content-type"), name).toMatch(/^application\/json/);
      const route = ROUTES.find((r) => name.startsWith(`${r.route.operationId}:`))?.route ?? {
        method: "get",
        path: "/api/wallet/{address}/signals/{signal}",
      };
      // 405 belongs to the path, not to an operation: the error body, and Allow naming the method served.
      if (status === 405)
        expect([res.headers.get("allow"), errorBodySchema.safeParse(res.body).success], name).toEqual([
          route.method.toUpperCase(),
          true,
        ]);
      else expect(documentMismatch(doc, call.method, route.path, status, res.body), name).toBe("");
    }
    expect(await treasuryUsdt()).toBe(before);
  });

  it("answers what no route declares in the same JSON: unknown routes, oversized headers, a 50 MB body refused while it streams", async () => {
    const unknown = await send({ method: "GET", path: "/api/nothing-here" });
    expect(unknown.status).toBe(404);
    expect(errorBodySchema.parse(unknown.body).error.code).toBe("not_found");
    expect((await send({ method: "GET", path: "/" })).body.error.code).toBe("not_found");

    const wrong = await send({ method: "PUT", path: "/api/lender/screen" });
    expect([wrong.status, wrong.body.error.code, wrong.headers.get("allow")]).toEqual([
      405,
      "method_not_allowed",
      "POST",
    ]);
    // A route's own method with a trailing slash: no such route (not a 405 naming the very method used).
    const slash = await send({ method: "GET", path: "/api/agent/verify/REP-ZZZZZZZZZZ/" });
    expect([slash.status, slash.body.error.code, slash.headers.get("allow")]).toEqual([404, "not_found", null]);

    const huge = await send({ method: "GET", path: "/api/stats", headers: { "x-padding": "y".repeat(20_000) } });
    expect([huge.status, errorBodySchema.parse(huge.body).error.code]).toEqual([431, "header_too_large"]);

    // A 50 MB body, streamed: refused once the limit is passed, long before it is all sent.
    let sent = 0;
    const chunk = new Uint8Array(64 * 1024).fill(32);
    const stream = new ReadableStream({
      pull(controller) {
        if (sent >= 50 * 1024 * 1024) return controller.close();
        sent += chunk.length;
        controller.enqueue(chunk);
      },
    });
    const streamed = await send({ method: "POST", path: "/api/lender/screen", headers: json, body: stream }).catch(
      (error: Error) => ({ status: 0, body: error.message, headers: new Headers() }),
    );
    // The 413 comes while the client is still writing: under load the socket can be closed under the
    // writer before the client reads the answer (status 0: EPIPE/ECONNRESET). Either way it was refused.
    if (streamed.status !== 0) expect([streamed.status, streamed.body?.error?.code]).toEqual([413, "body_too_large"]);
    // Refused while it streams: the client is stopped long before the 50 MB are sent (how far it got depends on load).
    expect(sent).toBeLessThan(25 * 1024 * 1024);
  });

  it("takes an address in one letter case or checksummed, and refuses a wrong EIP-55 checksum saying so", async () => {
    const screen = (walletAddress: string) =>
      send({ method: "POST", path: "/api/lender/screen", headers: json, body: JSON.stringify({ walletAddress }) });
    for (const form of [wallet.toLowerCase(), `0x${wallet.slice(2).toUpperCase()}`, getAddress(wallet)])
      expect((await screen(form)).status, form).toBe(402);
    const body = await screen(miscased());
    expect([body.status, body.body.error.code]).toEqual([400, "invalid_request"]);
    expect(body.body.error.message).toMatch(/^walletAddress: has a wrong EIP-55 checksum/);
    // With a payment: unpaid and bodiless, the call is the crawlers' probe (a 402); refused before it is taken.
    const path = await send({ method: "GET", path: `/api/wallet/${miscased()}/analysis`, headers: await pay() });
    expect([path.status, path.body.error.code]).toEqual([400, "invalid_address"]);
    expect(path.body.error.message).toMatch(/^address: has a wrong EIP-55 checksum/);
    const chat = await send({
      method: "POST",
      path: "/api/agent/chat",
      headers: json,
      body: JSON.stringify({ message: `is ${miscased()} trustworthy?` }),
    });
    expect([chat.status, chat.body.error.code]).toEqual([400, "invalid_address"]);
    expect(chat.body.error.message).toContain(`"${miscased()}" in the message has a wrong EIP-55 checksum`);
  });

  it("closes the connection after a 413: the client is told, and a new connection is answered", async () => {
    const { hostname, port } = new URL(indexer.url);
    /** One request on a raw keep-alive connection: all the server sends, and whether it closed the connection. */
    const raw = (request: string) =>
      new Promise<{ text: string; closed: boolean }>((resolve, reject) => {
        const socket = connect(Number(port), hostname);
        let text = "";
        const timer = setTimeout(() => (socket.destroy(), resolve({ text, closed: false })), 5_000);
        socket.on("data", (d: Buffer) => (text += d));
        socket.on("error", reject);
        socket.on("close", () => (clearTimeout(timer), resolve({ text, closed: true })));
        socket.write(request);
      });
    const body = JSON.stringify({ walletAddress: wallet, pad: "x".repeat(BODY_LIMIT_BYTES) });
    const head = (length: number) =>
      `POST /api/lender/screen HTTP/1.1\r\nHost: ${hostname}\r\nConnection: keep-alive\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
    // The whole body sent; and only its first half, the rest never read by the server.
    for (const request of [head(body.length) + body, head(body.length) + body.slice(0, body.length / 2)]) {
      const { text, closed } = await raw(request);
      expect(text).toMatch(/^HTTP\/1\.1 413 /);
      expect(text).toMatch(/\r\nconnection: close\r\n/i);
      expect(text).toContain('"code":"body_too_large"');
      expect(closed).toBe(true);
    }
    // fetch (undici, keep-alive): the 413, then the next request on a new connection.
    const refused = await send({ method: "POST", path: "/api/lender/screen", headers: json, body });
    expect([refused.status, refused.body.error.code, refused.headers.get("connection")]).toEqual([
      413,
      "body_too_large",
      "close",
    ]);
    expect((await send({ method: "GET", path: "/api/x402/config" })).status).toBe(200);
  });

  it("accepts the original service's signal names as aliases and lists them", async () => {
    const alias = await send({
      method: "GET",
      path: `/api/wallet/${wallet}/signals/loan-capacity`,
      headers: await pay(),
    });
    expect(alias.status).toBe(200);
    expect(alias.body).toMatchObject({
      name: "loanCapacity",
      value: { minUsd: expect.any(Number), maxUsd: expect.any(Number), currency: "USD" },
    });
    const income = await send({
      method: "GET",
      path: `/api/wallet/${wallet}/signals/monthly-income`,
      headers: await pay(),
    });
    const all = await send({ method: "GET", path: `/api/wallet/${wallet}/signals`, headers: await pay() });
    expect(all.body.aliases).toEqual({
      "monthly-income": "monthlyIncomeUsd",
      "financial-health": "financialHealth",
      "reputation-score": "reputation",
      "loan-capacity": "loanCapacity",
      assessment: "assessment",
      statement: "latestStatement",
    });
    expect(income.body.value).toBe(all.body.signals.find((s: { name: string }) => s.name === "monthlyIncomeUsd").value);
    const param = (
      doc.paths["/api/wallet/{address}/signals/{signal}"]!.get as unknown as {
        parameters: { name: string; schema: { enum: string[] } }[];
      }
    ).parameters.find((p) => p.name === "signal")!;
    expect(param.schema.enum).toEqual(
      expect.arrayContaining([
        "monthly-income",
        "financial-health",
        "reputation-score",
        "loan-capacity",
        "assessment",
        "drainSharePct",
      ]),
    );
  });

  it("bills exactly what it took: an overpayment shows to the token's 6 decimals", async () => {
    const before = await treasuryUsdt();
    const res = await send({ ...valid("screen"), headers: { ...json, ...(await pay(15_000n)) } });
    expect(res.status).toBe(200);
    expect(res.body.x402Billing).toMatchObject({ chargedUsdt: "0.015", chargedUnits: "15000" });
    expect((await treasuryUsdt()) - before).toBe(15_000n);
  });

  it("states the free-read rule in one sentence: 402 answers, the config, the document and docs/payments.md", async () => {
    const config = (await send({ method: "GET", path: "/api/x402/config" })).body;
    const rule = config.prices.find((p: { route: string }) => p.route === "GET /api/wallet/{address}/signals/{signal}")
      .freeWhen as string;
    expect(rule).toMatch(/^Free to a payer who paid for POST \/api\/lender\/screen/);
    const unpaid = await send({ method: "GET", path: `/api/wallet/${wallet}/signals/reputation` });
    expect(unpaid.body.freeWhen).toBe(rule);
    expect(
      (doc.paths["/api/wallet/{address}/signals/{signal}"]!.get as unknown as { "x-price": { freeWhen: string } })[
        "x-price"
      ].freeWhen,
    ).toBe(rule);
    expect(readFileSync(new URL("../../docs/payments.md", import.meta.url), "utf8")).toContain(rule);
  });
});
