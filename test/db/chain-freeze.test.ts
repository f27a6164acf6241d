import { createPublicClient, type Hex, http } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
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
      mount(
        app,
        screenRoute,
        async (c) =>
          c.json({
            paidData: `screen of ${c.req.valid("json").walletAddress}`,
            x402Billing: x402Billing(c.var.billing),
          }) as never,
      );
    });
  }

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

    const chain = createPublicClient({ transport: http(devnet.manifest.rpcUrl) });
    const used = await Promise.all(
      jobs.map((j) =>
        chain.readContract({
          address: USDT.address,
          abi: devStablecoinAbi,
          functionName: "authorizationState",
          args: [j.signed.authorization.from, j.signed.authorization.nonce],
        }),
      ),
    );
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
});
