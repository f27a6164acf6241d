import { createPublicClient, type Hex, http, parseUnits } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { purchaseHandler, purchaseRoute } from "../../api/credit/routes.ts";
import { mount } from "../../api/http/mount.ts";
import { x402Billing } from "../../api/payments/billing.ts";
import type { PaymentCore } from "../../api/payments/core.ts";
import { createFacilitator } from "../../api/payments/facilitator.ts";
import { createPayments } from "../../api/payments/payments.ts";
import { screenRoute } from "../../api/screen/route.ts";
import { openServiceStore, type ServiceStore } from "../../api/store/store.ts";
import type { PaymentSettings } from "../../config/payments.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { startTestDevnet } from "../support/devnet.ts";
import { type DatabaseSlot, databaseSlot, testDatabase } from "../support/indexer.ts";
import { paidApp } from "../support/paid-app.ts";
import { devnetPaymentSettings, signAuthorization, specHeader, tokenBalance } from "../support/payments.ts";

const PAYMENTS = 120;
/** A new paid screen every ARRIVAL_MS (open loop: they keep coming while the chain is frozen). */
const ARRIVAL_MS = 50;
const FREEZE_AFTER_MS = 1_500;
const FREEZE_MS = 6_000;

// The chain stops answering (anvil under SIGSTOP: connections are accepted, nothing is answered,
// then everything queued is processed at SIGCONT) in the middle of a run of paid screens, each
// client retrying a refused call with the same payment as the answers tell it to.
describe(`paid screens while the chain freezes (${testDatabase})`, () => {
  let devnet: TestDevnet;
  let slot: DatabaseSlot;
  let store: ServiceStore;
  let settings: PaymentSettings;
  let payments: PaymentCore;
  const borrower = "0x00000000000000000000000000000000000b0b00" as Hex;

  function appWith(core: PaymentCore) {
    return paidApp(core, (app) => {
      mount(app, purchaseRoute, purchaseHandler);
      mount(
        app,
        screenRoute,
        async (c) =>
          c.json({
            paidData: `screen of ${c.req.valid("json").walletAddress}`,
            x402Billing: x402Billing(await c.var.billing),
          }) as never,
      );
    });
  }

  /** Whether the authorization was used on chain (authorizationState): the money moved. */
  const usedOnChain = (signed: Awaited<ReturnType<typeof signAuthorization>>) =>
    createPublicClient({ transport: http(devnet.manifest.rpcUrl) }).readContract({
      address: devnet.manifest.tokens.USDT.address,
      abi: devStablecoinAbi,
      functionName: "authorizationState",
      args: [signed.authorization.from, signed.authorization.nonce],
    });

  beforeAll(async () => {
    devnet = await startTestDevnet({ wallets: 4, months: 12, slotHours: 24 * 7 });
    slot = databaseSlot();
    await slot.prepare();
    store = await openServiceStore(slot.store);
    settings = devnetPaymentSettings(devnet.manifestPath);
    // Short waits, so that "the receipt did not come in time" happens within a short freeze.
    payments = createPayments(settings, store.db, createFacilitator(settings), {
      receiptWaitMs: 2_000,
      settlingWaitMs: 1_000,
    });
  }, 240_000);

  afterAll(async () => {
    if (devnet) process.kill(devnet.anvil.pid, "SIGCONT");
    await store?.close();
    await slot?.drop();
    await devnet?.stop();
  });

  it("charges no payment without data and answers no valid payment with a signature error: every authorization used on chain got exactly one answer with data", async () => {
    const app = appWith(payments);
    const { USDT } = devnet.manifest.tokens;
    const treasury = devnet.manifest.service.treasury.address;
    const lenders = devnet.manifest.lenders.slice(0, 3) as unknown as { address: Hex; privateKey: Hex }[];
    const before = await tokenBalance(devnet.manifest.rpcUrl, USDT.address, treasury);
    const jobs = await Promise.all(
      Array.from({ length: PAYMENTS }, async (_, i) => {
        const lender = lenders[i % lenders.length]!;
        const signed = await signAuthorization(lender.privateKey, USDT, { to: treasury });
        return {
          lender,
          signed,
          header: specHeader(signed, USDT.address),
          answers: [] as { status: number; code?: string; ms: number }[],
          data: 0,
        };
      }),
    );

    // Payments arrive for 6 s; the chain freezes 1.5 s in, for 6 s: most of them arrive during the freeze.
    const freeze = (async () => {
      await new Promise((r) => setTimeout(r, FREEZE_AFTER_MS));
      process.kill(devnet.anvil.pid, "SIGSTOP");
      await new Promise((r) => setTimeout(r, FREEZE_MS));
      process.kill(devnet.anvil.pid, "SIGCONT");
    })();
    const pay = async (job: (typeof jobs)[number]) => {
      // Retry with the same payment while the answer says so (503 + Retry-After), as an x402 client would.
      for (let attempt = 0; attempt < 60; attempt++) {
        const started = Date.now();
        const res = await app.request("/api/lender/screen", {
          method: "POST",
          headers: { "content-type": "application/json", "x-payment": job.header },
          body: JSON.stringify({ walletAddress: borrower, callerAddress: job.lender.address }),
        });
        const body = (await res.json()) as { code?: string; paidData?: string };
        job.answers.push({ status: res.status, code: body.code, ms: Date.now() - started });
        if (res.status === 200) {
          expect(body.paidData).toContain(borrower);
          job.data++;
          return;
        }
        if (res.status !== 503) return; // a definitive refusal
        expect(res.headers.get("retry-after")).toBeTruthy();
        await new Promise((r) => setTimeout(r, 500));
      }
    };
    await Promise.all(
      jobs.map(async (job, i) => {
        await new Promise((r) => setTimeout(r, i * ARRIVAL_MS));
        await pay(job);
      }),
    );
    await freeze;
    // Whatever is still unknown is settled from the chain.
    await payments.reconcileUnresolved(0);

    const used = await Promise.all(jobs.map((j) => usedOnChain(j.signed)));
    const answers = jobs.flatMap((j) => j.answers);
    const tally = new Map<string, number>();
    for (const a of answers)
      tally.set(`${a.status} ${a.code ?? ""}`.trim(), (tally.get(`${a.status} ${a.code ?? ""}`.trim()) ?? 0) + 1);
    const unavailable = answers.filter((a) => a.code === "settlement_unavailable");
    const slowest = Math.max(0, ...unavailable.map((a) => a.ms));
    console.log(
      `[freeze] ${PAYMENTS} payments, ${answers.length} answers (${[...tally].map(([k, n]) => `${k}: ${n}`).join(", ")}); slowest settlement_unavailable ${slowest} ms`,
    );

    // The freeze was felt: some answers said to retry, none called a valid payment bad.
    expect(answers.filter((a) => a.status === 503).length).toBeGreaterThan(0);
    expect(
      answers
        .filter((a) => a.status === 503)
        .every((a) => a.code === "settlement_unavailable" || a.code === "settlement_pending"),
    ).toBe(true);
    expect(answers.filter((a) => a.status !== 200 && a.status !== 503)).toEqual([]);
    // A frozen chain is told quickly (VERIFY_TIMEOUT_MS, 5 s), not after a 20 s transport timeout.
    expect(slowest).toBeLessThan(9_000);
    // Exactly one answer with data per payment, and a payment used on chain for each.
    expect(jobs.map((j) => j.data)).toEqual(jobs.map(() => 1));
    expect(used.every(Boolean)).toBe(true);
    expect((await tokenBalance(devnet.manifest.rpcUrl, USDT.address, treasury)) - before).toBe(
      10_000n * BigInt(PAYMENTS),
    );
    const counts = await payments.ledger.outcomeCounts();
    expect(counts).toMatchObject({ settled: PAYMENTS, pending: 0, settling: 0, failed: 0 });
  });

  it("ends a credit purchase made during a freeze with the credit or the money still in the payer's wallet, never neither", async () => {
    const app = appWith(payments);
    const { USDT } = devnet.manifest.tokens;
    const treasury = devnet.manifest.service.treasury.address;
    const lenders = devnet.manifest.lenders.slice(0, 2) as unknown as { address: Hex; privateKey: Hex }[];
    const credit = async (wallet: Hex) => payments.ledger.credit.balance(wallet.toLowerCase() as Hex);
    const [creditBefore, walletBefore] = [
      await Promise.all(lenders.map((l) => credit(l.address))),
      await Promise.all(lenders.map((l) => tokenBalance(devnet.manifest.rpcUrl, USDT.address, l.address))),
    ];
    const PURCHASES = 8;
    const jobs = await Promise.all(
      Array.from({ length: PURCHASES }, async (_, i) => {
        const lender = lenders[i % lenders.length]!;
        // Distinct amounts (0.11, 0.12, …): which purchases were granted shows in the balances.
        const cents = 11 + i;
        const signed = await signAuthorization(lender.privateKey, USDT, {
          to: treasury,
          value: BigInt(cents) * 10_000n,
        });
        // Half the clients give up at the first 503; the others retry with the same payment as told.
        return {
          lender,
          signed,
          cents,
          header: specHeader(signed, USDT.address),
          patient: i % 2 === 0,
          statuses: [] as number[],
          balances: [] as bigint[],
        };
      }),
    );
    const freeze = (async () => {
      await new Promise((r) => setTimeout(r, 200));
      process.kill(devnet.anvil.pid, "SIGSTOP");
      await new Promise((r) => setTimeout(r, FREEZE_MS));
      process.kill(devnet.anvil.pid, "SIGCONT");
    })();
    await Promise.all(
      jobs.map(async (job, i) => {
        await new Promise((r) => setTimeout(r, i * 400));
        for (let attempt = 0; attempt < 30; attempt++) {
          const res = await app.request("/api/credit", {
            method: "POST",
            headers: { "content-type": "application/json", "x-payment": job.header },
            body: JSON.stringify({ amount: `0.${job.cents}` }),
          });
          job.statuses.push(res.status);
          if (res.status === 200)
            job.balances.push(parseUnits(((await res.json()) as { credit: { balance: string } }).credit.balance, 6));
          if (res.status !== 503 || !job.patient) return;
          await new Promise((r) => setTimeout(r, 500));
        }
      }),
    );
    await freeze;
    // What is still unknown is settled from the chain, as the reconciler does on its next sweep.
    await payments.reconcileUnresolved(0);

    for (const [l, lender] of lenders.entries()) {
      const mine = jobs.filter((j) => j.lender === lender);
      const used = await Promise.all(mine.map((j) => usedOnChain(j.signed)));
      const paid = mine.filter((_, i) => used[i]).reduce((sum, j) => sum + BigInt(j.cents) * 10_000n, 0n);
      // The money that left the wallet is exactly the credit granted: none lost, none given free.
      expect(walletBefore[l]! - (await tokenBalance(devnet.manifest.rpcUrl, USDT.address, lender.address))).toBe(paid);
      const granted = await credit(lender.address);
      expect(granted - creditBefore[l]!).toBe(paid);
      // No answer (a retry answered by rerunning a settled purchase included) counts its purchase twice.
      for (const balance of mine.flatMap((j) => j.balances)) expect(balance).toBeLessThanOrEqual(granted);
      // Every answer was data, a retry, or a definitive refusal with nothing charged.
      for (const job of mine)
        expect(
          job.statuses.every((s) => [200, 402, 503].includes(s)),
          `${job.statuses}`,
        ).toBe(true);
    }
    console.log(`[freeze] credit purchases: ${jobs.map((j) => j.statuses.join(">")).join(", ")}`);
    // The freeze was felt: purchases were told to retry, and some clients gave up there.
    expect(jobs.some((j) => j.statuses.includes(503))).toBe(true);
  });
});
