import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { type ServerType, serve } from "@hono/node-server";
import type { RouteConfig } from "@hono/zod-openapi";
import { Validator } from "@seriousme/openapi-schema-validator";
import { decodePaymentRequiredHeader } from "@x402/core/http";
import { ExactEvmScheme } from "@x402/evm";
import {
  createSIWxMessage,
  encodeSIWxHeader,
  SIGN_IN_WITH_X,
  type SIWxExtension,
  type SIWxPayload,
  wrapFetchWithSIWx,
} from "@x402/extensions/sign-in-with-x";
import { wrapFetchWithPaymentFromConfig } from "@x402/fetch";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { analyzeRoute } from "../../api/analyze/route.ts";
import { registerPaymentSchemes } from "../../api/http/declare.ts";
import { mount } from "../../api/http/mount.ts";
import { openApiDocument } from "../../api/openapi/route.ts";
import { type Billing, x402Billing } from "../../api/payments/billing.ts";
import type { PaymentCore } from "../../api/payments/core.ts";
import { createPayments } from "../../api/payments/payments.ts";
import { signInFor } from "../../api/payments/sign-in.ts";
import { screenRoute } from "../../api/screen/route.ts";
import { openServiceStore, type ServiceStore } from "../../api/store/store.ts";
import { analysisRoute, signalRoute } from "../../api/wallet/routes.ts";
import { configHandler, configRoute } from "../../api/x402/config-route.ts";
import { readEnv } from "../../config/env.ts";
import { StartupError } from "../../config/errors.ts";
import { resolveSignInOrigin } from "../../config/sign-in.ts";
import { freePort } from "../../devnet/ports.ts";
import { startTestDevnet, type TestDevnet } from "../support/devnet.ts";
import { type DatabaseSlot, databaseSlot, testDatabase } from "../support/indexer.ts";
import { documentMismatch, type OpenApiDocument } from "../support/openapi.ts";
import { paidApp } from "../support/paid-app.ts";
import {
  devnetPaymentSettings,
  randomNonce,
  signAuthorization,
  specHeader,
  type Token,
  tokenBalance,
} from "../support/payments.ts";
import { signedChallenge } from "../support/sign-in.ts";

// Sign-in-with-x on the real payment path (route declarations, adapter, payment core, ledger, a
// devnet chain): CAIP-122 messages built and signed with @x402/extensions and viem accounts. The
// handlers are stand-ins that count their runs, so "never ran" and "never charged" are direct.
const ORIGIN = "https://screening.example";
const LIMIT = 3;

describe(`sign-in-with-x for returning payers (${testDatabase})`, () => {
  let devnet: TestDevnet;
  let slot: DatabaseSlot;
  let store: ServiceStore;
  let payments: PaymentCore;
  let USDT: Token;
  let treasury: Hex;
  let lender: { address: Hex; privateKey: Hex };
  let lender2: { address: Hex; privateKey: Hex };
  let app: ReturnType<typeof appWith>;
  let doc: OpenApiDocument;
  const borrower = "0x00000000000000000000000000000000000b0b01" as Hex;
  let handled = 0;
  const served = [screenRoute, analyzeRoute, analysisRoute, signalRoute];

  function appWith(core: PaymentCore) {
    return paidApp(core, (app) => {
      const answer = async (walletAddress: string, c: { var: { billing: Promise<Billing> } }) => {
        handled++;
        return { walletAddress, x402Billing: x402Billing(await c.var.billing) };
      };
      mount(app, screenRoute, async (c) => c.json(await answer(c.req.valid("json").walletAddress, c)) as never);
      mount(app, analyzeRoute, async (c) => c.json(await answer(c.req.valid("json").walletAddress, c)) as never);
      mount(app, analysisRoute, async (c) => c.json(await answer(c.req.valid("param").address, c)) as never);
      mount(app, signalRoute, async (c) => {
        const billing = await c.var.billing;
        return c.json({
          ...(await answer(c.req.valid("param").address, c)),
          billing: { chargedUnits: billing.chargedUnits.toString(), freeRead: billing.waived },
        }) as never;
      });
      mount(app, configRoute, configHandler({ payments: core, routes: [...served, configRoute] as RouteConfig[] }));
      registerPaymentSchemes(app.openAPIRegistry);
    });
  }

  const treasuryUsdt = () => tokenBalance(devnet.manifest.rpcUrl, USDT.address, treasury);
  const pay = async (key: Hex = lender.privateKey) => ({
    "x-payment": specHeader(await signAuthorization(key, USDT, { to: treasury }), USDT.address),
  });

  /** `base`: the origin the request is sent to (its Host), ORIGIN unless a test names another. */
  type Call = { method: "GET" | "POST"; path: string; body?: unknown; base?: string };
  const analyze = (walletAddress: Hex, extra: Record<string, unknown> = {}): Call => ({
    method: "POST",
    path: "/api/agent/analyze",
    body: { walletAddress, ...extra },
  });
  const analysis = (wallet: Hex): Call => ({ method: "GET", path: `/api/wallet/${wallet}/analysis` });
  const signal = (wallet: Hex): Call => ({ method: "GET", path: `/api/wallet/${wallet}/signals/reputation` });
  const url = (call: Call) => `${call.base ?? ORIGIN}${call.path}`;
  const send = async (call: Call, headers: Record<string, string> = {}) => {
    const res = await app.request(url(call), {
      method: call.method,
      headers: { ...(call.body ? { "content-type": "application/json" } : {}), ...headers },
      ...(call.body ? { body: JSON.stringify(call.body) } : {}),
    });
    return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, any> };
  };

  /** The challenge a 402 of this call offers (its PAYMENT-REQUIRED header, as clients read it). */
  const challengeOf = async (call: Call): Promise<SIWxExtension> => {
    const res = await send(call);
    expect(res.status).toBe(402);
    return decodePaymentRequiredHeader(res.headers.get("payment-required")!).extensions![
      SIGN_IN_WITH_X
    ] as SIWxExtension;
  };
  /** A proof signed with the package's CAIP-122 message; `changes` alter the fields before signing (a wrong domain, chain…). */
  const proof = async (call: Call, key: Hex, changes: Partial<SIWxPayload> = {}, signer: Hex = key) =>
    signedChallenge(await challengeOf(call), key, changes, signer);

  beforeAll(async () => {
    process.env.SIGN_IN_ORIGIN = ORIGIN;
    process.env.SIGN_IN_OWN_ANALYSES_PER_HOUR = String(LIMIT);
    devnet = await startTestDevnet({ wallets: 2, months: 2, slotHours: 24 * 7 });
    USDT = devnet.manifest.tokens.USDT;
    treasury = devnet.manifest.service.treasury.address;
    [lender, lender2] = devnet.manifest.lenders as unknown as [typeof lender, typeof lender];
    slot = databaseSlot();
    await slot.prepare();
    store = await openServiceStore(slot.store);
    payments = createPayments(devnetPaymentSettings(devnet.manifestPath), store.db);
    app = appWith(payments);
    doc = openApiDocument(app, ORIGIN) as unknown as OpenApiDocument;
  }, 240_000);

  afterAll(async () => {
    delete process.env.SIGN_IN_ORIGIN;
    delete process.env.SIGN_IN_OWN_ANALYSES_PER_HOUR;
    await store?.close();
    await slot?.drop();
    await devnet?.stop();
  });

  it("advertises sign-in-with-x in the 402 answers where it applies, with a fresh challenge each time, and in the config", async () => {
    const first = await send(signal(borrower));
    expect(first.status).toBe(402);
    const inBody = first.body.extensions[SIGN_IN_WITH_X];
    const inHeader = decodePaymentRequiredHeader(first.headers.get("payment-required")!).extensions![
      SIGN_IN_WITH_X
    ] as SIWxExtension;
    expect(inHeader).toEqual(inBody);
    expect(inHeader.info).toMatchObject({
      domain: "screening.example",
      uri: url(signal(borrower)),
      version: "1",
      resources: [url(signal(borrower))],
      nonce: expect.stringMatching(/^[0-9a-f]{32}$/),
    });
    expect(Date.parse(inHeader.info.expirationTime!)).toBeGreaterThan(Date.parse(inHeader.info.issuedAt));
    expect(inHeader.supportedChains).toEqual([{ chainId: "eip155:42220", type: "eip191" }]);
    expect(inHeader.schema.required).toContain("signature");
    expect(documentMismatch(doc, "GET", signalRoute.path, 402, first.body)).toBe("");
    expect((await challengeOf(signal(borrower))).info.nonce).not.toBe(inHeader.info.nonce);
    for (const call of [analyze(borrower), analysis(borrower)])
      expect((await send(call)).body.extensions[SIGN_IN_WITH_X].supportedChains).toHaveLength(1);
    // Where signing in makes nothing free, it is not offered.
    const screen = await send({ method: "POST", path: "/api/lender/screen", body: { walletAddress: borrower } });
    expect(screen.status).toBe(402);
    expect(screen.body.extensions[SIGN_IN_WITH_X]).toBeUndefined();

    const config = (await send({ method: "GET", path: "/api/x402/config" })).body;
    expect(config.signIn).toEqual({
      extension: "sign-in-with-x",
      header: "SIGN-IN-WITH-X",
      origin: ORIGIN,
      chains: [{ chainId: "eip155:42220", type: "eip191" }],
      maxAgeSeconds: 300,
      ownWalletAnalysesPerHour: LIMIT,
      routes: [
        "POST /api/agent/analyze",
        "GET /api/wallet/{address}/analysis",
        "GET /api/wallet/{address}/signals/{signal}",
      ],
      refusals: { sign_in_invalid: 402, sign_in_not_entitled: 402 },
    });
    expect(config.headers.request).toContain(
      "SIGN-IN-WITH-X (x402 sign-in-with-x, base64; instead of a payment where signIn says so, or to pay from the wallet's credit)",
    );
    const price = (route: string) => config.prices.find((p: { route: string }) => p.route === route);
    expect(price("POST /api/agent/analyze").signIn).toMatch(/your own wallet free/);
    expect(price("GET /api/wallet/{address}/signals/{signal}").signIn).toMatch(
      /free read of freeWhen with no payment header/,
    );
    expect(price("POST /api/lender/screen").signIn).toBeUndefined();
  });

  it("gives the free signal read after a paid analysis to the payer signed in, with no payment header, once per proof", async () => {
    const before = await treasuryUsdt();
    const runs = handled;
    // Signed in, but nothing paid for this wallet yet: refused, not charged, the handler never ran.
    const early = await send(signal(borrower), await proof(signal(borrower), lender.privateKey));
    expect(early.status).toBe(402);
    expect(early.body).toMatchObject({
      code: "sign_in_not_entitled",
      details: { wallet: lender.address.toLowerCase(), subject: borrower.toLowerCase() },
    });
    expect(early.body.extensions[SIGN_IN_WITH_X]).toBeDefined();
    expect(handled).toBe(runs);

    const paid = await send(analysis(borrower), await pay());
    expect(paid.status).toBe(200);
    expect(paid.body.x402Billing.chargedUsdt).toBe("0.01");
    expect(await treasuryUsdt()).toBe(before + 10_000n);

    const headers = await proof(signal(borrower), lender.privateKey);
    const free = await send(signal(borrower), headers);
    expect(free.status).toBe(200);
    expect(free.body.billing).toEqual({ chargedUnits: "0", freeRead: true });
    expect(free.body.x402Billing).toMatchObject({
      chargedUsdt: "0.00",
      chargedUnits: "0",
      payer: lender.address.toLowerCase(),
    });
    expect(free.headers.get("payment-response")).toBeNull();
    expect(await treasuryUsdt()).toBe(before + 10_000n);

    // The same proof again: its nonce is spent.
    const again = await send(signal(borrower), headers);
    expect(again.status).toBe(402);
    expect(again.body).toMatchObject({ code: "sign_in_invalid", details: { reason: "invalid_siwx_nonce" } });

    // The old way still works: a payment header, verified and not settled.
    const waived = await send(signal(borrower), await pay());
    expect(waived.status).toBe(200);
    expect(waived.body.billing).toEqual({ chargedUnits: "0", freeRead: true });

    // Another wallet signed in did not pay: nothing free for it.
    const other = await send(signal(borrower), await proof(signal(borrower), lender2.privateKey));
    expect(other.body.code).toBe("sign_in_not_entitled");
    expect(await treasuryUsdt()).toBe(before + 10_000n);
  });

  it("analyses one's own wallet for free, at most SIGN_IN_OWN_ANALYSES_PER_HOUR per wallet", async () => {
    const key = generatePrivateKey();
    const me = privateKeyToAccount(key).address;
    const before = await treasuryUsdt();
    const calls = [analyze(me), analysis(me), analyze(me, { callerAddress: me })];
    expect(calls).toHaveLength(LIMIT);
    for (const call of calls) {
      const res = await send(call, await proof(call, key));
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.x402Billing).toMatchObject({ chargedUsdt: "0.00", payer: me.toLowerCase() });
    }
    const limited = await send(analyze(me), await proof(analyze(me), key));
    expect(limited.status).toBe(429);
    expect(limited.body.error).toMatchObject({ code: "rate_limited", details: { limitPerHour: LIMIT } });
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(documentMismatch(doc, "POST", analyzeRoute.path, 429, limited.body)).toBe("");
    // The limit is the wallet's: another wallet still gets its own analysis.
    const otherKey = generatePrivateKey();
    const other = await send(
      analysis(privateKeyToAccount(otherKey).address),
      await proof(analysis(privateKeyToAccount(otherKey).address), otherKey),
    );
    expect(other.status).toBe(200);
    expect(await treasuryUsdt()).toBe(before);

    // Past the limit with a payment as well: the payment is used as usual.
    const headers = { ...(await proofLimited(lender2.privateKey)), ...(await pay(lender2.privateKey)) };
    const runs = handled;
    const paidInstead = await send(analyze(lender2.address), headers);
    expect(paidInstead.status).toBe(200);
    expect(paidInstead.body.x402Billing.chargedUsdt).toBe("0.01");
    expect(handled).toBe(runs + 1);
    expect(await treasuryUsdt()).toBe(before + 10_000n);
  });

  /** Uses up lender2's own-wallet allowance, then a fresh proof for one more analysis. */
  async function proofLimited(key: Hex) {
    const wallet = privateKeyToAccount(key).address;
    for (let i = 0; i < LIMIT; i++)
      expect((await send(analyze(wallet), await proof(analyze(wallet), key))).status).toBe(200);
    expect((await send(analyze(wallet), await proof(analyze(wallet), key))).status).toBe(429);
    return proof(analyze(wallet), key);
  }

  it("refuses a signature for another wallet's analysis, without charging or running the handler", async () => {
    const before = await treasuryUsdt();
    const runs = handled;
    for (const call of [
      analyze(borrower),
      analysis(borrower),
      analyze(lender.address, { callerAddress: lender2.address }),
    ]) {
      const res = await send(call, await proof(call, lender.privateKey));
      expect(res.status).toBe(402);
      expect(res.body.code).toBe("sign_in_not_entitled");
      expect(res.body.accepts.length).toBeGreaterThan(0);
      expect(
        documentMismatch(
          doc,
          call.method,
          call.method === "POST" ? analyzeRoute.path : analysisRoute.path,
          402,
          res.body,
        ),
      ).toBe("");
    }
    expect(handled).toBe(runs);
    expect(await treasuryUsdt()).toBe(before);
  });

  it("refuses bad proofs clearly (402 sign_in_invalid with the reason), never charged, even with a payment attached", async () => {
    const call = analyze(lender.address);
    const key = lender.privateKey;
    const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000).toISOString();
    const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64");
    const decoded = (headers: Record<string, string>) =>
      JSON.parse(Buffer.from(headers["sign-in-with-x"]!, "base64").toString()) as SIWxPayload;
    const cases: [string, () => Promise<Record<string, string>>, string][] = [
      ["signed by another key", () => proof(call, key, {}, lender2.privateKey), "invalid_siwx_signature"],
      ["another domain", () => proof(call, key, { domain: "evil.example" }), "invalid_siwx_domain_mismatch"],
      [
        "a URI on another origin",
        () => proof(call, key, { uri: "https://evil.example/api/agent/analyze" }),
        "invalid_siwx_uri_mismatch",
      ],
      ["another chain", () => proof(call, key, { chainId: "eip155:1" }), "invalid_siwx_unsupported_chain"],
      [
        "issued too long ago",
        () => proof(call, key, { issuedAt: minutesAgo(6), expirationTime: undefined }),
        "invalid_siwx_issued_at_too_old",
      ],
      [
        "expired",
        () => proof(call, key, { issuedAt: minutesAgo(2), expirationTime: minutesAgo(1) }),
        "invalid_siwx_expired",
      ],
      [
        "an address that is not one",
        async () => ({ "sign-in-with-x": b64({ ...decoded(await proof(call, key)), address: "0x1234" }) }),
        "invalid_siwx_signature",
      ],
      ["not base64", async () => ({ "sign-in-with-x": "%% not base64 %%" }), "invalid_siwx_header"],
      [
        "base64 JSON missing fields",
        async () => ({ "sign-in-with-x": b64({ address: lender.address }) }),
        "invalid_siwx_header",
      ],
    ];
    const before = await treasuryUsdt();
    const runs = handled;
    for (const [name, headers, reason] of cases) {
      const res = await send(call, await headers());
      expect(res.status, name).toBe(402);
      expect(res.body, name).toMatchObject({ code: "sign_in_invalid", details: { reason } });
      expect(res.body.extensions[SIGN_IN_WITH_X], name).toBeDefined();
      expect(documentMismatch(doc, "POST", analyzeRoute.path, 402, res.body), name).toBe("");
    }
    // With a valid payment attached, a bad proof is still refused: the payment is not taken.
    const both = await send(call, { ...(await pay()), ...(await proof(call, key, { domain: "evil.example" })) });
    expect(both.body.code).toBe("sign_in_invalid");
    expect(handled).toBe(runs);
    expect(await treasuryUsdt()).toBe(before);
  });

  it("binds a proof to SIGN_IN_ORIGIN, whatever Host and X-Forwarded-Host the request names", async () => {
    const key = generatePrivateKey();
    const me = privateKeyToAccount(key).address;
    // Sent with Host evil.example (the request URL's origin, as the Node server builds it) and X-Forwarded-Host.
    const elsewhere: Call = { ...analysis(me), base: "https://evil.example" };
    const forwarded = { "x-forwarded-host": "evil.example" };
    // The challenge still names our origin.
    expect((await challengeOf(elsewhere)).info).toMatchObject({ domain: "screening.example", uri: url(analysis(me)) });
    const runs = handled;
    const others: [Partial<SIWxPayload>, string][] = [
      [{ domain: "evil.example", uri: url(elsewhere) }, "invalid_siwx_domain_mismatch"],
      [{ uri: url(elsewhere) }, "invalid_siwx_uri_mismatch"],
      [{ domain: "evil.example" }, "invalid_siwx_domain_mismatch"],
    ];
    for (const [changes, reason] of others) {
      const res = await send(elsewhere, { ...forwarded, ...(await proof(elsewhere, key, changes)) });
      expect(res.status, reason).toBe(402);
      expect(res.body, reason).toMatchObject({ code: "sign_in_invalid", details: { reason } });
    }
    expect(handled).toBe(runs);
    const ours = await send(elsewhere, { ...forwarded, ...(await proof(elsewhere, key)) });
    expect(ours.status).toBe(200);
    expect(ours.body.x402Billing.chargedUsdt).toBe("0.00");
  });

  it("on the devnet, binds proofs to the API URL the launcher prints (http://127.0.0.1:PORT), over a real connection", async () => {
    const port = await freePort();
    const saved = { origin: process.env.SIGN_IN_ORIGIN, port: process.env.PORT };
    delete process.env.SIGN_IN_ORIGIN;
    process.env.PORT = String(port);
    let server: ServerType | undefined;
    try {
      const ours = `http://127.0.0.1:${port}`;
      expect(resolveSignInOrigin()).toBe(ours);
      const core = createPayments(devnetPaymentSettings(devnet.manifestPath), store.db);
      expect(signInFor(core).settings.origin).toBe(ours);
      // The Node server Ponder serves with; leaving the test process's global Request and Response alone.
      server = serve({ fetch: appWith(core).fetch, port, hostname: "127.0.0.1", overrideGlobalObjects: false });
      const key = generatePrivateKey();
      const me = privateKeyToAccount(key).address;
      const call = analysis(me);
      /** A GET on the real socket with the Host and X-Forwarded-Host a client chooses. */
      const get = (headers: Record<string, string>) =>
        new Promise<{ status: number; body: Record<string, any> }>((resolve, reject) => {
          const req = httpRequest({ host: "127.0.0.1", port, path: call.path, headers }, (res) => {
            let text = "";
            res.on("data", (d: Buffer) => (text += d));
            res.on("end", () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
          });
          req.on("error", reject).end();
        });
      const spoofed = { host: "evil.example", "x-forwarded-host": "evil.example" };
      const challenge = (await get(spoofed)).body.extensions[SIGN_IN_WITH_X] as SIWxExtension;
      expect(challenge.info).toMatchObject({ domain: `127.0.0.1:${port}`, uri: `${ours}${call.path}` });
      const signed = async (changes: Partial<SIWxPayload> = {}) => {
        const info = {
          ...challenge.info,
          chainId: "eip155:42220",
          type: "eip191" as const,
          nonce: randomNonce().slice(2, 34),
          ...changes,
        };
        const signature = await privateKeyToAccount(key).signMessage({ message: createSIWxMessage(info, me) });
        return { "sign-in-with-x": encodeSIWxHeader({ ...info, address: me, signature }) };
      };
      // Signed for the site named in Host, or for another x402 service on this machine: refused.
      for (const [changes, reason] of [
        [{ domain: "evil.example", uri: `http://evil.example${call.path}` }, "invalid_siwx_domain_mismatch"],
        [{ domain: "127.0.0.1:1", uri: `http://127.0.0.1:1${call.path}` }, "invalid_siwx_domain_mismatch"],
        [{ uri: `http://evil.example${call.path}` }, "invalid_siwx_uri_mismatch"],
      ] as [Partial<SIWxPayload>, string][]) {
        const res = await get({ ...spoofed, ...(await signed(changes)) });
        expect(res.status, reason).toBe(402);
        expect(res.body, reason).toMatchObject({ code: "sign_in_invalid", details: { reason } });
      }
      // Signed for our origin: accepted, whatever Host the request named.
      const accepted = await get({ ...spoofed, ...(await signed()) });
      expect(accepted.status).toBe(200);
      expect(accepted.body.x402Billing.chargedUsdt).toBe("0.00");
    } finally {
      server?.close();
      if (saved.origin === undefined) delete process.env.SIGN_IN_ORIGIN;
      else process.env.SIGN_IN_ORIGIN = saved.origin;
      if (saved.port === undefined) delete process.env.PORT;
      else process.env.PORT = saved.port;
    }
  });

  it("needs SIGN_IN_ORIGIN on live Celo, and takes only an origin", () => {
    const live = { PONDER_RPC_URL_42220: "https://forno.celo.org" };
    expect(() => resolveSignInOrigin(readEnv(live))).toThrow(StartupError);
    expect(() => resolveSignInOrigin(readEnv(live))).toThrow(/Set SIGN_IN_ORIGIN/);
    expect(resolveSignInOrigin(readEnv({ ...live, SIGN_IN_ORIGIN: "https://api.example.com" }))).toBe(
      "https://api.example.com",
    );
    expect(() => readEnv({ ...live, SIGN_IN_ORIGIN: "https://api.example.com/v1" })).toThrow(/SIGN_IN_ORIGIN/);
  });

  it("works with the package's own client (wrapFetchWithSIWx), as docs/payments.md shows", async () => {
    const key = generatePrivateKey();
    const me = privateKeyToAccount(key).address;
    const signedIn = wrapFetchWithSIWx(
      (input, init) => Promise.resolve(app.request(input as Request, init)),
      privateKeyToAccount(key),
    );
    const res = await signedIn(url(analysis(me)));
    expect(res.status).toBe(200);
    expect(((await res.json()) as Record<string, any>).x402Billing.chargedUsdt).toBe("0.00");
  });

  it("leaves standard x402 clients paying as before: the challenge they echo fits the payment header limit", async () => {
    const sent: number[] = [];
    const paying = wrapFetchWithPaymentFromConfig(
      (input, init) => {
        const request = new Request(input as Request, init);
        sent.push((request.headers.get("payment-signature") ?? "").length);
        return Promise.resolve(app.request(request));
      },
      {
        schemes: [{ network: "eip155:42220", client: new ExactEvmScheme(privateKeyToAccount(lender2.privateKey)) }],
        spendControls: {
          allowedAssets: [{ network: "eip155:42220" as const, asset: USDT.address, maxAmountPerPayment: "100000" }],
        },
      },
    );
    const before = await treasuryUsdt();
    const res = await paying(url(signal(borrower)));
    expect(res.status).toBe(200);
    expect(((await res.json()) as Record<string, any>).x402Billing.chargedUsdt).toBe("0.01");
    expect(await treasuryUsdt()).toBe(before + 10_000n);
    expect(Math.max(...sent)).toBeLessThanOrEqual(payments.settings.maxHeaderBytes);
  });

  it("documents the sign-in scheme once, on the routes where it applies, and the document validates", async () => {
    const result = await new Validator().validate(structuredClone(doc) as never);
    expect(result.errors ?? null).toBeNull();
    const schemes = (doc as unknown as { components: { securitySchemes: Record<string, { name: string }> } }).components
      .securitySchemes;
    expect(schemes.signInWithX).toMatchObject({ type: "apiKey", in: "header", name: "SIGN-IN-WITH-X" });
    const op = (path: string, method: string) => (doc.paths[path] as Record<string, any>)[method];
    expect(op(analyzeRoute.path, "post").security).toContainEqual({ signInWithX: [] });
    expect(op(analyzeRoute.path, "post")["x-sign-in"]).toMatch(/SIGN-IN-WITH-X/);
    expect(op(analyzeRoute.path, "post").responses["429"]).toBeDefined();
    expect(op(analyzeRoute.path, "post").responses["402"].description).toMatch(/sign_in_invalid, sign_in_not_entitled/);
    // The screen grants nothing free: signing in there pays from the wallet's prepaid credit, no `x-sign-in` grant.
    expect(op(screenRoute.path, "post").security).toContainEqual({ signInWithX: [] });
    expect(op(screenRoute.path, "post")["x-sign-in"]).toBeUndefined();
    const rule = op(signalRoute.path, "get")["x-price"].freeWhen as string;
    expect(rule).toMatch(/send no payment and sign in as that payer with SIGN-IN-WITH-X or send its credit token/);
    expect(readFileSync(new URL("../../docs/payments.md", import.meta.url), "utf8")).toContain(rule);
  });
});
