import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { decodePaymentResponseHeader } from "@x402/core/http";
import { eq } from "drizzle-orm";
import { createPublicClient, createWalletClient, type Hex, http, zeroAddress } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { mount } from "../../api/http/mount.ts";
import { x402Billing } from "../../api/payments/billing.ts";
import type { PaymentCore } from "../../api/payments/core.ts";
import { createFacilitator } from "../../api/payments/facilitator.ts";
import { createPayments } from "../../api/payments/payments.ts";
import { screenRoute } from "../../api/screen/route.ts";
import { payment } from "../../api/store/schema.ts";
import { openServiceStore, type ServiceStore } from "../../api/store/store.ts";
import { signalRoute } from "../../api/wallet/routes.ts";
import type { PaymentSettings } from "../../config/payments.ts";
import { devnetChain } from "../../devnet/chain.ts";
import { waitForReceipt } from "../../shared/receipt.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { startTestDevnet } from "../support/devnet.ts";
import { type DatabaseSlot, databaseSlot, testDatabase } from "../support/indexer.ts";
import { paidApp } from "../support/paid-app.ts";
import {
  devnetPaymentSettings,
  nowSeconds,
  randomNonce,
  signAuthorization,
  specHeader,
  type Token,
  tokenBalance,
  v1Header,
  v2Header,
} from "../support/payments.ts";
import { type RpcProxy, startRpcProxy } from "../support/rpc-proxy.ts";

// The payment guard on a real chain and a real store: every way a payment can be wrong, replays,
// concurrency and settlement failures. The routes here are the real guard in front of a handler
// that counts its calls, so "no paid data" and "handler never ran" can be asserted directly.
describe(`x402 payment guard (${testDatabase})`, () => {
  let devnet: TestDevnet;
  let slot: DatabaseSlot;
  let store: ServiceStore;
  let proxy: RpcProxy;
  let settings: PaymentSettings;
  let USDT: Token;
  let USDC: Token;
  let treasury: Hex;
  let lender: { address: Hex; privateKey: Hex };
  let lender2: { address: Hex; privateKey: Hex };
  const borrower = "0x00000000000000000000000000000000000b0b00" as Hex;
  const failingBorrower = "0x00000000000000000000000000000000000fa11e" as Hex;
  const rpcDownBorrower = "0x000000000000000000000000000000000000d0a1" as Hex;
  let handled = 0;

  /** The real route declarations (validation, payment middleware) in front of handlers that count their calls. */
  function appWith(payments: PaymentCore) {
    return paidApp(payments, (app) => {
      mount(app, screenRoute, async (c) => {
        handled++;
        const { walletAddress } = c.req.valid("json");
        if (walletAddress === failingBorrower) throw new Error("handler failed");
        if (walletAddress === rpcDownBorrower) proxy.down = true;
        return c.json({
          paidData: `screen of ${walletAddress}`,
          at: Date.now(),
          x402Billing: x402Billing(await c.var.billing),
        }) as never;
      });
      mount(app, signalRoute, async (c) => c.json({ value: 42, billing: x402Billing(await c.var.billing) }) as never);
    });
  }

  let app: ReturnType<typeof appWith>;
  let payments: PaymentCore;

  const screen = (
    headers: Record<string, string>,
    body: unknown = { walletAddress: borrower, callerAddress: lender.address },
    target = app,
  ) =>
    target.request("/api/lender/screen", {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    });

  const chain = () => createPublicClient({ transport: http(devnet.manifest.rpcUrl) });
  const balances = async () => ({
    treasuryUsdt: await tokenBalance(devnet.manifest.rpcUrl, USDT.address, treasury),
    treasuryUsdc: await tokenBalance(devnet.manifest.rpcUrl, USDC.address, treasury),
    lenderUsdt: await tokenBalance(devnet.manifest.rpcUrl, USDT.address, lender.address),
    lenderUsdc: await tokenBalance(devnet.manifest.rpcUrl, USDC.address, lender.address),
  });
  const nonceUsed = (token: Token, from: Hex, nonce: Hex) =>
    chain().readContract({
      address: token.address,
      abi: devStablecoinAbi,
      functionName: "authorizationState",
      args: [from, nonce],
    });
  const ledgerRows = async () => (await store.db.select().from(payment)) as (typeof payment.$inferSelect)[];

  const usedNonce = randomNonce();
  const cancelledNonce = randomNonce();
  const broke = generatePrivateKey();

  beforeAll(async () => {
    devnet = await startTestDevnet({ wallets: 4, months: 12, slotHours: 24 * 7 });
    ({ USDT, USDC } = devnet.manifest.tokens);
    treasury = devnet.manifest.service.treasury.address;
    [lender, lender2] = devnet.manifest.lenders as unknown as [typeof lender, typeof lender];
    slot = databaseSlot();
    await slot.prepare();
    store = await openServiceStore(slot.store);
    proxy = await startRpcProxy(devnet.manifest.rpcUrl);
    settings = devnetPaymentSettings(devnet.manifestPath, proxy.url);
    payments = createPayments(settings, store.db);
    app = appWith(payments);

    // One authorization used on chain directly and one cancelled, before any figure is taken.
    const wallet = createWalletClient({
      chain: devnetChain(devnet.manifest.rpcUrl),
      transport: http(devnet.manifest.rpcUrl),
      account: privateKeyToAccount(lender.privateKey),
    });
    const direct = await signAuthorization(lender.privateKey, USDT, { to: treasury, value: 10_000n, nonce: usedNonce });
    const a = direct.authorization;
    await waitForReceipt(chain(), {
      hash: await wallet.writeContract({
        address: USDT.address,
        abi: devStablecoinAbi,
        functionName: "transferWithAuthorization",
        args: [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, direct.signature],
      }),
    });
    const cancel = await privateKeyToAccount(lender.privateKey).signTypedData({
      domain: { name: USDT.name, version: USDT.version, chainId: 42220, verifyingContract: USDT.address },
      types: {
        CancelAuthorization: [
          { name: "authorizer", type: "address" },
          { name: "nonce", type: "bytes32" },
        ],
      },
      primaryType: "CancelAuthorization",
      message: { authorizer: lender.address, nonce: cancelledNonce },
    });
    await waitForReceipt(chain(), {
      hash: await wallet.writeContract({
        address: USDT.address,
        abi: devStablecoinAbi,
        functionName: "cancelAuthorization",
        args: [lender.address, cancelledNonce, cancel],
      }),
    });
  }, 240_000);

  afterAll(async () => {
    await proxy?.close();
    await store?.close();
    await slot?.drop();
    await devnet?.stop();
  });

  const sign = (
    fields: Parameters<typeof signAuthorization>[2],
    token: Token = USDT,
    key: Hex = lender.privateKey,
    chainId?: number,
  ) => signAuthorization(key, token, fields, chainId);
  const spec = async (
    fields: Partial<Parameters<typeof signAuthorization>[2]> = {},
    token: Token = USDT,
    key?: Hex,
    chainId?: number,
  ) => ({ "x-payment": specHeader(await sign({ to: treasury, ...fields }, token, key, chainId), token.address) });
  const validSpecObject = async () =>
    JSON.parse(specHeader(await sign({ to: treasury }), USDT.address)) as Record<string, unknown>;
  const b64 = (value: unknown) =>
    Buffer.from(typeof value === "string" ? value : JSON.stringify(value)).toString("base64");

  type BadCase = [
    name: string,
    headers: () => Promise<Record<string, string>>,
    status: number,
    code: string,
    body?: unknown,
  ];
  const badPayments: BadCase[] = [
    ["missing header", async () => ({}), 402, "payment_required"],
    ["X-PAYMENT not JSON", async () => ({ "x-payment": "{from: lender}" }), 400, "payment_malformed"],
    ["X-PAYMENT not base64", async () => ({ "x-payment": "%%% not base64 %%%" }), 400, "payment_malformed"],
    ["base64 of text that is not JSON", async () => ({ "x-payment": b64("hello there") }), 400, "payment_malformed"],
    [
      "base64 JSON of an unknown x402Version",
      async () => ({ "x-payment": b64({ x402Version: 3 }) }),
      400,
      "payment_malformed",
    ],
    ["base64 JSON array", async () => ({ "x-payment": b64([1, 2]) }), 400, "payment_malformed"],
    [
      "v1 without payload",
      async () => ({ "x-payment": b64({ x402Version: 1, scheme: "exact", network: "celo" }) }),
      400,
      "payment_malformed",
    ],
    [
      "v2 without accepted",
      async () => ({ "payment-signature": b64({ x402Version: 2, payload: {} }) }),
      400,
      "payment_malformed",
    ],
    [
      "PAYMENT-SIGNATURE holding raw JSON",
      async () => ({ "payment-signature": JSON.stringify(await validSpecObject()) }),
      400,
      "payment_malformed",
    ],
    ["empty X-PAYMENT", async () => ({ "x-payment": "" }), 400, "payment_malformed"],
    ["both headers at once", async () => ({ ...(await spec()), "payment-signature": "abc" }), 400, "payment_malformed"],
    [
      "value as a number",
      async () => ({ "x-payment": JSON.stringify({ ...(await validSpecObject()), value: 10000 }) }),
      400,
      "payment_malformed",
    ],
    [
      "value as hex",
      async () => ({ "x-payment": JSON.stringify({ ...(await validSpecObject()), value: "0x2710" }) }),
      400,
      "payment_malformed",
    ],
    [
      "value with decimals",
      async () => ({ "x-payment": JSON.stringify({ ...(await validSpecObject()), value: "10000.5" }) }),
      400,
      "payment_malformed",
    ],
    [
      "value empty",
      async () => ({ "x-payment": JSON.stringify({ ...(await validSpecObject()), value: "" }) }),
      400,
      "payment_malformed",
    ],
    [
      "value beyond uint256",
      async () => ({ "x-payment": JSON.stringify({ ...(await validSpecObject()), value: "9".repeat(78) }) }),
      400,
      "payment_malformed",
    ],
    [
      "validBefore negative",
      async () => ({ "x-payment": JSON.stringify({ ...(await validSpecObject()), validBefore: "-1" }) }),
      400,
      "payment_malformed",
    ],
    [
      "validAfter as a number",
      async () => ({ "x-payment": JSON.stringify({ ...(await validSpecObject()), validAfter: 0 }) }),
      400,
      "payment_malformed",
    ],
    [
      "nonce too short",
      async () => ({ "x-payment": JSON.stringify({ ...(await validSpecObject()), nonce: "0x1234" }) }),
      400,
      "payment_malformed",
    ],
    [
      "from not an address",
      async () => ({ "x-payment": JSON.stringify({ ...(await validSpecObject()), from: "lender" }) }),
      400,
      "payment_malformed",
    ],
    [
      "to missing",
      async () => ({ "x-payment": JSON.stringify({ ...(await validSpecObject()), to: undefined }) }),
      400,
      "payment_malformed",
    ],
    [
      "token missing",
      async () => ({ "x-payment": JSON.stringify({ ...(await validSpecObject()), token: undefined }) }),
      400,
      "payment_malformed",
    ],
    [
      "signature missing",
      async () => ({ "x-payment": JSON.stringify({ ...(await validSpecObject()), signature: undefined }) }),
      400,
      "payment_malformed",
    ],
    [
      "signature not hex",
      async () => ({ "x-payment": JSON.stringify({ ...(await validSpecObject()), signature: "signed-by-me" }) }),
      400,
      "payment_malformed",
    ],
    [
      "signature of 64 bytes",
      async () => ({
        "x-payment": JSON.stringify({ ...(await validSpecObject()), signature: `0x${"ab".repeat(64)}` }),
      }),
      400,
      "payment_malformed",
    ],
    [
      "header too large",
      async () => ({ "x-payment": JSON.stringify({ ...(await validSpecObject()), memo: "x".repeat(9000) }) }),
      431,
      "payment_header_too_large",
    ],
    [
      "random signature",
      async () => ({
        "x-payment": JSON.stringify({ ...(await validSpecObject()), signature: `0x${"11".repeat(65)}` }),
      }),
      402,
      "invalid_signature",
    ],
    [
      "signature with a byte of r flipped",
      async () => {
        const o = await validSpecObject();
        const sig = String(o.signature);
        const flipped = (Number.parseInt(sig.slice(2, 4), 16) ^ 0xff).toString(16).padStart(2, "0");
        return { "x-payment": JSON.stringify({ ...o, signature: `0x${flipped}${sig.slice(4)}` }) };
      },
      402,
      "invalid_signature",
    ],
    [
      "signed by someone else",
      async () => spec({ from: lender.address.toLowerCase() as Hex }, USDT, lender2.privateKey),
      402,
      "invalid_signature",
    ],
    [
      "from the zero address",
      async () => ({ "x-payment": JSON.stringify({ ...(await validSpecObject()), from: zeroAddress }) }),
      402,
      "invalid_signature",
      { walletAddress: borrower },
    ],
    [
      "value changed after signing",
      async () => ({ "x-payment": JSON.stringify({ ...(await validSpecObject()), value: "10001" }) }),
      402,
      "invalid_signature",
    ],
    ["signed for another chain", async () => spec({}, USDT, undefined, 1), 402, "invalid_signature"],
    [
      "signed over USDT's domain, presented as USDC",
      async () => ({ "x-payment": specHeader(await sign({ to: treasury }, USDT), USDC.address) }),
      402,
      "invalid_signature",
    ],
    [
      "v1 with a bad signature",
      async () => ({ "x-payment": v1Header({ ...(await sign({ to: treasury })), signature: `0x${"22".repeat(65)}` }) }),
      402,
      "invalid_signature",
    ],
    [
      "v2 on another network",
      async () => ({ "payment-signature": v2Header(await sign({ to: treasury }), USDT, treasury, "eip155:1") }),
      402,
      "unsupported_network",
    ],
    [
      "v1 on another network",
      async () => ({ "x-payment": v1Header(await sign({ to: treasury }), "base") }),
      402,
      "unsupported_network",
    ],
    [
      "v2 with another scheme",
      async () => {
        const header = JSON.parse(
          Buffer.from(v2Header(await sign({ to: treasury }), USDT, treasury), "base64").toString(),
        );
        header.accepted.scheme = "upto";
        return { "payment-signature": b64(header) };
      },
      402,
      "unsupported_scheme",
    ],
    [
      "a token that is not accepted",
      async () => ({
        "x-payment": specHeader(await sign({ to: treasury }), "0x1111111111111111111111111111111111111111"),
      }),
      402,
      "unsupported_token",
    ],
    [
      "v2 naming a token that is not accepted",
      async () => ({
        "payment-signature": v2Header(
          await sign({ to: treasury }),
          { ...USDT, address: "0x2222222222222222222222222222222222222222" },
          treasury,
        ),
      }),
      402,
      "unsupported_token",
    ],
    [
      "paying the wrong recipient",
      async () => spec({ to: lender2.address.toLowerCase() as Hex }),
      402,
      "wrong_recipient",
    ],
    [
      "v2 paying the wrong recipient",
      async () => ({
        "payment-signature": v2Header(await sign({ to: lender2.address.toLowerCase() as Hex }), USDT, lender2.address),
      }),
      402,
      "wrong_recipient",
    ],
    ["underpaid by one unit", async () => spec({ value: 9_999n }), 402, "insufficient_amount"],
    ["zero value", async () => spec({ value: 0n }), 402, "insufficient_amount"],
    [
      "v1 underpaid",
      async () => ({ "x-payment": v1Header(await sign({ to: treasury, value: 5_000n })) }),
      402,
      "insufficient_amount",
    ],
    ["over the per-call maximum", async () => spec({ value: 2_000_000n }), 402, "amount_too_large"],
    ["expired", async () => spec({ validBefore: nowSeconds() - 10n }), 402, "authorization_expired"],
    ["expiring within seconds", async () => spec({ validBefore: nowSeconds() + 2n }), 402, "authorization_expired"],
    ["not yet valid", async () => spec({ validAfter: nowSeconds() + 120n }), 402, "authorization_not_yet_valid"],
    [
      "validity window too long",
      async () => spec({ validBefore: nowSeconds() + 86_400n }),
      402,
      "authorization_window_too_long",
    ],
    ["nonce already used on chain", async () => spec({ nonce: usedNonce }), 402, "nonce_already_used"],
    ["nonce cancelled on chain", async () => spec({ nonce: cancelledNonce }), 402, "nonce_already_used"],
    [
      "payer without balance",
      async () => spec({}, USDT, broke),
      402,
      "insufficient_balance",
      { walletAddress: borrower },
    ],
    [
      "callerAddress is not the payer",
      async () => spec(),
      400,
      "caller_mismatch",
      { walletAddress: borrower, callerAddress: "0x000000000000000000000000000000000000ca11" },
    ],
  ];

  it(`refuses ${badPayments.length} bad payments with their status and code, moving no money and returning no data`, async () => {
    expect(badPayments.length).toBeGreaterThanOrEqual(50);
    const before = await balances();
    const handledBefore = handled;
    const seen: string[] = [];
    for (const [name, headers, status, code, body] of badPayments) {
      const res = await screen(await headers(), body ?? { walletAddress: borrower, callerAddress: lender.address });
      const json = (await res.json()) as {
        code?: string;
        error?: string | { code: string };
        accepts?: unknown[];
        paidData?: string;
      };
      const got = typeof json.error === "string" ? json.code : json.error?.code;
      seen.push(`${name}: ${res.status} ${got}`);
      expect(`${name}: ${res.status} ${got}`).toBe(`${name}: ${status} ${code}`);
      expect(json.paidData, name).toBeUndefined();
      if (status === 402) {
        // Any x402 client can act on it: the v1 body and the v2 header, both tokens offered.
        expect(json.accepts, name).toHaveLength(2);
        expect(res.headers.get("payment-required"), name).toBeTruthy();
      }
    }
    expect(handled).toBe(handledBefore);
    expect(await balances()).toEqual(before);
    expect(await ledgerRows()).toEqual([]);
  });

  it("takes the service JSON, x402 v1 and x402 v2 encodings, in USDT and USDC, charging exactly the price", async () => {
    const cases: [string, () => Promise<Record<string, string>>, Token][] = [
      ["X-PAYMENT JSON, USDT", () => spec(), USDT],
      ["X-PAYMENT JSON, USDC", () => spec({}, USDC), USDC],
      ["x402 v1, USDT", async () => ({ "x-payment": v1Header(await sign({ to: treasury })) }), USDT],
      ["x402 v1, USDC", async () => ({ "x-payment": v1Header(await sign({ to: treasury }, USDC)) }), USDC],
      [
        "x402 v2, USDC",
        async () => ({ "payment-signature": v2Header(await sign({ to: treasury }, USDC), USDC, treasury) }),
        USDC,
      ],
    ];
    for (const [name, headers, token] of cases) {
      const before = await balances();
      const res = await screen(await headers());
      expect(res.status, name).toBe(200);
      const body = (await res.json()) as { paidData: string; x402Billing: Record<string, string> };
      expect(body.paidData).toContain(borrower);
      expect(body.x402Billing).toMatchObject({
        chargedUsdt: "0.01",
        chargedUnits: "10000",
        token: token.symbol,
        chain: "eip155:42220",
        payer: lender.address.toLowerCase(),
      });
      const receipt = decodePaymentResponseHeader(res.headers.get("payment-response")!);
      expect(res.headers.get("x-payment-response")).toBe(res.headers.get("payment-response"));
      expect(receipt).toMatchObject({ success: true, network: "eip155:42220" });
      const tx = await chain().getTransactionReceipt({ hash: receipt.transaction as Hex });
      expect(tx.status).toBe("success");
      const after = await balances();
      const key = token.symbol === "USDT" ? "Usdt" : "Usdc";
      expect(after[`treasury${key}`] - before[`treasury${key}`], name).toBe(10_000n);
      expect(before[`lender${key}`] - after[`lender${key}`], name).toBe(10_000n);
    }
    const rows = await ledgerRows();
    expect(rows).toHaveLength(cases.length);
    for (const row of rows) {
      expect(row).toMatchObject({
        status: "settled",
        amount: "10000",
        payer: lender.address.toLowerCase(),
        route: "POST /api/lender/screen",
        subject: borrower,
      });
      expect(row.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    }
    expect(new Set(rows.map((r) => r.encoding))).toEqual(new Set(["x-payment-json", "x402-v1", "x402-v2"]));
  });

  it("answers a retry of the same paid request with the same answer and charges once; refuses the payment on another request", async () => {
    const headers = await spec();
    const before = await balances();
    const first = await screen(headers);
    const firstBody = await first.text();
    const retry = await screen(headers);
    expect(retry.status).toBe(200);
    expect(await retry.text()).toBe(firstBody);
    expect(retry.headers.get("payment-response")).toBe(first.headers.get("payment-response"));
    const other = await screen(headers, { walletAddress: lender2.address, callerAddress: lender.address });
    expect(other.status).toBe(409);
    expect(await other.json()).toMatchObject({ error: { code: "payment_reused" } });
    const after = await balances();
    expect(after.treasuryUsdt - before.treasuryUsdt).toBe(10_000n);
  });

  it("settles fifty concurrent copies of one paid request exactly once", async () => {
    const headers = await spec();
    const before = await balances();
    const handledBefore = handled;
    const answers = await Promise.all(Array.from({ length: 50 }, () => screen(headers)));
    const bodies = await Promise.all(answers.map((r) => r.text()));
    expect(answers.map((r) => r.status)).toEqual(Array(50).fill(200));
    expect(new Set(bodies).size).toBe(1);
    expect(handled - handledBefore).toBe(1);
    const after = await balances();
    expect(after.treasuryUsdt - before.treasuryUsdt).toBe(10_000n);
    expect(before.lenderUsdt - after.lenderUsdt).toBe(10_000n);
  });

  it("honours the x402 payment-identifier: a retry signed anew under the same id gets the same answer, charged once", async () => {
    const id = `pay_${randomNonce().slice(2, 34)}`;
    const withId = async (paymentId: string, body?: unknown) => {
      const signed = await sign({ to: treasury });
      return {
        nonce: signed.authorization.nonce,
        res: await screen(
          { "x-payment": JSON.stringify({ ...JSON.parse(specHeader(signed, USDT.address)), paymentId }) },
          body,
        ),
      };
    };
    const before = await balances();
    const first = await withId(id);
    expect(first.res.status).toBe(200);
    const answer = await first.res.text();
    // The client lost the answer and retried with a new authorization (new nonce), same id and request.
    const retry = await withId(id);
    expect(retry.res.status).toBe(200);
    expect(retry.res.headers.get("x-payment-replayed")).toBe("true");
    expect(await retry.res.text()).toBe(answer);
    expect(await nonceUsed(USDT, lender.address, retry.nonce)).toBe(false);
    expect((await balances()).treasuryUsdt - before.treasuryUsdt).toBe(10_000n);
    // The same id on another request is refused, and charges nothing.
    const other = await withId(id, {
      walletAddress: "0x00000000000000000000000000000000000b0b01",
      callerAddress: lender.address,
    });
    expect([other.res.status, ((await other.res.json()) as { error: { code: string } }).error.code]).toEqual([
      409,
      "payment_id_reused",
    ]);
    expect((await balances()).treasuryUsdt - before.treasuryUsdt).toBe(10_000n);
    // The 402 declares the extension.
    const unpaid = await screen({});
    expect(
      ((await unpaid.json()) as { extensions: Record<string, unknown> }).extensions["payment-identifier"],
    ).toMatchObject({ info: { required: false } });
  });

  it("settles nothing when the handler fails", async () => {
    const signed = await sign({ to: treasury });
    const before = await balances();
    const res = await screen(
      { "x-payment": specHeader(signed, USDT.address) },
      { walletAddress: failingBorrower, callerAddress: lender.address },
    );
    expect(res.status).toBe(500);
    expect(await nonceUsed(USDT, lender.address, signed.authorization.nonce)).toBe(false);
    expect(await balances()).toEqual(before);
    const [row] = (await ledgerRows()).filter((r) => r.nonce === signed.authorization.nonce);
    expect(row).toMatchObject({ status: "failed", transaction: null });
  });

  it("returns no data and records no settlement when the relayer has no gas, then settles the same payment once it can", async () => {
    const broke = createPayments(
      settings,
      store.db,
      createFacilitator({ ...settings, settlement: { mode: "self", relayerKey: generatePrivateKey() } }),
    );
    const headers = await spec();
    const before = await balances();
    const res = await screen(headers, undefined, appWith(broke));
    expect(res.status).toBe(402);
    const body = (await res.json()) as { code: string; paidData?: string };
    expect(body.code).toBe("settlement_failed");
    expect(body.paidData).toBeUndefined();
    expect(await balances()).toEqual(before);
    const nonce = JSON.parse(headers["x-payment"]!).nonce as string;
    expect((await ledgerRows()).find((r) => r.nonce === nonce)).toMatchObject({ status: "failed" });

    const retried = await screen(headers);
    expect(retried.status).toBe(200);
    expect((await ledgerRows()).find((r) => r.nonce === nonce)).toMatchObject({ status: "settled" });
    expect((await balances()).treasuryUsdt - before.treasuryUsdt).toBe(10_000n);
  });

  it("takes over a claim abandoned by a request that died before settling, and settles it once", async () => {
    const noGas = createPayments(
      settings,
      store.db,
      createFacilitator({ ...settings, settlement: { mode: "self", relayerKey: generatePrivateKey() } }),
    );
    const headers = await spec();
    const nonce = JSON.parse(headers["x-payment"]!).nonce as string;
    expect((await screen(headers, undefined, appWith(noGas))).status).toBe(402);
    // As a replica that crashed between its claim and settlement leaves it: pending, minutes old.
    await store.db
      .update(payment)
      .set({ status: "pending", updatedAt: new Date(Date.now() - 5 * 60_000) })
      .where(eq(payment.nonce, nonce));
    const before = await balances();
    const [a, b] = await Promise.all([screen(headers), screen(headers)]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(await a.text()).toBe(await b.text());
    expect((await balances()).treasuryUsdt - before.treasuryUsdt).toBe(10_000n);
    expect((await ledgerRows()).find((r) => r.nonce === nonce)).toMatchObject({ status: "settled" });
  });

  it("returns no data and records no settlement when the RPC goes down before settlement", async () => {
    const signed = await sign({ to: treasury });
    const before = await balances();
    const res = await screen(
      { "x-payment": specHeader(signed, USDT.address) },
      { walletAddress: rpcDownBorrower, callerAddress: lender.address },
    );
    proxy.down = false;
    expect([402, 503]).toContain(res.status);
    const body = (await res.json()) as { code: string; paidData?: string };
    expect(["settlement_failed", "settlement_unavailable"]).toContain(body.code);
    expect(body.paidData).toBeUndefined();
    expect(await nonceUsed(USDT, lender.address, signed.authorization.nonce)).toBe(false);
    expect(await balances()).toEqual(before);
    expect((await ledgerRows()).find((r) => r.nonce === signed.authorization.nonce)).toMatchObject({
      status: "failed",
    });
  });

  it("settles through a remote x402 facilitator named by URL", async () => {
    // A real facilitator over HTTP (the x402 packages' own, with the relayer key), as a remote one would run.
    const local = createFacilitator(settings);
    const calls: string[] = [];
    const server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      calls.push(`${req.method} ${req.url}`);
      const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : {};
      const answer =
        req.url === "/verify"
          ? await local.verify(body.paymentPayload, body.paymentRequirements)
          : req.url === "/settle"
            ? await local.settle(body.paymentPayload, body.paymentRequirements)
            : await local.getSupported();
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const remote = { ...settings, settlement: { mode: "facilitator" as const, url } };
      const viaRemote = appWith(createPayments(remote, store.db, createFacilitator(remote)));
      const before = await balances();
      const res = await screen(await spec(), undefined, viaRemote);
      expect(res.status).toBe(200);
      expect(decodePaymentResponseHeader(res.headers.get("payment-response")!).success).toBe(true);
      expect(calls).toEqual(["POST /verify", "POST /settle"]);
      expect((await balances()).treasuryUsdt - before.treasuryUsdt).toBe(10_000n);

      // A refusal from the remote facilitator is ours to explain: the same stable codes.
      const bad = await screen(
        { "x-payment": JSON.stringify({ ...(await validSpecObject()), signature: `0x${"11".repeat(65)}` }) },
        undefined,
        viaRemote,
      );
      expect(bad.status).toBe(402);
      expect(((await bad.json()) as { code: string }).code).toBe("invalid_signature");
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("makes a single-signal read free to a payer who screened that wallet, and only to them", async () => {
    const wallet = "0x00000000000000000000000000000000005157a1" as Hex;
    const read = async (key: Hex) =>
      app.request(`/api/wallet/${wallet}/signals/drainSharePct`, {
        headers: { "x-payment": specHeader(await sign({ to: treasury }, USDT, key), USDT.address) },
      });

    const before = await balances();
    const beforeFirst = await read(lender.privateKey);
    expect(((await beforeFirst.json()) as { billing: Record<string, string> }).billing.chargedUsdt).toBe("0.01");
    expect((await screen(await spec(), { walletAddress: wallet, callerAddress: lender.address })).status).toBe(200);
    const mid = await balances();
    expect(mid.treasuryUsdt - before.treasuryUsdt).toBe(20_000n);

    const free = await read(lender.privateKey);
    expect(free.status).toBe(200);
    expect(((await free.json()) as { billing: Record<string, string> }).billing.chargedUsdt).toBe("0.00");
    expect(free.headers.get("payment-response")).toBeNull();
    expect(await balances()).toEqual(mid);

    const other = await app.request(`/api/wallet/${wallet}/signals/drainSharePct`, {
      headers: { "x-payment": specHeader(await sign({ to: treasury }, USDT, lender2.privateKey), USDT.address) },
    });
    expect(((await other.json()) as { billing: Record<string, string> }).billing.chargedUsdt).toBe("0.01");
    const unpaid = await app.request(`/api/wallet/${wallet}/signals/drainSharePct`);
    expect(unpaid.status).toBe(402);
    expect(((await unpaid.json()) as { freeWhen?: string }).freeWhen).toMatch(/screen/);
  });
});
