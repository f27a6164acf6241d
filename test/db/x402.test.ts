import { mkdtempSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from "@x402/core/http";
import puppeteer, { type Browser } from "puppeteer-core";
import type { Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DOCS_TITLE } from "../../api/openapi/docs.ts";
import { lenderScreenResultSchema } from "../../api/screen/schema.ts";
import { artifactsDir } from "../support/artifacts.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { markedBlock, runExample } from "../support/examples.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { healthyIntegrations, type Indexer, testDatabase, waitForBlock } from "../support/indexer.ts";
import { signAuthorization, specHeader, tokenBalance, treasuryHolds, x402Fetch } from "../support/payments.ts";

const root = fileURLToPath(new URL("../..", import.meta.url));
const EXAMPLE = "docs/examples/first-paid-call.ts";

// The service as lenders and readers first meet it (Ponder serving the API over the indexed
// devnet): one devnet and indexer for the file.
let env: IndexedDevnet;
let devnet: TestDevnet;
let indexer: Indexer;

beforeAll(async () => {
  env = await indexedDevnet({ wallets: 10, months: 12, seed: 9 });
  devnet = env.devnet;
  indexer = await env.index();
  await waitForBlock(indexer, devnet.manifest.headBlock);
}, 240_000);

afterAll(() => env?.stop());

// Paid by standard clients: the official @x402/fetch with a viem account, and the spec's X-PAYMENT JSON by hand.
describe(`x402 clients against the service (${testDatabase})`, () => {
  let treasury: Hex;
  let lender: { address: Hex; privateKey: Hex };
  const treasuryUsdt = () => tokenBalance(devnet.manifest.rpcUrl, devnet.manifest.tokens.USDT.address, treasury);
  const lenderUsdt = () => tokenBalance(devnet.manifest.rpcUrl, devnet.manifest.tokens.USDT.address, lender.address);

  beforeAll(() => {
    treasury = devnet.manifest.service.treasury.address;
    lender = devnet.manifest.lenders[1] as unknown as typeof lender;
  });

  it("publishes the payment configuration for free, ignoring any payment header", async () => {
    const res = await fetch(`${indexer.url}/api/x402/config`, { headers: { "x-payment": "not a payment" } });
    expect(res.status).toBe(200);
    const config = (await res.json()) as Record<string, any>;
    expect(config).toMatchObject({
      publicPayTo: treasury,
      chainId: 42220,
      network: "eip155:42220",
      settlement: { mode: "self", relayer: expect.any(String) },
    });
    expect(config.tokens).toEqual([
      {
        symbol: "USDT",
        address: devnet.manifest.tokens.USDT.address,
        decimals: 6,
        eip712: { name: "Tether USD", version: "1" },
      },
      {
        symbol: "USDC",
        address: devnet.manifest.tokens.USDC.address,
        decimals: 6,
        eip712: { name: "USDC", version: "2" },
      },
    ]);
    const price = (route: string) => config.prices.find((p: { route: string }) => p.route === route);
    expect(price("POST /api/lender/screen")).toMatchObject({ amountUnits: "10000", usd: 0.01, free: false });
    expect(price("POST /api/agent/report")).toMatchObject({ amountUnits: "100000", usd: 0.1 });
    expect(price("GET /api/agent/verify/{id}")).toMatchObject({ amountUnits: "0", free: true });
    expect(price("GET /api/wallet/{address}/signals/{signal}").freeWhen).toMatch(/within the cache lifetime/);
    const stats = await fetch(`${indexer.url}/api/stats`, { headers: { "payment-signature": "garbage" } });
    expect(stats.status).toBe(200);
  });

  it("publishes an OpenAPI document generated from the validating schemas, with every price", async () => {
    const doc = (await (await fetch(`${indexer.url}/api/openapi.json`)).json()) as Record<string, any>;
    expect(doc.openapi).toBe("3.1.0");
    const screen = doc.paths["/api/lender/screen"].post;
    expect(screen["x-price"]).toEqual({ amountUnits: "10000", usd: 0.01 });
    expect(screen.requestBody.content["application/json"].schema.required).toEqual(["walletAddress"]);
    expect(screen.responses["200"].content["application/json"].schema.required).toEqual(
      expect.arrayContaining(["status", "trust", "x402Billing"]),
    );
    expect(screen.responses["402"].content["application/json"].schema.properties.accepts).toBeDefined();
    expect(doc.paths["/api/wallet/{address}/signals/{signal}"].get["x-price"].freeWhen).toMatch(/10 minutes/);
    expect(doc.paths["/api/stats"].get["x-price"].usd).toBe(0);
  });

  it("reports the health of its integrations for free: chain, index, service store, settlement", async () => {
    const { res, body: health } = await healthyIntegrations(indexer, { headers: { "x-payment": "{}" } });
    expect(res.status).toBe(200);
    expect(health.status).toBe("ok");
    expect(health.integrations).toMatchObject({
      rpc: { status: "ok", headBlock: expect.any(Number) },
      indexer: { status: "ok", latestIndexedBlock: expect.any(Number) },
      serviceStore: { status: "ok" },
      settlement: { status: "ok", mode: "self", relayer: devnet.manifest.service.relayer.address },
    });
    expect(Number(health.integrations.settlement?.relayerGasCelo)).toBeGreaterThan(0);
  });

  it("answers an unpaid call with 402: the v1 body and the v2 PAYMENT-REQUIRED header", async () => {
    const wallet = devnet.manifest.personas.salaried!.address;
    const res = await fetch(`${indexer.url}/api/lender/screen`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ walletAddress: wallet }),
    });
    expect(res.status).toBe(402);
    const body = (await res.json()) as Record<string, any>;
    expect(body).toMatchObject({
      x402Version: 1,
      code: "payment_required",
      error: expect.stringMatching(/costs 0.01 USD/),
    });
    expect(body.accepts[0]).toMatchObject({
      scheme: "exact",
      network: "celo",
      maxAmountRequired: "10000",
      payTo: expect.stringMatching(new RegExp(treasury.slice(2), "i")),
      maxTimeoutSeconds: 300,
      extra: { name: "Tether USD", version: "1" },
    });
    const v2 = decodePaymentRequiredHeader(res.headers.get("payment-required")!);
    expect(v2.accepts.map((a) => [a.network, a.amount, a.asset.toLowerCase()])).toEqual([
      ["eip155:42220", "10000", devnet.manifest.tokens.USDT.address],
      ["eip155:42220", "10000", devnet.manifest.tokens.USDC.address],
    ]);
    expect(v2.resource.url).toMatch(/\/api\/lender\/screen$/);
  });

  it("is paid by the official x402 client on every paid route, each call moving exactly the price", async () => {
    const pay = x402Fetch(lender.privateKey, Object.values(devnet.manifest.tokens));
    const wallet = devnet.manifest.personas.merchant!.address;
    const post = (path: string, body: unknown) =>
      pay(`${indexer.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const calls: [string, () => Promise<Response>][] = [
      // The single-signal read first: before any paid analysis of this wallet it costs 0.01.
      ["signal", () => pay(`${indexer.url}/api/wallet/${wallet}/signals/verifiedMonthlyIncomeUsd`)],
      ["screen", () => post("/api/lender/screen", { walletAddress: wallet, callerAddress: lender.address })],
      [
        "analyze",
        () => post("/api/agent/analyze", { walletAddress: wallet, callerAddress: lender.address, fields: ["summary"] }),
      ],
      ["analysis", () => pay(`${indexer.url}/api/wallet/${wallet}/analysis`)],
      ["signals", () => pay(`${indexer.url}/api/wallet/${wallet}/signals`)],
      ["history", () => pay(`${indexer.url}/api/wallet/${wallet}/history`)],
    ];
    for (const [name, call] of calls) {
      const [treasuryBefore, lenderBefore] = [await treasuryUsdt(), await lenderUsdt()];
      const res = await call();
      expect(res.status, name).toBe(200);
      const receipt = decodePaymentResponseHeader(res.headers.get("payment-response")!);
      expect(receipt, name).toMatchObject({
        success: true,
        network: "eip155:42220",
        transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      });
      expect((await treasuryUsdt()) - treasuryBefore, name).toBe(10_000n);
      expect(lenderBefore - (await lenderUsdt()), name).toBe(10_000n);
      await res.json();
    }

    // Now that this lender has paid for analyses of the wallet, a single-signal read is free.
    const before = await treasuryUsdt();
    const free = await pay(`${indexer.url}/api/wallet/${wallet}/signals/drainSharePct`);
    expect(free.status).toBe(200);
    expect(((await free.json()) as { billing: unknown }).billing).toEqual({ chargedUnits: "0", freeRead: true });
    expect(await treasuryUsdt()).toBe(before);
  });

  it("is paid with the spec's X-PAYMENT JSON built by hand with viem, and bills what it charged", async () => {
    const wallet = devnet.manifest.personas.salaried!.address;
    const token = devnet.manifest.tokens.USDC;
    const signed = await signAuthorization(lender.privateKey, token, { to: treasury });
    const usdcBefore = await tokenBalance(devnet.manifest.rpcUrl, token.address, treasury);
    const res = await fetch(`${indexer.url}/api/lender/screen`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-payment": specHeader(signed, token.address) },
      body: JSON.stringify({ walletAddress: wallet, callerAddress: lender.address }),
    });
    expect(res.status).toBe(200);
    const result = lenderScreenResultSchema.parse(await res.json());
    expect(result.x402Billing).toMatchObject({
      chargedUsdt: "0.01",
      token: "USDC",
      chain: "eip155:42220",
      payer: lender.address.toLowerCase(),
    });
    expect(result.recommendation).toBe("approve");
    expect((await tokenBalance(devnet.manifest.rpcUrl, token.address, treasury)) - usdcBefore).toBe(10_000n);
    expect(decodePaymentResponseHeader(res.headers.get("x-payment-response")!).success).toBe(true);
  });
});

// The API reference in a real browser, and the README's first paid call run as written: on PGlite
// only, as a newcomer runs it (one browser run is enough: the page does not depend on the database;
// Postgres pays the same screen above and in screen.test.ts and requests.test.ts).
describe.runIf(testDatabase === "pglite")("the API reference and the README's first paid call (pglite)", () => {
  describe("/docs in headless Chromium", () => {
    let browser: Browser | undefined;
    afterAll(() => browser?.close());

    it("serves the Scalar bundle from the npm package, cacheable for good", async () => {
      const page = await (await fetch(`${indexer.url}/docs`)).text();
      const src = /<script src="([^"]+)"/.exec(page)?.[1];
      expect(src).toMatch(/^\/docs\/scalar\.js\?v=[0-9a-f]{16}$/);
      const res = await fetch(`${indexer.url}${src}`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
      expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
      expect((await res.text()).length).toBeGreaterThan(1_000_000);
      const again = await fetch(`${indexer.url}${src}`, { headers: { "if-none-match": res.headers.get("etag")! } });
      expect(again.status).toBe(304);
    });

    it("renders the reference with every route, fetching nothing but the service", async () => {
      const origin = new URL(indexer.url).origin;
      browser = await puppeteer.launch({
        executablePath: "/usr/bin/chromium",
        headless: true,
        args: ["--no-sandbox", "--headless=new"],
      });
      const page = await browser.newPage();
      await page.setViewport({ width: 1440, height: 1000 });
      // Every request is seen here; one for anywhere but the service is recorded and never sent.
      const requests: string[] = [];
      const errors: string[] = [];
      await page.setRequestInterception(true);
      page.on("request", (request) => {
        const url = request.url();
        requests.push(url);
        if (url.startsWith(`${origin}/`) || url.startsWith("data:") || url.startsWith("blob:")) void request.continue();
        else void request.abort("blockedbyclient");
      });
      page.on("pageerror", (error) => errors.push(String(error)));

      const res = await page.goto(`${indexer.url}/docs`, { waitUntil: "networkidle0", timeout: 60_000 });
      expect(res?.status()).toBe(200);
      await page.waitForFunction(`document.body.innerText.includes("/api/lender/screen")`, { timeout: 30_000 });
      const shot = join(mkdtempSync(join(artifactsDir(), "docs-")), "docs.png");
      await page.screenshot({ path: shot, fullPage: false });
      console.log(`screenshot of /docs: ${shot}`);

      expect(await page.title()).toBe(DOCS_TITLE);
      const text = (await page.evaluate("document.body.innerText")) as string;
      for (const path of [
        "/api/lender/screen",
        "/api/agent/analyze",
        "/api/wallet/{address}/signals",
        "/api/wallet/{address}/history",
        "/api/stats",
      ]) {
        expect(text, path).toContain(path);
      }
      expect(errors).toEqual([]);
      expect(page.workers(), "no worker whose requests the page would not see").toEqual([]);
      expect(
        requests.filter((url) => !url.startsWith(`${origin}/`) && !url.startsWith("data:") && !url.startsWith("blob:")),
      ).toEqual([]);
      expect(requests).toEqual(
        expect.arrayContaining([
          `${origin}/docs`,
          expect.stringContaining(`${origin}/docs/scalar.js`),
          `${origin}/openapi.json`,
        ]),
      );
    });
  });

  it("embeds the first paid call in the README verbatim", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const block = markedBlock(readme, "first-paid-call", "ts");
    expect(block, "README block between the first-paid-call markers").toBeDefined();
    expect(block).toBe(readFileSync(join(root, EXAMPLE), "utf8"));
  });

  it("runs the README's first paid call as written: a completed screen for exactly 0.01", async () => {
    const held = () => treasuryHolds(devnet.manifest);
    const before = await held();

    const stdout = await runExample(EXAMPLE, { API_URL: indexer.url, DEVNET_MANIFEST: devnet.manifestPath });

    const [result, payment] = stdout.split("\npayment: ");
    const screen = lenderScreenResultSchema.parse(JSON.parse(result!));
    expect(screen.status).toBe("completed");
    expect(screen.walletAddress.toLowerCase()).toBe(devnet.manifest.personas.salaried!.address.toLowerCase());
    expect(JSON.parse(payment!)).toMatchObject({
      success: true,
      network: "eip155:42220",
      transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
    });
    expect((await held()) - before).toBe(10_000n);
  });
});
