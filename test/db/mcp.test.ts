import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { x402Client } from "@x402/core/client";
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentPayload, PaymentRequired } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm";
import { validateDiscoveryExtension, validateDiscoveryExtensionSpec } from "@x402/extensions/bazaar";
import { Ajv2020 } from "ajv/dist/2020.js";
import { getAddress, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BRIEF_MAX_CHARS } from "../../api/discovery/brief.ts";
import { lenderScreenResultSchema } from "../../api/screen/schema.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { markedBlock, runExample } from "../support/examples.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { type Indexer, testDatabase, waitForBlock } from "../support/indexer.ts";
import { signAuthorization, specHeader, tokenBalance, treasuryHolds } from "../support/payments.ts";

const root = fileURLToPath(new URL("../..", import.meta.url));
const EXAMPLE = "docs/examples/mcp-agent.ts";

// Agents' ways in, against the service as Ponder serves it over an indexed devnet: the MCP server
// (the SDK's own client, paying with the x402 MCP transport), Bazaar metadata on every 402, and the
// well-known discovery documents.
let env: IndexedDevnet;
let devnet: TestDevnet;
let indexer: Indexer;
let doc: { paths: Record<string, Record<string, Operation>> };

type Operation = {
  operationId: string;
  parameters?: { name: string; in: string; schema: object }[];
  requestBody?: { content: Record<string, { schema: { properties?: Record<string, object> } }> };
  responses: Record<string, { content?: Record<string, { schema: object }> }>;
  "x-price": { amountUnits: string };
};

beforeAll(async () => {
  env = await indexedDevnet({ wallets: 6, months: 6, seed: 25 });
  devnet = env.devnet;
  indexer = await env.index();
  await waitForBlock(indexer, devnet.manifest.headBlock);
  doc = (await (await fetch(`${indexer.url}/openapi.json`)).json()) as typeof doc;
}, 240_000);

afterAll(() => env?.stop());

const ajv = new Ajv2020({ strict: false });
const paidOperations = () =>
  Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops)
      .filter(([, op]) => BigInt(op["x-price"].amountUnits) > 0n)
      .map(([method, op]) => ({ method: method.toUpperCase(), path, op })),
  );

describe(`MCP tools paid with x402 (${testDatabase})`, () => {
  let mcp: Client;
  let lender: { address: Hex; privateKey: Hex };
  let payer: x402Client;
  const treasury = () => treasuryHolds(devnet.manifest);
  const lenderHolds = () => tokenBalance(devnet.manifest.rpcUrl, devnet.manifest.tokens.USDT.address, lender.address);
  const salaried = () => devnet.manifest.personas.salaried!.address;
  /** A fresh payment for what `tool` asks, signed by the lender in USDT (the first accepted token). */
  const pay = async (tool: string, args: Record<string, unknown>) => {
    const unpaid = await mcp.callTool({ name: tool, arguments: args });
    expect(unpaid.isError).toBe(true);
    return payer.createPaymentPayload(unpaid.structuredContent as PaymentRequired);
  };

  beforeAll(async () => {
    lender = devnet.manifest.lenders[1] as unknown as typeof lender;
    payer = x402Client.fromConfig({
      schemes: [{ network: "eip155:42220", client: new ExactEvmScheme(privateKeyToAccount(lender.privateKey)) }],
      spendControls: {
        allowedAssets: [devnet.manifest.tokens.USDT].map((t) => ({
          network: "eip155:42220" as const,
          asset: t.address,
          maxAmountPerPayment: "1000000",
        })),
      },
    });
    mcp = new Client({ name: "test-agent", version: "1.0.0" });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${indexer.url}/mcp`)));
  });

  afterAll(() => mcp?.close());

  it("lists every tool with the input and output schemas of its HTTP route in /openapi.json", async () => {
    const { tools } = await mcp.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(
      [
        "analyze_wallet",
        "ask_about_wallet",
        "issue_passport",
        "make_statement",
        "screen_wallet",
        "screen_wallets",
        "service_stats",
        "verify_passport",
        "wallet_history",
        "wallet_signal",
        "wallet_signals",
      ].sort(),
    );
    const operations = Object.values(doc.paths).flatMap((ops) => Object.values(ops));
    for (const tool of tools) {
      const ok = (tool.outputSchema as unknown as { anyOf: object[] }).anyOf[0];
      const op = operations.find(
        (o) => JSON.stringify(o.responses["200"]?.content?.["application/json"]?.schema) === JSON.stringify(ok),
      );
      expect(op, `${tool.name}: its output is a route's 200 answer`).toBeDefined();
      const params = Object.fromEntries((op!.parameters ?? []).map((p) => [p.name, p.schema]));
      const body = op!.requestBody?.content["application/json"]?.schema.properties ?? {};
      const input = tool.inputSchema.properties as Record<string, object>;
      expect(Object.keys(input).sort(), tool.name).toEqual(Object.keys({ ...params, ...body }).sort());
      for (const [name, schema] of Object.entries(body)) expect(input[name], `${tool.name}.${name}`).toEqual(schema);
      expect(tool.description!.length).toBeGreaterThan(40);
      expect(tool.annotations).toMatchObject({
        readOnlyHint: expect.any(Boolean),
        idempotentHint: expect.any(Boolean),
      });
    }
    expect(tools.find((t) => t.name === "screen_wallet")!.annotations).toMatchObject({
      readOnlyHint: true,
      idempotentHint: true,
    });
    expect(tools.find((t) => t.name === "issue_passport")!.annotations).toMatchObject({ readOnlyHint: false });
  });

  it("serves POST only: no session to stream to (GET) or to close (DELETE)", async () => {
    for (const method of ["GET", "DELETE"]) {
      const res = await fetch(`${indexer.url}/mcp`, { method, headers: { accept: "text/event-stream" } });
      expect(res.status, method).toBe(405);
      expect(res.headers.get("allow")).toBe("POST");
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("method_not_allowed");
    }
  });

  it("answers a free tool without payment", async () => {
    const stats = await mcp.callTool({ name: "service_stats", arguments: {} });
    expect(stats.isError).toBeFalsy();
    expect(stats.structuredContent).toMatchObject({ chainId: 42220, indexing: { current: true } });
    const missing = await mcp.callTool({ name: "verify_passport", arguments: { id: "REP-AAAAAAAAAA" } });
    expect(missing.isError).toBe(true);
  });

  it("answers a paid tool without payment with the spec's payment-required result, charging nothing", async () => {
    const before = await treasury();
    const result = await mcp.callTool({ name: "screen_wallet", arguments: { walletAddress: salaried() } });
    expect(result.isError).toBe(true);
    const required = result.structuredContent as PaymentRequired & { code: string; extensions: Record<string, any> };
    expect(required).toMatchObject({
      x402Version: 2,
      code: "payment_required",
      resource: { url: "mcp://tool/screen_wallet", mimeType: "application/json" },
      accepts: [
        {
          scheme: "exact",
          network: "eip155:42220",
          amount: "10000",
          asset: getAddress(devnet.manifest.tokens.USDT.address),
        },
        { amount: "10000", asset: getAddress(devnet.manifest.tokens.USDC.address) },
      ],
    });
    expect(JSON.parse((result.content as { text: string }[])[0]!.text)).toEqual(required);
    const bazaar = required.extensions.bazaar;
    expect(bazaar.info.input).toMatchObject({ type: "mcp", toolName: "screen_wallet", transport: "streamable-http" });
    expect(validateDiscoveryExtension(bazaar)).toEqual({ valid: true });
    expect(required.resource.description!.length).toBeLessThan(BRIEF_MAX_CHARS);
    expect(await treasury()).toBe(before);
  });

  it("pays from prepaid credit with the credit token of the MCP connection: nothing settled per call", async () => {
    const { USDT } = devnet.manifest.tokens;
    const bought = await fetch(`${indexer.url}/api/credit`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-payment": specHeader(
          await signAuthorization(lender.privateKey, USDT, {
            to: devnet.manifest.service.treasury.address,
            value: 100_000n,
          }),
          USDT.address,
        ),
      },
      body: JSON.stringify({ amount: "0.10" }),
    });
    expect(bought.status).toBe(200);
    const { creditToken } = (await bought.json()) as { creditToken: string };
    const agent = new Client({ name: "looping-agent", version: "1.0.0" });
    await agent.connect(
      new StreamableHTTPClientTransport(new URL(`${indexer.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${creditToken}` } },
      }),
    );
    try {
      const before = await treasury();
      const result = await agent.callTool({ name: "screen_wallet", arguments: { walletAddress: salaried() } });
      expect(result.isError, JSON.stringify(result.structuredContent)).toBeFalsy();
      expect(lenderScreenResultSchema.parse(result.structuredContent).x402Billing).toMatchObject({
        chargedUsdt: "0.01",
        creditLeft: "0.09",
      });
      expect(await treasury()).toBe(before);
    } finally {
      await agent.close();
    }
  });

  let paidPayment: PaymentPayload;
  let paidAnswer: unknown;

  it("pays with an EIP-3009 authorization in _meta: the answer, the settlement, exactly the price moved", async () => {
    const args = { walletAddress: salaried(), callerAddress: lender.address };
    const before = await treasury();
    paidPayment = await pay("screen_wallet", args);
    const result = await mcp.callTool({
      name: "screen_wallet",
      arguments: args,
      _meta: { "x402/payment": paidPayment },
    });
    expect(result.isError, JSON.stringify(result.structuredContent)).toBeFalsy();
    const screen = lenderScreenResultSchema.parse(result.structuredContent);
    expect(screen.status).toBe("completed");
    expect(JSON.parse((result.content as { text: string }[])[0]!.text)).toEqual(result.structuredContent);
    expect(result._meta?.["x402/payment-response"]).toMatchObject({
      success: true,
      network: "eip155:42220",
      transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      payer: expect.stringMatching(new RegExp(lender.address.slice(2), "i")),
    });
    expect((await treasury()) - before).toBe(10_000n);
    paidAnswer = result.structuredContent;
  });

  it("serves one payment once across MCP and HTTP, and charges it once", async () => {
    const args = { walletAddress: salaried(), callerAddress: lender.address };
    const before = await treasury();
    const again = await mcp.callTool({
      name: "screen_wallet",
      arguments: args,
      _meta: { "x402/payment": paidPayment },
    });
    expect(again.isError).toBeFalsy();
    expect(again.structuredContent).toEqual(paidAnswer);
    const overHttp = await fetch(`${indexer.url}/api/lender/screen`, {
      method: "POST",
      // The signed authorization, without the discovery metadata the client echoed from the tool's 402.
      headers: {
        "content-type": "application/json",
        "payment-signature": encodePaymentSignatureHeader({ ...paidPayment, extensions: undefined }),
      },
      body: JSON.stringify(args),
    });
    expect(overHttp.status).toBe(200);
    expect(await overHttp.json()).toEqual(paidAnswer);
    // The same payment for another request of the same price is refused, over either transport.
    const other = await mcp.callTool({
      name: "wallet_history",
      arguments: { address: salaried() },
      _meta: { "x402/payment": paidPayment },
    });
    expect(other.isError).toBe(true);
    expect(other.structuredContent).toMatchObject({ error: { code: "payment_reused" } });
    expect(await treasury()).toBe(before);
  });

  it("refuses a payment made for one tool on a dearer one, charging nothing", async () => {
    const before = await lenderHolds();
    const payment = await pay("wallet_history", { address: salaried() });
    const result = await mcp.callTool({
      name: "issue_passport",
      arguments: { walletAddress: salaried(), callerAddress: lender.address },
      _meta: { "x402/payment": payment },
    });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({
      x402Version: 2,
      code: "insufficient_amount",
      resource: { url: "mcp://tool/issue_passport" },
      accepts: [expect.objectContaining({ amount: "100000" }), expect.anything()],
    });
    expect(await lenderHolds()).toBe(before);
  });

  it("refuses bad input with the HTTP error codes, never crashing, never charging", async () => {
    const before = await lenderHolds();
    await expect(mcp.callTool({ name: "no_such_tool", arguments: {} })).rejects.toThrow(/Unknown tool/);
    const payment = await pay("screen_wallet", { walletAddress: salaried() });
    const wrongType = await mcp.callTool({
      name: "screen_wallet",
      arguments: { walletAddress: 42 },
      _meta: { "x402/payment": payment },
    });
    expect(wrongType.isError).toBe(true);
    expect(wrongType.structuredContent).toMatchObject({ error: { code: "invalid_request" } });
    const badPath = await mcp.callTool({
      name: "wallet_history",
      arguments: { address: "0x123" },
      _meta: { "x402/payment": payment },
    });
    expect(badPath.structuredContent).toMatchObject({ error: { code: "invalid_address" } });
    const missingPath = await mcp.callTool({
      name: "wallet_history",
      arguments: {},
      _meta: { "x402/payment": payment },
    });
    expect(missingPath.structuredContent).toMatchObject({ error: { code: "invalid_request" } });
    const badPayment = await mcp.callTool({
      name: "screen_wallet",
      arguments: { walletAddress: salaried() },
      _meta: { "x402/payment": { x402Version: 2, nonsense: true } },
    });
    expect(badPayment.structuredContent).toMatchObject({ error: { code: "payment_malformed" } });
    // Arguments past the body limit: the endpoint refuses the request (HTTP 413 body_too_large).
    await expect(
      mcp.callTool({ name: "ask_about_wallet", arguments: { message: "x".repeat(40_000) } }),
    ).rejects.toThrow(/413|body_too_large/);
    const tooLong = await mcp.callTool({
      name: "ask_about_wallet",
      arguments: { message: "y".repeat(2_001), walletAddress: salaried() },
      _meta: { "x402/payment": payment },
    });
    expect(tooLong.structuredContent).toMatchObject({ error: { code: "invalid_message" } });
    // The client still works, and the payment offered with bad input was never taken: it pays now.
    const good = await mcp.callTool({
      name: "screen_wallet",
      arguments: { walletAddress: salaried() },
      _meta: { "x402/payment": payment },
    });
    expect(good.isError, JSON.stringify(good.structuredContent)).toBeFalsy();
    expect(before - (await lenderHolds())).toBe(10_000n);
  });
});

describe(`x402 discovery (${testDatabase})`, () => {
  const concrete = (path: string) =>
    path
      .replace("{address}", devnet.manifest.personas.salaried!.address)
      .replace("{signal}", "reputation")
      .replace("{id}", "00000000-0000-4000-8000-000000000000");

  it("answers every paid route's unpaid, empty probe 402 with Bazaar metadata the package validates", async () => {
    const operations = paidOperations();
    expect(operations.length).toBeGreaterThanOrEqual(10);
    for (const { method, path } of operations) {
      const res = await fetch(`${indexer.url}${concrete(path)}`, { method });
      expect(res.status, `${method} ${path}`).toBe(402);
      const body = (await res.json()) as { extensions: Record<string, any>; accepts: { description: string }[] };
      const bazaar = body.extensions.bazaar;
      expect(validateDiscoveryExtension(bazaar), `${method} ${path}`).toEqual({ valid: true });
      expect(validateDiscoveryExtensionSpec(bazaar), `${method} ${path}`).toEqual({ valid: true });
      expect(bazaar.info.input.method).toBe(method);
      if (path.includes("{")) expect(bazaar.routeTemplate).toBe(path.replace(/\{(\w+)\}/g, ":$1"));
      expect(body.accepts[0]!.description.length).toBeLessThan(BRIEF_MAX_CHARS);
      // The v2 header carries it too, less the answer's schema (a header over 16 KB is refused by Node's fetch).
      const header = decodePaymentRequiredHeader(res.headers.get("payment-required")!);
      expect(validateDiscoveryExtension(header.extensions!.bazaar as never)).toEqual({ valid: true });
      expect(header.resource.description!.length).toBeLessThan(BRIEF_MAX_CHARS);
    }
  });

  it("declares input schemas that accept a real request and refuse a bad one", async () => {
    const res = await fetch(`${indexer.url}/api/lender/screen`, { method: "POST" });
    const bazaar = ((await res.json()) as { extensions: Record<string, any> }).extensions.bazaar;
    const validate = ajv.compile(bazaar.schema.properties.input.properties.body);
    expect(validate({ walletAddress: devnet.manifest.personas.salaried!.address })).toBe(true);
    expect(validate({ walletAddress: "0x123" })).toBe(false);
    expect(validate({})).toBe(false);
    const signals = await fetch(`${indexer.url}${concrete("/api/wallet/{address}/signals/{signal}")}`);
    const declared = ((await signals.json()) as { extensions: Record<string, any> }).extensions.bazaar;
    expect(declared.routeTemplate).toBe("/api/wallet/:address/signals/:signal");
    expect(declared.info.input.pathParams).toEqual({
      address: devnet.manifest.personas.salaried!.address,
      signal: "reputation",
    });
  });

  it("still refuses bad input with a payment before charging (a 400, not the probe's 402)", async () => {
    const res = await fetch(`${indexer.url}/api/lender/screen`, {
      method: "POST",
      headers: { "content-type": "application/json", "payment-signature": "e30=" },
      body: "",
    });
    expect(res.status).toBe(400);
    const unpaidBad = await fetch(`${indexer.url}/api/lender/screen`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ walletAddress: "0x123" }),
    });
    expect(unpaidBad.status).toBe(400);
  });

  it("lists exactly the paid routes of /openapi.json at /.well-known/x402, and every route in /llms.txt", async () => {
    const wellKnown = (await (await fetch(`${indexer.url}/.well-known/x402`)).json()) as {
      version: number;
      resources: string[];
      instructions: string;
    };
    expect(wellKnown.version).toBe(1);
    expect(wellKnown.resources.sort()).toEqual(
      paidOperations()
        .map((o) => `${o.method} ${o.path}`)
        .sort(),
    );
    expect(wellKnown.instructions).toMatch(/x402/);
    const llms = await fetch(`${indexer.url}/llms.txt`);
    expect(llms.headers.get("content-type")).toMatch(/^text\/plain/);
    const text = await llms.text();
    for (const [path, ops] of Object.entries(doc.paths))
      for (const method of Object.keys(ops))
        expect(text, `${method} ${path}`).toContain(`${method.toUpperCase()} ${path}`);
    expect(text).toContain(`${indexer.url}/openapi.json`);
    expect(text).toContain(`${indexer.url}/mcp`);
  });
});

describe("the README's agent quickstart", () => {
  const readme = () => readFileSync(join(root, "README.md"), "utf8");

  it("embeds the agent example verbatim", () => {
    const block = markedBlock(readme(), "mcp-agent", "ts");
    expect(block, "README block between the mcp-agent markers").toBeDefined();
    expect(block).toBe(readFileSync(join(root, EXAMPLE), "utf8"));
  });

  it("runs the agent example as written: tools listed, a completed screen paid exactly 0.01", async () => {
    const held = () => treasuryHolds(devnet.manifest);
    const before = await held();
    const stdout = await runExample(EXAMPLE, { API_URL: indexer.url, DEVNET_MANIFEST: devnet.manifestPath });
    const newline = stdout.indexOf("\n");
    const [listing, rest] = [stdout.slice(0, newline), stdout.slice(newline + 1)];
    expect(listing).toMatch(/^tools: .*screen_wallet/);
    const [result, payment] = rest.split("\npayment: ");
    expect(lenderScreenResultSchema.parse(JSON.parse(result!)).status).toBe("completed");
    expect(JSON.parse(payment!)).toMatchObject({ success: true, network: "eip155:42220" });
    expect((await held()) - before).toBe(10_000n);
  });

  it("gives desktop MCP clients a config that reaches the tools", async () => {
    const block = markedBlock(readme(), "mcp-config", "json");
    expect(block, "README block between the mcp-config markers").toBeDefined();
    const config = JSON.parse(block!) as { mcpServers: Record<string, { url: string }> };
    const [server] = Object.values(config.mcpServers);
    expect(server!.url).toBe("http://127.0.0.1:42069/mcp");
    const client = new Client({ name: "desktop", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(server!.url.replace("http://127.0.0.1:42069", indexer.url))),
    );
    try {
      expect((await client.listTools()).tools.length).toBe(11);
    } finally {
      await client.close();
    }
  });
});
