import { decodePaymentResponseHeader } from "@x402/core/http";
import { eq } from "drizzle-orm";
import { createPublicClient, createWalletClient, type Hex, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { mount } from "../../api/http/mount.ts";
import { x402Billing } from "../../api/payments/billing.ts";
import type { PaymentCore } from "../../api/payments/core.ts";
import { createFacilitator } from "../../api/payments/facilitator.ts";
import { createPayments } from "../../api/payments/payments.ts";
import { screenRoute } from "../../api/screen/route.ts";
import { payment } from "../../api/store/schema.ts";
import { openServiceStore, type ServiceStore } from "../../api/store/store.ts";
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
  signAuthorization,
  specHeader,
  type Token,
  tokenBalance,
} from "../support/payments.ts";
import { type RpcProxy, startRpcProxy } from "../support/rpc-proxy.ts";

// Settlements whose outcome is not known when the request ends (the receipt comes late, the
// process dies, the RPC stalls) on a real chain: the outcome is read from the chain, a retry with
// the same payment gets the data it paid for, and nothing is charged twice or without data.
describe(`settlement recovery (${testDatabase})`, () => {
  let devnet: TestDevnet;
  let slot: DatabaseSlot;
  let store: ServiceStore;
  let proxy: RpcProxy;
  let settings: PaymentSettings;
  let USDT: Token;
  let treasury: Hex;
  let lender: { address: Hex; privateKey: Hex };
  const borrower = "0x00000000000000000000000000000000000b0b00" as Hex;
  const hangingBorrower = "0x000000000000000000000000000000000000dead" as Hex;
  let handled = 0;
  let releaseHang: () => void = () => {};
  /** The next screen of hangingBorrower never ends (until released): its process "died" in the handler. */
  let hangNext = false;

  function appWith(payments: PaymentCore) {
    return paidApp(payments, (app) => {
      mount(app, screenRoute, async (c) => {
        handled++;
        const { walletAddress } = c.req.valid("json");
        // A request that never concludes: the process "dies" while the handler runs.
        if (walletAddress === hangingBorrower && hangNext) {
          hangNext = false;
          await new Promise<void>((resolve) => (releaseHang = resolve));
        }
        return c.json({
          paidData: `screen of ${walletAddress}`,
          x402Billing: x402Billing(await c.var.billing),
        }) as never;
      });
    });
  }

  const rpc = async (method: string, params: unknown[] = []) => {
    const res = await fetch(devnet.manifest.rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    });
    const body = (await res.json()) as { result?: unknown; error?: { message: string } };
    if (body.error) throw new Error(`${method}: ${body.error.message}`);
    return body.result;
  };
  const automine = (on: boolean) => rpc("evm_setAutomine", [on]);
  const treasuryUsdt = () => tokenBalance(devnet.manifest.rpcUrl, USDT.address, treasury);
  const rowOf = async (nonce: string) => (await store.db.select().from(payment).where(eq(payment.nonce, nonce)))[0]!;
  const sign = (fields: Partial<Parameters<typeof signAuthorization>[2]> = {}) =>
    signAuthorization(lender.privateKey, USDT, { to: treasury, ...fields });
  const screen = (app: ReturnType<typeof appWith>, header: string, walletAddress: Hex = borrower) =>
    app.request("/api/lender/screen", {
      method: "POST",
      headers: { "content-type": "application/json", "x-payment": header },
      body: JSON.stringify({ walletAddress, callerAddress: lender.address }),
    });
  /** A core as a service process has it, with short waits so that "the receipt came too late" happens in a test. */
  const core = () =>
    createPayments(settings, store.db, createFacilitator(settings), { receiptWaitMs: 1_000, settlingWaitMs: 500 });

  beforeAll(async () => {
    devnet = await startTestDevnet({ wallets: 4, months: 12, slotHours: 24 * 7 });
    ({ USDT } = devnet.manifest.tokens);
    treasury = devnet.manifest.service.treasury.address;
    [lender] = devnet.manifest.lenders as unknown as [typeof lender];
    slot = databaseSlot();
    await slot.prepare();
    store = await openServiceStore(slot.store);
    proxy = await startRpcProxy(devnet.manifest.rpcUrl);
    settings = devnetPaymentSettings(devnet.manifestPath, proxy.url);
  }, 240_000);

  afterEach(async () => {
    proxy.down = false;
    await automine(true);
  });

  afterAll(async () => {
    releaseHang();
    await proxy?.close();
    await store?.close();
    await slot?.drop();
    await devnet?.stop();
  });

  /** A paid screen whose settlement transaction is sent but not mined before the request gives up. */
  async function unminedSettlement(app: ReturnType<typeof appWith>, fields: Parameters<typeof sign>[0] = {}) {
    const signed = await sign(fields);
    const header = specHeader(signed, USDT.address);
    await automine(false);
    const first = await screen(app, header);
    expect(first.status).toBe(503);
    expect(first.headers.get("retry-after")).toBeTruthy();
    const body = (await first.json()) as { code: string; paidData?: string };
    expect(body.code).toBe("settlement_pending");
    expect(body.paidData).toBeUndefined();
    const row = await rowOf(signed.authorization.nonce);
    expect(row.status).toBe("settling");
    expect(row.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    return { signed, header, row };
  }

  it("records the settlement before waiting: the transaction mined after the request gave up is the payer's, and a retry gets the data, charged once", async () => {
    const app = appWith(core());
    const before = await treasuryUsdt();
    const { header, row } = await unminedSettlement(app);
    const handledBefore = handled;
    await rpc("evm_mine");
    const retry = await screen(app, header);
    expect(retry.status).toBe(200);
    expect(((await retry.json()) as { paidData: string }).paidData).toContain(borrower);
    expect(decodePaymentResponseHeader(retry.headers.get("payment-response")!).transaction).toBe(row.transaction);
    expect(handled).toBe(handledBefore); // the stored answer, not a second run
    expect((await rowOf(row.nonce)).status).toBe("settled");
    expect((await treasuryUsdt()) - before).toBe(10_000n);
  });

  it("answers two concurrent retries of such a payment once each, with one charge", async () => {
    const app = appWith(
      createPayments(settings, store.db, createFacilitator(settings), { receiptWaitMs: 1_000, settlingWaitMs: 5_000 }),
    );
    const before = await treasuryUsdt();
    const { header, row } = await unminedSettlement(app);
    const retries = Promise.all([screen(app, header), screen(app, header)]);
    await new Promise((r) => setTimeout(r, 300));
    await rpc("evm_mine");
    const [a, b] = await retries;
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(await a.text()).toBe(await b.text());
    expect((await rowOf(row.nonce)).status).toBe("settled");
    expect((await treasuryUsdt()) - before).toBe(10_000n);
  });

  it("reconciles at start the rows a crash left settling, and charges none of them twice", async () => {
    const before = await treasuryUsdt();
    const crashed = appWith(core());
    const left = [await unminedSettlement(crashed), await unminedSettlement(crashed)];
    await rpc("evm_mine");
    // The process restarts: a new core, and the start-up sweep (idle 0: whatever the rows' age).
    const restarted = core();
    const swept = await restarted.reconcileUnresolved(0);
    expect(swept.resolved).toBeGreaterThanOrEqual(2);
    for (const { row } of left) {
      const now = await rowOf(row.nonce);
      expect(now).toMatchObject({ status: "settled", transaction: row.transaction });
      expect(now.reconciledAt).toBeInstanceOf(Date);
    }
    const app = appWith(restarted);
    for (const { header } of left) expect((await screen(app, header)).status).toBe(200);
    expect((await treasuryUsdt()) - before).toBe(20_000n);
    expect((await restarted.ledger.outcomeCounts()).reconciled).toBeGreaterThanOrEqual(2);
  });

  it("settles from the chain a claim whose process died before settling when the authorization was then used on chain, and a retry runs the handler again without charging", async () => {
    const before = await treasuryUsdt();
    const signed = await sign();
    const header = specHeader(signed, USDT.address);
    const dying = appWith(core());
    hangNext = true;
    const died = screen(dying, header, hangingBorrower); // claimed; the handler never ends (the process died)
    for (
      let i = 0;
      i < 100 && !(await store.db.select().from(payment).where(eq(payment.nonce, signed.authorization.nonce))).length;
      i++
    )
      await new Promise((r) => setTimeout(r, 50));
    expect((await rowOf(signed.authorization.nonce)).status).toBe("pending");
    // Somebody (the payer, another facilitator) submits the authorization on chain meanwhile.
    const wallet = createWalletClient({
      chain: devnetChain(devnet.manifest.rpcUrl),
      transport: http(devnet.manifest.rpcUrl),
      account: privateKeyToAccount(lender.privateKey),
    });
    const a = signed.authorization;
    const tx = await wallet.writeContract({
      address: USDT.address,
      abi: devStablecoinAbi,
      functionName: "transferWithAuthorization",
      args: [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, signed.signature],
    });
    await waitForReceipt(createPublicClient({ transport: http(devnet.manifest.rpcUrl) }), { hash: tx });
    await store.db
      .update(payment)
      .set({ updatedAt: new Date(Date.now() - 5 * 60_000) })
      .where(eq(payment.nonce, a.nonce));

    const restarted = core();
    await restarted.reconcileUnresolved(0);
    expect(await rowOf(a.nonce)).toMatchObject({ status: "settled", transaction: tx, responseBody: null });

    const app = appWith(restarted);
    const handledBefore = handled;
    const retry = await screen(app, header, hangingBorrower);
    const retry2 = await screen(app, header, hangingBorrower);
    // The dead request's handler ends at last: it must change nothing.
    releaseHang();
    await died;
    expect((await rowOf(a.nonce)).status).toBe("settled");
    expect(retry.status).toBe(200);
    expect(decodePaymentResponseHeader(retry.headers.get("payment-response")!).transaction).toBe(tx);
    expect(((await retry.json()) as { x402Billing: { chargedUnits: string } }).x402Billing.chargedUnits).toBe("10000");
    expect(handled - handledBefore).toBe(1); // run again once; the second retry gets the answer it stored
    expect(retry2.status).toBe(200);
    expect(retry2.headers.get("x-payment-replayed")).toBe("true");
    expect((await rowOf(a.nonce)).responseBody).toContain("paidData");
    expect((await treasuryUsdt()) - before).toBe(10_000n);
  });

  it("runs the handler once for two concurrent retries of a charged payment whose answer was never stored: one answer each, the same, one charge", async () => {
    const before = await treasuryUsdt();
    const signed = await sign();
    const header = specHeader(signed, USDT.address);
    const dying = appWith(core());
    hangNext = true;
    const died = screen(dying, header, hangingBorrower); // claimed; the process "dies" in the handler
    const a = signed.authorization;
    for (let i = 0; i < 100 && !(await store.db.select().from(payment).where(eq(payment.nonce, a.nonce))).length; i++)
      await new Promise((r) => setTimeout(r, 50));
    const wallet = createWalletClient({
      chain: devnetChain(devnet.manifest.rpcUrl),
      transport: http(devnet.manifest.rpcUrl),
      account: privateKeyToAccount(lender.privateKey),
    });
    const tx = await wallet.writeContract({
      address: USDT.address,
      abi: devStablecoinAbi,
      functionName: "transferWithAuthorization",
      args: [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, signed.signature],
    });
    await waitForReceipt(createPublicClient({ transport: http(devnet.manifest.rpcUrl) }), { hash: tx });
    await store.db
      .update(payment)
      .set({ updatedAt: new Date(Date.now() - 5 * 60_000) })
      .where(eq(payment.nonce, a.nonce));
    const restarted = core();
    await restarted.reconcileUnresolved(0);
    expect(await rowOf(a.nonce)).toMatchObject({ status: "settled", transaction: tx, responseBody: null });

    const app = appWith(restarted);
    const handledBefore = handled;
    const [first, second] = await Promise.all([
      screen(app, header, hangingBorrower),
      screen(app, header, hangingBorrower),
    ]);
    releaseHang();
    await died;
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(await first.text()).toBe(await second.text());
    expect(handled - handledBefore).toBe(1);
    expect((await rowOf(a.nonce)).responseBody).toContain("paidData");
    expect((await treasuryUsdt()) - before).toBe(10_000n);
  });

  it("marks an authorization that expires unused as expired, never charged, and the relayer's next settlement is not stuck behind the dropped one", async () => {
    const app = appWith(core());
    const before = await treasuryUsdt();
    const validBefore = nowSeconds() + 8n;
    const { header, row } = await unminedSettlement(app, { validBefore });
    await rpc("anvil_dropTransaction", [row.transaction]);
    const latest = (await rpc("eth_getBlockByNumber", ["latest", false])) as { timestamp: string };
    await rpc("evm_setNextBlockTimestamp", [Math.max(Number(validBefore), Number(BigInt(latest.timestamp)) + 1)]);
    await rpc("evm_mine");
    await automine(true);
    await core().reconcileUnresolved(0);
    const now = await rowOf(row.nonce);
    expect(now.status).toBe("expired");
    expect(now.settledAt).toBeNull();
    while (nowSeconds() + 6n <= validBefore) await new Promise((r) => setTimeout(r, 500));
    const retry = await screen(app, header);
    expect(retry.status).toBe(402);
    expect(((await retry.json()) as { code: string }).code).toBe("authorization_expired");
    expect(await treasuryUsdt()).toBe(before);

    // The same relayer settles the next payment at once (its nonce was read again from the chain).
    const next = await screen(app, specHeader(await sign(), USDT.address));
    expect(next.status).toBe(200);
    expect((await treasuryUsdt()) - before).toBe(10_000n);
  });

  it("answers a valid payment 503 settlement_unavailable with Retry-After while the RPC is down, never a signature error, and charges nothing", async () => {
    const app = appWith(core());
    const before = await treasuryUsdt();
    const signed = await sign();
    proxy.down = true;
    const res = await screen(app, specHeader(signed, USDT.address));
    proxy.down = false;
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBeTruthy();
    const body = (await res.json()) as { code: string; error: { code: string } };
    expect(body.error.code).toBe("settlement_unavailable");
    expect(await treasuryUsdt()).toBe(before);
    // Once the RPC answers again, the same payment goes through.
    const again = await screen(app, specHeader(signed, USDT.address));
    expect(again.status).toBe(200);
    expect((await treasuryUsdt()) - before).toBe(10_000n);
  });

  it("counts payments by outcome and reports rows pending too long", async () => {
    const payments = core();
    const counts = await payments.ledger.outcomeCounts();
    expect(counts.settled).toBeGreaterThanOrEqual(6);
    expect(counts.expired).toBe(1);
    expect(counts.reconciled).toBeGreaterThanOrEqual(4);
    expect(await payments.ledger.stalePending(0)).toMatchObject({ count: expect.any(Number) });
    expect((await payments.ledger.stalePending(60 * 60_000)).count).toBe(0);
    expect(await payments.drain(1_000)).toEqual({ drained: true, inFlight: 0 });
  });
});
