import { randomBytes } from "node:crypto";
import type { RouteConfig } from "@hono/zod-openapi";
import { ExactEvmScheme } from "@x402/evm";
import { SIGN_IN_WITH_X, type SIWxExtension } from "@x402/extensions/sign-in-with-x";
import { wrapFetchWithPaymentFromConfig } from "@x402/fetch";
import { sql } from "drizzle-orm";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  creditStatementHandler,
  creditStatementRoute,
  purchaseHandler,
  purchaseRoute,
  reissueTokenHandler,
  reissueTokenRoute,
  revokeTokensHandler,
  revokeTokensRoute,
} from "../../api/credit/routes.ts";
import { registerPaymentSchemes } from "../../api/http/declare.ts";
import { mount } from "../../api/http/mount.ts";
import { type Billing, x402Billing } from "../../api/payments/billing.ts";
import type { PaymentCore } from "../../api/payments/core.ts";
import { rowsOf } from "../../api/payments/ledger/sql/statements.ts";
import { createPayments } from "../../api/payments/payments.ts";
import { screenBatchRoute } from "../../api/screen/batch-route.ts";
import { screenRoute } from "../../api/screen/route.ts";
import { openServiceStore, type ServiceStore } from "../../api/store/store.ts";
import { signalRoute } from "../../api/wallet/routes.ts";
import { configHandler, configRoute } from "../../api/x402/config-route.ts";
import { ApiError } from "../../shared/errors.ts";
import { startTestDevnet, type TestDevnet } from "../support/devnet.ts";
import { type DatabaseSlot, databaseSlot, testDatabase } from "../support/indexer.ts";
import { paidApp } from "../support/paid-app.ts";
import { devnetPaymentSettings, signAuthorization, specHeader, type Token, tokenBalance } from "../support/payments.ts";
import { signedChallenge } from "../support/sign-in.ts";

// Prepaid credit on the real payment path: the credit routes and the paid routes' declarations,
// the adapter, the payment core, the SQL ledger and a devnet chain (purchases are settled on it).
// Paid handlers are stand-ins that count their runs and fail on cue (404, 500).
const ORIGIN = "https://screening.example";

describe(`prepaid credit (${testDatabase})`, () => {
  let devnet: TestDevnet;
  let slot: DatabaseSlot;
  let stores: ServiceStore[] = [];
  let replicas: ReturnType<typeof appWith>[];
  let app: ReturnType<typeof appWith>;
  let USDT: Token;
  let treasury: Hex;
  let lender: { address: Hex; privateKey: Hex };
  let lender2: { address: Hex; privateKey: Hex };
  const borrower = "0x00000000000000000000000000000000000b0b01" as Hex;
  let handled = 0;

  function appWith(core: PaymentCore) {
    return paidApp(core, (app) => {
      const answer = async (c: { var: { billing: Promise<Billing> } }, extra: object) => {
        handled++;
        return { ...extra, x402Billing: x402Billing(await c.var.billing) };
      };
      mount(app, screenRoute, async (c) => {
        const { walletAddress } = c.req.valid("json");
        // Stand-ins for a handler's own refusals: a 404 and a crash, after the claim.
        if (walletAddress.endsWith("404")) throw new ApiError(404, "wallet_not_indexed", "not here");
        if (walletAddress.endsWith("500")) throw new Error("handler crashed");
        return c.json(await answer(c, { walletAddress })) as never;
      });
      mount(
        app,
        screenBatchRoute,
        async (c) => c.json(await answer(c, { wallets: c.req.valid("json").wallets })) as never,
      );
      mount(
        app,
        signalRoute,
        async (c) => c.json(await answer(c, { walletAddress: c.req.valid("param").address })) as never,
      );
      mount(app, purchaseRoute, purchaseHandler);
      mount(app, creditStatementRoute, creditStatementHandler);
      mount(app, reissueTokenRoute, reissueTokenHandler);
      mount(app, revokeTokensRoute, revokeTokensHandler);
      mount(app, configRoute, configHandler({ payments: core, routes: [screenRoute, purchaseRoute] as RouteConfig[] }));
      registerPaymentSchemes(app.openAPIRegistry);
    });
  }

  const treasuryUsdt = () => tokenBalance(devnet.manifest.rpcUrl, USDT.address, treasury);
  const lenderUsdt = (who = lender) => tokenBalance(devnet.manifest.rpcUrl, USDT.address, who.address);
  const pay = async (value: bigint, key: Hex = lender.privateKey) => ({
    "x-payment": specHeader(await signAuthorization(key, USDT, { to: treasury, value }), USDT.address),
  });

  type Call = { method: "GET" | "POST" | "DELETE"; path: string; body?: unknown };
  const send = async (call: Call, headers: Record<string, string> = {}, on = app) => {
    const res = await on.request(`${ORIGIN}${call.path}`, {
      method: call.method,
      headers: { ...(call.body ? { "content-type": "application/json" } : {}), ...headers },
      ...(call.body ? { body: JSON.stringify(call.body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : {}) as Record<string, any> };
  };
  const screen = (walletAddress: string = borrower): Call => ({
    method: "POST",
    path: "/api/lender/screen",
    body: { walletAddress },
  });
  const signal = (wallet: string = borrower): Call => ({
    method: "GET",
    path: `/api/wallet/${wallet}/signals/reputation`,
  });
  const buy = (amount: string): Call => ({ method: "POST", path: "/api/credit", body: { amount } });
  const statement: Call = { method: "GET", path: "/api/credit" };
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  /** A sign-in proof of `key`'s wallet: the challenge of an owner route's 401, signed (each proof is used once). */
  const signedIn = async (key: Hex = lender.privateKey) =>
    signedChallenge((await send(statement)).body.extensions[SIGN_IN_WITH_X] as SIWxExtension, key);
  const balanceOf = async (key: Hex = lender.privateKey) => (await send(statement, await signedIn(key))).body.balance;

  beforeAll(async () => {
    process.env.SIGN_IN_ORIGIN = ORIGIN;
    devnet = await startTestDevnet({ wallets: 2, months: 1, slotHours: 24 * 7 });
    USDT = devnet.manifest.tokens.USDT;
    treasury = devnet.manifest.service.treasury.address;
    [lender, lender2] = devnet.manifest.lenders as unknown as [typeof lender, typeof lender];
    slot = databaseSlot();
    await slot.prepare();
    // Two replicas: on Postgres each with its own connection pool; PGlite is one process's store, shared.
    stores.push(await openServiceStore(slot.store));
    if (testDatabase === "postgres") stores.push(await openServiceStore(slot.store));
    const settings = devnetPaymentSettings(devnet.manifestPath);
    replicas = [0, 1].map((i) => appWith(createPayments(settings, stores[i % stores.length]!.db)));
    app = replicas[0]!;
  }, 240_000);

  afterAll(async () => {
    delete process.env.SIGN_IN_ORIGIN;
    for (const store of stores) await store.close();
    stores = [];
    await slot?.drop();
    await devnet?.stop();
  });

  let token: string;

  it("sells credit for one x402 payment settled before the credit exists, and advertises it in 402 answers and the config", async () => {
    const unpaid = await send(screen());
    expect(unpaid.status).toBe(402);
    expect(unpaid.body.credit).toMatchObject({ buy: "POST /api/credit", minimumUsd: "0.10", maximumUsd: "50.00" });
    const config = (await send({ method: "GET", path: "/api/x402/config" })).body;
    expect(config.credit).toEqual(unpaid.body.credit);
    // The purchase's own 402 names this request's price and offers no credit.
    const quote = await send(buy("2.50"));
    expect(quote.status).toBe(402);
    expect(quote.body.accepts[0].maxAmountRequired).toBe("2500000");
    expect(quote.body.credit).toBeUndefined();
    for (const amount of ["0.09", "50.01"]) {
      const refused = await send(buy(amount), await pay(BigInt(Math.round(Number(amount) * 1e6))));
      expect([refused.status, refused.body.error.code]).toEqual([400, "credit_amount_out_of_range"]);
    }
    expect((await send(buy("2.505"))).status).toBe(400);

    const [treasuryBefore, lenderBefore] = [await treasuryUsdt(), await lenderUsdt()];
    const bought = await send(buy("2.50"), await pay(2_500_000n));
    expect(bought.status).toBe(200);
    expect(bought.headers.get("payment-response")).toBeTruthy();
    expect(bought.body).toMatchObject({
      credit: { purchased: "2.50", balance: "2.50" },
      creditToken: expect.stringMatching(/^crd_[A-Za-z0-9_-]{43}$/),
      x402Billing: { chargedUsdt: "2.50" },
    });
    expect(await treasuryUsdt()).toBe(treasuryBefore + 2_500_000n);
    expect(await lenderUsdt()).toBe(lenderBefore - 2_500_000n);
    token = bought.body.creditToken;

    const mine = (await send(statement, await signedIn())).body;
    expect(mine).toMatchObject({
      owner: lender.address.toLowerCase(),
      balance: "2.50",
      purchases: [
        {
          purchase: bought.body.credit.purchase,
          transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
          amount: "2.50",
          remaining: "2.50",
          status: "spendable",
        },
      ],
    });
    // Only the token's hash is stored.
    const stored = await stores[0]!.db.execute(sql`select hash from service.credit_token`);
    expect(JSON.stringify(stored)).not.toContain(token);
  });

  it("pays POST and GET routes by token and by sign-in proof, a batch per wallet, with nothing settled per call", async () => {
    const treasuryBefore = await treasuryUsdt();
    const byToken = await send(screen(), bearer(token));
    expect(byToken.status).toBe(200);
    expect(byToken.body.x402Billing).toMatchObject({ chargedUsdt: "0.01", creditLeft: "2.49" });
    expect(byToken.headers.get("credit-balance")).toBe("2490000");
    expect(byToken.headers.get("payment-response")).toBeNull();
    const read = await send(signal("0x00000000000000000000000000000000000b0b04"), bearer(token));
    expect([read.status, read.body.x402Billing.creditLeft]).toEqual([200, "2.48"]);
    // The wallet just screened from credit: its signal read is free to the same payer.
    const free = await send(signal(), bearer(token));
    expect([free.status, free.body.x402Billing.chargedUsdt, free.headers.get("credit-spend")]).toEqual([
      200,
      "0.00",
      null,
    ]);
    const batch = await send(
      {
        method: "POST",
        path: "/api/lender/screen/batch",
        body: {
          wallets: [
            borrower,
            "0x00000000000000000000000000000000000b0b02",
            "0x00000000000000000000000000000000000b0b03",
          ],
        },
      },
      bearer(token),
    );
    expect([batch.status, batch.body.x402Billing.chargedUsdt]).toEqual([200, "0.03"]);
    const proof = await signedIn();
    const bySignIn = await send(screen(), proof);
    expect([bySignIn.status, bySignIn.body.x402Billing.creditLeft]).toEqual([200, "2.44"]);
    // One use per proof.
    expect((await send(screen(), proof)).status).toBe(402);
    expect(await balanceOf()).toBe("2.44");
    expect(await treasuryUsdt()).toBe(treasuryBefore);
    const mine = (await send(statement, await signedIn())).body;
    expect(mine.spending).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ route: "POST /api/lender/screen", calls: 2, amount: "0.02" }),
        expect.objectContaining({ route: "POST /api/lender/screen/batch", calls: 1, amount: "0.03" }),
      ]),
    );
    expect(mine.recent[0]).toMatchObject({ route: "POST /api/lender/screen", amount: "0.01" });
    expect(mine.recent.map((r: { reference: string }) => r.reference)).toContain(byToken.headers.get("credit-spend"));
  });

  it("charges nothing for bad input, a 404 or a 5xx, and answers a Payment-Identifier retry again, charged once", async () => {
    const before = await balanceOf();
    const runs = handled;
    expect((await send({ ...screen(), body: { walletAddress: "0x12" } }, bearer(token))).status).toBe(400);
    expect((await send(screen("0x0000000000000000000000000000000000000404"), bearer(token))).status).toBe(404);
    expect((await send(screen("0x0000000000000000000000000000000000000500"), bearer(token))).status).toBe(500);
    expect(await balanceOf()).toBe(before);
    expect(handled).toBe(runs);

    const id = { "payment-identifier": `pid_${randomBytes(12).toString("hex")}` };
    const first = await send(screen(), { ...bearer(token), ...id });
    const again = await send(screen(), { ...bearer(token), ...id }, replicas[1]);
    expect([first.status, again.status]).toEqual([200, 200]);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get("x-payment-replayed")).toBe("true");
    const other = await send(screen("0x00000000000000000000000000000000000b0b09"), { ...bearer(token), ...id });
    expect([other.status, other.body.error.code]).toEqual([409, "payment_id_reused"]);
    expect(await balanceOf()).toBe("2.43");
  });

  it("refuses a revoked token at once, on every replica; a new token spends the same balance", async () => {
    const revoked = await send({ method: "DELETE", path: "/api/credit/token" }, await signedIn());
    expect(revoked.body).toEqual({ revoked: 1 });
    for (const replica of replicas) {
      const refused = await send(screen(), bearer(token), replica);
      expect([refused.status, refused.body.error.code]).toEqual([401, "credit_token_invalid"]);
    }
    const issued = await send({ method: "POST", path: "/api/credit/token" }, await signedIn());
    expect(issued.body).toMatchObject({ revoked: 0, creditToken: expect.stringMatching(/^crd_/) });
    token = issued.body.creditToken;
    expect((await send(screen(), bearer(token))).status).toBe(200);
    expect(await balanceOf()).toBe("2.42");
    // Without a sign-in the owner routes are 401 with a challenge.
    expect((await send({ method: "DELETE", path: "/api/credit/token" })).status).toBe(401);
  });

  it("spends exactly the balance under 1,000 concurrent calls across two replicas, and not a unit more", async () => {
    const calls = 1000;
    const results = await Promise.all(
      Array.from({ length: calls }, (_, i) => send(screen(), bearer(token), replicas[i % 2])),
    );
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(242);
    expect(statuses.filter((s) => s === 402)).toHaveLength(calls - 242);
    expect(new Set(results.filter((r) => r.status === 402).map((r) => r.body.code))).toEqual(
      new Set(["credit_insufficient"]),
    );
    expect(await balanceOf()).toBe("0.00");
    const [spent] = rowsOf<{ units: string }>(
      await stores[0]!.db.execute(
        sql`select sum(amount)::text as units from service.credit_spend where owner = ${lender.address.toLowerCase()}`,
      ),
    );
    expect(spent).toEqual({ units: "2500000" });
  });

  it("lets a stock @x402/fetch client fall back to paying per call when the credit is spent", async () => {
    const paying = wrapFetchWithPaymentFromConfig(
      (input, init) => {
        const request = new Request(input as Request, init);
        request.headers.set("authorization", `Bearer ${token}`);
        return Promise.resolve(app.request(request));
      },
      {
        schemes: [{ network: "eip155:42220", client: new ExactEvmScheme(privateKeyToAccount(lender.privateKey)) }],
        spendControls: {
          allowedAssets: [{ network: "eip155:42220" as const, asset: USDT.address, maxAmountPerPayment: "100000" }],
        },
      },
    );
    const before = await treasuryUsdt();
    // A wallet this lender never screened (a screened one's signal read is free).
    const res = await paying(`${ORIGIN}${signal("0x00000000000000000000000000000000000b0b05").path}`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as Record<string, any>).x402Billing).toMatchObject({ chargedUsdt: "0.01" });
    expect(await treasuryUsdt()).toBe(before + 10_000n);
  });

  it("pays nothing from another wallet's credit, and buys for the paying wallet only", async () => {
    const bought = await send(buy("0.10"), await pay(100_000n, lender2.privateKey));
    expect(bought.status).toBe(200);
    expect(await balanceOf(lender2.privateKey)).toBe("0.10");
    expect(await balanceOf()).toBe("0.00");
    const refused = await send(screen(), bearer(token));
    expect([refused.status, refused.body.code]).toEqual([402, "credit_insufficient"]);
  });
});
