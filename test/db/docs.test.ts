import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import puppeteer, { type Browser } from "puppeteer-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DOCS_TITLE } from "../../api/openapi/docs.ts";
import { lenderScreenResultSchema } from "../../api/screen/schema.ts";
import { stopProcessGroup } from "../../devnet/anvil.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { type Indexer, testDatabase, waitForBlock } from "../support/indexer.ts";
import { tokenBalance } from "../support/payments.ts";

const root = fileURLToPath(new URL("../..", import.meta.url));
const EXAMPLE = "docs/examples/first-paid-call.ts";

// The service as a reader and a lender first meet it: its API reference in a real browser, and the
// README's first paid call run as written. On PGlite only, as a newcomer runs it (vitest.config.ts says why).
describe(`the API reference and the README's first paid call (${testDatabase})`, () => {
  let env: IndexedDevnet;
  let devnet: TestDevnet;
  let indexer: Indexer;

  beforeAll(async () => {
    env = await indexedDevnet({ wallets: 10, months: 12, seed: 12 });
    devnet = env.devnet;
    indexer = await env.index();
    await waitForBlock(indexer, devnet.manifest.headBlock);
  }, 240_000);

  afterAll(() => env?.stop());

  // One browser run is enough: the page does not depend on the database.
  describe.runIf(testDatabase === "pglite")("/docs in headless Chromium", () => {
    let browser: Browser | undefined;
    // biome-ignore lint/suspicious/noDuplicateTestHooks: this block's own hook (the browser), not the file's (the devnet)
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
      const shot = join(mkdtempSync(join(tmpdir(), "docs-")), "docs.png");
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
    const block = /<!-- first-paid-call:start -->\n```ts\n([\s\S]*?)```\n<!-- first-paid-call:end -->/.exec(
      readme,
    )?.[1];
    expect(block, "README block between the first-paid-call markers").toBeDefined();
    expect(block).toBe(readFileSync(join(root, EXAMPLE), "utf8"));
  });

  it("runs the README's first paid call as written: a completed screen for exactly 0.01", async () => {
    const treasury = devnet.manifest.service.treasury.address;
    const tokens = [devnet.manifest.tokens.USDT.address, devnet.manifest.tokens.USDC.address];
    const held = async () =>
      (await Promise.all(tokens.map((t) => tokenBalance(devnet.manifest.rpcUrl, t, treasury)))).reduce((a, b) => a + b);
    const before = await held();

    const child = spawn("npx", ["tsx", EXAMPLE], {
      cwd: root,
      env: { ...process.env, API_URL: indexer.url, DEVNET_MANIFEST: devnet.manifestPath },
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    try {
      const [code] = (await once(child, "close", { signal: AbortSignal.timeout(90_000) })) as [number | null];
      expect(code, stderr).toBe(0);
    } finally {
      await stopProcessGroup(child, 2_000);
    }

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
