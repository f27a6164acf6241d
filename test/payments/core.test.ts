import { RpcRequestError } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { celo } from "viem/chains";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ABANDONED_AFTER_MS, EXPIRY_MARGIN_SECONDS, SETTLE_WINDOW_SECONDS } from "../../api/payments/lifecycle.ts";
import { MAX_SETTLE_ATTEMPTS } from "../../api/payments/reconcile.ts";
import { type RelayerClient, relayerSettler } from "../../api/payments/relayer.ts";
import { SettlementWorker } from "../../api/payments/settlement-worker.ts";
import type { Address } from "../../config/addresses.ts";
import {
  ANSWER,
  claimOf,
  codeOf,
  PAYER_KEYS,
  paidRequest,
  payerOf,
  payScreen,
  REPORT,
  SCREEN,
  SIGNAL,
  SUBJECT,
  sign,
  USDC,
  USDT,
  v1Payment,
  v2Payment,
  World,
  xPayment,
} from "./fakes.ts";

// Every way the payment core admits, refuses, settles and replays, with its collaborators faked
// (test/payments/fakes.ts): a chain that keeps EIP-3009 state, a facilitator and a relayer on it,
// the in-memory ledger. No process, no database, no chain.

const [alice, bob] = PAYER_KEYS;
const OTHER = "0x00000000000000000000000000000000000000b1" as const;
const answered = { answer: ANSWER };

/** Moves the clock (Date.now: the core's and the ledger's) forward. */
function skipTime(ms: number) {
  const now = Date.now();
  vi.spyOn(Date, "now").mockImplementation(() => now + ms);
}
afterEach(() => {
  vi.restoreAllMocks();
});

describe("admission refusals", () => {
  it("answers a call without payment with 402: the x402 v1 body and the v2 PAYMENT-REQUIRED header, both tokens", async () => {
    const world = new World("before-remote");
    const admitted = await world.core().admit(SCREEN, paidRequest({}));
    if (!("reply" in admitted)) throw new Error("claimed without payment");
    expect(admitted.reply.status).toBe(402);
    expect(JSON.parse(admitted.reply.body)).toMatchObject({
      x402Version: 1,
      code: "payment_required",
      accepts: [{ maxAmountRequired: "10000" }, { maxAmountRequired: "10000" }],
    });
    expect(admitted.reply.headers["PAYMENT-REQUIRED"]).toBeTruthy();
    // The payment-identifier extension is declared (optional): a client may send an idempotency key.
    expect(JSON.parse(admitted.reply.body).extensions["payment-identifier"]).toMatchObject({
      info: { required: false },
    });
  });

  it("refuses a malformed header (400), a bad signature, a short balance and an expired authorization (402), claiming nothing", async () => {
    const world = new World("before-remote");
    const core = world.core();
    const malformed = await core.admit(SCREEN, paidRequest({ xPayment: "{not json" }));
    expect("reply" in malformed && [malformed.reply.status, codeOf(malformed.reply)]).toEqual([
      400,
      "payment_malformed",
    ]);

    const good = await sign(alice);
    const forged = { ...good, signature: (await sign(bob, { nonce: good.authorization.nonce })).signature };
    const badSignature = await core.admit(SCREEN, paidRequest(xPayment(forged)));
    expect("reply" in badSignature && [badSignature.reply.status, codeOf(badSignature.reply)]).toEqual([
      402,
      "invalid_signature",
    ]);

    world.chain.fund(USDT, good.authorization.from, 5_000n);
    const poor = await core.admit(SCREEN, paidRequest(xPayment(good)));
    expect("reply" in poor && codeOf(poor.reply)).toBe("insufficient_balance");

    const expired = await core.admit(
      SCREEN,
      paidRequest(xPayment(await sign(alice, { validBefore: BigInt(Math.floor(Date.now() / 1000) - 1) }))),
    );
    expect("reply" in expired && codeOf(expired.reply)).toBe("authorization_expired");
    expect(world.ledger.snapshot()).toEqual([]);
  });

  it("refuses a payer listed on the sanctions oracle (403 sanctioned_payer) in both modes, before verifying, claiming or settling; another payer pays", async () => {
    for (const mode of ["before-remote", "deferred"] as const) {
      const world = new World(mode);
      const listed = new Set([(await sign(alice)).authorization.from]);
      const core = world.core(world.ledger, { sanctions: { isListed: async (payer) => listed.has(payer) } });
      const refused = await core.admit(SCREEN, paidRequest(xPayment(await sign(alice))));
      expect("reply" in refused && [refused.reply.status, codeOf(refused.reply)], mode).toEqual([
        403,
        "sanctioned_payer",
      ]);
      expect(world.ledger.snapshot(), mode).toEqual([]);
      const paid = await core.admit(SCREEN, paidRequest(xPayment(await sign(bob))));
      await core.conclude(SCREEN, paidRequest({}), claimOf(paid), answered);
      expect(world.chain.charges.length + world.queued, mode).toBe(1);
      expect(
        world.chain.charges.filter((c) => listed.has(c.payer as Address)),
        mode,
      ).toEqual([]);
    }
  });

  it("still answers a retry of a payment charged before its payer was listed: money already taken gets its data", async () => {
    const world = new World("before-remote");
    const listed = new Set<Address>();
    const core = world.core(world.ledger, { sanctions: { isListed: async (payer) => listed.has(payer) } });
    const signed = await sign(alice);
    await payScreen(core, xPayment(signed));
    listed.add(signed.authorization.from);
    const retry = await core.admit(SCREEN, paidRequest(xPayment(signed)));
    expect("reply" in retry && retry.reply.status).toBe(200);
    expect(world.chain.charges).toHaveLength(1);
    const fresh = await core.admit(SCREEN, paidRequest(xPayment(await sign(alice))));
    expect("reply" in fresh && codeOf(fresh.reply)).toBe("sanctioned_payer");
  });

  it("refuses a payment presented with another request (payment_reused) and an identifier reused for another request (payment_id_reused)", async () => {
    const world = new World("before-remote");
    const core = world.core();
    const signed = await sign(alice);
    await payScreen(core, xPayment(signed, "order-0001-alice"));

    const reused = await core.admit(SCREEN, paidRequest(xPayment(signed, "order-0001-alice"), OTHER));
    expect("reply" in reused && [reused.reply.status, codeOf(reused.reply)]).toEqual([409, "payment_reused"]);
    const idReused = await core.admit(SCREEN, paidRequest(xPayment(await sign(alice), "order-0001-alice"), OTHER));
    expect("reply" in idReused && [idReused.reply.status, codeOf(idReused.reply)]).toEqual([409, "payment_id_reused"]);
    expect(world.chain.charges).toHaveLength(1);
  });

  it("refuses an authorization already spent on chain (nonce_already_used), and says so again for a stored used_elsewhere row", async () => {
    const world = new World("deferred");
    const core = world.core();
    const cancelled = await sign(alice);
    world.chain.cancel(USDT.address, cancelled.authorization.from, cancelled.authorization.nonce);
    const refused = await core.admit(SCREEN, paidRequest(xPayment(cancelled)));
    expect("reply" in refused && codeOf(refused.reply)).toBe("nonce_already_used");

    // Queued on credit, then cancelled by the payer before the worker settles it.
    const signed = await sign(alice);
    await payScreen(core, xPayment(signed));
    world.chain.cancel(USDT.address, signed.authorization.from, signed.authorization.nonce);
    world.settler!.script = ["refuse"];
    await new SettlementWorker(core).run();
    expect(await world.row(signed)).toMatchObject({ status: "used_elsewhere" });
    const again = await core.admit(SCREEN, paidRequest(xPayment(signed)));
    expect("reply" in again && [again.reply.status, codeOf(again.reply)]).toEqual([402, "nonce_already_used"]);
  });

  it("refuses a stored payment that expired unsettled (authorization_expired): never charged", async () => {
    const world = new World("deferred");
    const core = world.core();
    const signed = await sign(alice, { validBefore: BigInt(Math.floor(Date.now() / 1000) + 65) });
    await payScreen(core, xPayment(signed));
    expect((await world.row(signed))?.status).toBe("queued");
    // Not settled for 40 s (the relayer was down): the worker gives a row up 30 s before its validBefore.
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 40_000 });
    try {
      expect(await new SettlementWorker(core).run()).toMatchObject({ expired: 1 });
      const again = await core.admit(SCREEN, paidRequest(xPayment(signed)));
      expect("reply" in again && codeOf(again.reply)).toBe("authorization_expired");
      expect(world.chain.charges).toHaveLength(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it("answers 503 settlement_unavailable when the ledger does not answer, and while shutting down: nothing claimed", async () => {
    const world = new World("before-remote");
    const down = world.core(
      new Proxy(world.ledger, { get: () => async () => Promise.reject(new Error("connection refused")) }),
    );
    const refused = await down.admit(SCREEN, paidRequest(xPayment(await sign(alice))));
    expect(
      "reply" in refused && [refused.reply.status, codeOf(refused.reply), refused.reply.headers["Retry-After"]],
    ).toEqual([503, "settlement_unavailable", "5"]);

    const core = world.core();
    expect(await core.drain(0)).toEqual({ drained: true, inFlight: 0 });
    const late = await core.admit(SCREEN, paidRequest(xPayment(await sign(alice))));
    expect("reply" in late && codeOf(late.reply)).toBe("settlement_unavailable");
    expect(world.ledger.snapshot()).toEqual([]);
  });
});

describe("settlement before the answer", () => {
  it("verifies, claims, settles once after the handler answered, and replays that answer to a retry", async () => {
    const world = new World("before-remote");
    const core = world.core();
    const signed = await sign(alice);
    const claim = claimOf(await core.admit(SCREEN, paidRequest(xPayment(signed))));
    expect(claim.billing).toMatchObject({ chargedUnits: 10_000n, waived: false, payer: signed.authorization.from });
    expect(world.chain.charges).toHaveLength(0);
    const concluded = await core.conclude(SCREEN, paidRequest({}), claim, answered);
    expect("headers" in concluded && concluded.headers["PAYMENT-RESPONSE"]).toBeTruthy();
    expect(world.charged(signed)).toHaveLength(1);

    const retry = await core.admit(SCREEN, paidRequest(xPayment(signed)));
    expect(retry).toMatchObject({
      reply: {
        status: 200,
        body: ANSWER.body,
        headers: { "x-payment-replayed": "true", "PAYMENT-RESPONSE": expect.any(String) },
      },
    });
    expect(await core.admit(SCREEN, paidRequest(xPayment(signed), OTHER))).toMatchObject({ reply: { status: 409 } });
    expect(world.chain.charges).toHaveLength(1);
  });

  it("takes the service JSON, x402 v1 and x402 v2 encodings, in USDT and USDC, charging exactly the price", async () => {
    const world = new World("before-self");
    const core = world.core();
    world.chain.fund(USDC, (await sign(alice)).authorization.from, 1_000_000n);
    const payments = [
      xPayment(await sign(alice)),
      xPayment(await sign(alice, {}, USDC)),
      v1Payment(await sign(alice)),
      v1Payment(await sign(alice, {}, USDC)),
      v2Payment(await sign(alice)),
      v2Payment(await sign(alice, {}, USDC)),
    ];
    for (const headers of payments) {
      const claim = claimOf(await core.admit(SCREEN, paidRequest(headers)));
      expect(claim.billing.chargedUnits).toBe(10_000n);
      expect("headers" in (await core.conclude(SCREEN, paidRequest({}), claim, answered))).toBe(true);
    }
    expect(world.chain.charges.map((c) => [c.token, c.amount])).toEqual(
      [USDT, USDC, USDT, USDC, USDT, USDC].map((t) => [t.address, 10_000n]),
    );
  });

  it("settles nothing when the handler failed, and lets the same payment be claimed again", async () => {
    for (const mode of ["before-remote", "before-self"] as const) {
      const world = new World(mode);
      const core = world.core();
      const signed = await sign(alice);
      await core.conclude(SCREEN, paidRequest({}), claimOf(await core.admit(SCREEN, paidRequest(xPayment(signed)))), {
        failed: "handler answered 500",
      });
      expect(await world.row(signed)).toMatchObject({ status: "failed", transaction: null });
      expect(world.chain.charges).toHaveLength(0);
      expect("claim" in (await core.admit(SCREEN, paidRequest(xPayment(signed))))).toBe(true);
    }
  });

  it("returns no data when the facilitator or the relayer refuses the settlement (settlement_failed), and a retry may pay", async () => {
    for (const mode of ["before-remote", "before-self"] as const) {
      const world = new World(mode);
      const core = world.core();
      // The remote facilitator's refusal, or the relayer's node refusing the transaction (no gas).
      if (world.settler) world.settler.script = ["refuse"];
      else world.facilitator.script = ["refuse"];
      const signed = await sign(alice);
      const failed = await payScreen(core, xPayment(signed));
      expect("reply" in failed && [failed.reply.status, codeOf(failed.reply)]).toEqual([402, "settlement_failed"]);
      expect(await world.row(signed)).toMatchObject({ status: "failed" });
      const retry = await core.admit(SCREEN, paidRequest(xPayment(signed)));
      await core.conclude(SCREEN, paidRequest({}), claimOf(retry), answered);
      expect(world.charged(signed)).toHaveLength(1);
      expect(await world.row(signed)).toMatchObject({ status: "settled" });
    }
  });

  it("a relayer's transaction that reverts (the balance moved after verification) is settlement_failed, nothing charged", async () => {
    const world = new World("before-self");
    const core = world.core();
    const signed = await sign(alice);
    const claim = claimOf(await core.admit(SCREEN, paidRequest(xPayment(signed))));
    world.chain.fund(USDT, signed.authorization.from, 0n);
    const failed = await core.conclude(SCREEN, paidRequest({}), claim, answered);
    expect("reply" in failed && codeOf(failed.reply)).toBe("settlement_failed");
    expect(await world.row(signed)).toMatchObject({ status: "failed" });
    expect(world.chain.charges).toHaveLength(0);
  });

  it("a relayer that cannot reach the chain answers settlement_unavailable and leaves the payment to a retry", async () => {
    const world = new World("before-self");
    const core = world.core();
    world.settler!.script = ["unavailable"];
    const signed = await sign(alice);
    const down = await payScreen(core, xPayment(signed));
    expect("reply" in down && [down.reply.status, codeOf(down.reply)]).toEqual([503, "settlement_unavailable"]);
    expect(await world.row(signed)).toMatchObject({ status: "failed" });
    await payScreen(core, xPayment(signed));
    expect(world.charged(signed)).toHaveLength(1);
  });

  it("a settlement whose outcome is unknown answers settlement_pending; once mined, a retry gets the answer it paid for, charged once", async () => {
    const world = new World("before-self");
    const core = world.core();
    world.settler!.script = ["hold"];
    const signed = await sign(alice);
    const pending = await payScreen(core, xPayment(signed));
    expect("reply" in pending && [pending.reply.status, codeOf(pending.reply)]).toEqual([503, "settlement_pending"]);
    expect(await world.row(signed)).toMatchObject({ status: "settling", responseBody: ANSWER.body });

    const early = await core.admit(SCREEN, paidRequest(xPayment(signed)));
    expect("reply" in early && codeOf(early.reply)).toBe("settlement_pending");
    world.settler!.release();
    const retry = await core.admit(SCREEN, paidRequest(xPayment(signed)));
    expect(retry).toMatchObject({
      reply: { status: 200, body: ANSWER.body, headers: { "x-payment-replayed": "true" } },
    });
    expect(world.charged(signed)).toHaveLength(1);
  });

  it("sends a settlement not mined yet again, as signed (the ledger's record), when the reconciler finds it; once mined, it is settled", async () => {
    const world = new World("before-self");
    const core = world.core();
    world.settler!.script = ["hold"];
    const signed = await sign(alice);
    await payScreen(core, xPayment(signed));
    const row = await world.row(signed);
    expect(row).toMatchObject({ status: "settling" });
    // The request's own look at the chain may have sent it again already: only the reconciler's sends count here.
    world.settler!.rebroadcasts.length = 0;
    skipTime(1_000);
    expect(await core.reconcileUnresolved(0)).toMatchObject({ checked: 1, resolved: 0 });
    expect(world.settler!.rebroadcasts.length).toBeGreaterThan(0);
    expect(new Set(world.settler!.rebroadcasts)).toEqual(new Set([`0x5e${row!.transaction!.slice(2)}`]));
    world.settler!.release();
    skipTime(1_000);
    expect(await core.reconcileUnresolved(0)).toMatchObject({ resolved: 1 });
    expect(await world.row(signed)).toMatchObject({ status: "settled", transaction: row!.transaction });
    expect(world.charged(signed)).toHaveLength(1);
  });

  it("a remote settlement that failed without a verdict is decided by the chain: settled if the money moved", async () => {
    const world = new World("before-remote");
    const core = world.core();
    world.facilitator.script = ["throw_after_mining", "throw"];
    const moved = await sign(alice);
    const settled = await payScreen(core, xPayment(moved));
    expect("headers" in settled && settled.headers["PAYMENT-RESPONSE"]).toBeTruthy();
    expect(await world.row(moved)).toMatchObject({ status: "settled" });

    const unknown = await sign(bob);
    const pending = await payScreen(core, xPayment(unknown));
    expect("reply" in pending && codeOf(pending.reply)).toBe("settlement_pending");
    expect(world.charged(unknown)).toHaveLength(0);
  });

  it("copies of one request sent at once: one claims and settles, the other waits and gets its answer", async () => {
    const world = new World("before-remote");
    const core = world.core();
    const signed = await sign(alice);
    const copies = await Promise.all(
      [core.admit(SCREEN, paidRequest(xPayment(signed))), core.admit(SCREEN, paidRequest(xPayment(signed)))].map(
        async (admitting) => {
          const admitted = await admitting;
          if ("claim" in admitted) await core.conclude(SCREEN, paidRequest({}), admitted.claim, answered);
          return admitted;
        },
      ),
    );
    expect(copies.filter((a) => "claim" in a)).toHaveLength(1);
    expect(copies.find((a) => "reply" in a)).toMatchObject({ reply: { status: 200, body: ANSWER.body } });
    expect(world.chain.charges).toHaveLength(1);
  });

  it("a payment-identifier retry signed anew follows the earlier payment: its answer, not a second charge", async () => {
    const world = new World("before-remote");
    const core = world.core();
    const first = await sign(alice);
    await payScreen(core, xPayment(first, "order-0002-alice"));
    const resigned = await sign(alice);
    const retry = await core.admit(SCREEN, paidRequest(xPayment(resigned, "order-0002-alice")));
    expect(retry).toMatchObject({ reply: { status: 200, body: ANSWER.body } });
    expect(world.chain.charges).toHaveLength(1);
    expect(await world.row(resigned)).toBeUndefined();

    // An earlier payment that failed without charge: the new one pays.
    world.facilitator.script = ["refuse"];
    const failing = await sign(bob);
    await payScreen(core, xPayment(failing, "order-0003-bob-retry"));
    const paying = await sign(bob);
    await payScreen(core, xPayment(paying, "order-0003-bob-retry"));
    expect(world.charged(paying)).toHaveLength(1);
    expect(world.charged(failing)).toHaveLength(0);
  });

  it("a payment-identifier retry signed anew, after the earlier claim's request died, pays with its own authorization under its own key", async () => {
    // Found by the model-based test: it took over the earlier row and settled its own authorization
    // under the earlier key, so that in self mode the chain charged it while the row said failed.
    const world = new World("before-self");
    const first = await sign(alice);
    claimOf(await world.core().admit(SCREEN, paidRequest(xPayment(first, "order-0004-alice")))); // the process dies here
    skipTime(ABANDONED_AFTER_MS + 1_000);
    const restarted = world.core();
    const resigned = await sign(alice);
    const claim = claimOf(await restarted.admit(SCREEN, paidRequest(xPayment(resigned, "order-0004-alice"))));
    expect(claim.key.nonce).toBe(resigned.authorization.nonce);
    expect("headers" in (await restarted.conclude(SCREEN, paidRequest({}), claim, answered))).toBe(true);
    expect(world.charged(resigned)).toHaveLength(1);
    expect(await world.row(resigned)).toMatchObject({
      status: "settled",
      responseBody: ANSWER.body,
      paymentId: "order-0004-alice",
    });
    expect(await world.row(first)).toMatchObject({ status: "failed", paymentId: null });
    expect(world.charged(first)).toHaveLength(0);
  });

  it("a payment claimed again after a failure keeps its identifier: a retry signed anew follows it, charged once", async () => {
    // Found by the model-based test: claiming the failed row again released its own identifier, so the re-signed retry paid twice.
    const world = new World("before-remote");
    const core = world.core();
    const first = await sign(alice);
    await core.conclude(
      SCREEN,
      paidRequest({}),
      claimOf(await core.admit(SCREEN, paidRequest(xPayment(first, "order-0005-alice")))),
      { failed: "handler answered 500" },
    );
    await payScreen(core, xPayment(first, "order-0005-alice"));
    const retry = await core.admit(SCREEN, paidRequest(xPayment(await sign(alice), "order-0005-alice")));
    expect(retry).toMatchObject({ reply: { status: 200, body: ANSWER.body } });
    expect(world.chain.charges).toHaveLength(1);
  });

  it("reruns the handler, settling nothing, for a payment charged whose answer was never stored (a crash between claim and record)", async () => {
    const world = new World("before-remote");
    const signed = await sign(alice);
    // The process dies with the claim held; the authorization is settled to the treasury all the same.
    claimOf(await world.core().admit(SCREEN, paidRequest(xPayment(signed))));
    world.chain.execute({ token: USDT.address, ...signed.authorization });
    skipTime(ABANDONED_AFTER_MS + 1_000);
    const restarted = world.core();
    expect(await restarted.reconcileUnresolved(0)).toMatchObject({ resolved: 1 });
    expect(await world.row(signed)).toMatchObject({ status: "settled", responseBody: null });

    const rerun = claimOf(await restarted.admit(SCREEN, paidRequest(xPayment(signed))));
    expect(rerun.paid).toBeTruthy();
    // A handler that fails again gives the lease back; the next retry reruns.
    await restarted.conclude(SCREEN, paidRequest({}), rerun, { failed: "handler answered 500" });
    const again = claimOf(await restarted.admit(SCREEN, paidRequest(xPayment(signed))));
    const concluded = await restarted.conclude(SCREEN, paidRequest({}), again, answered);
    expect("headers" in concluded && concluded.headers["PAYMENT-RESPONSE"]).toBeTruthy();
    expect(await restarted.admit(SCREEN, paidRequest(xPayment(signed)))).toMatchObject({
      reply: { status: 200, body: ANSWER.body },
    });
    expect(world.facilitator.settlements).toBe(0);
    expect(world.chain.charges).toHaveLength(1);
  });

  it("answers two concurrent retries of a payment whose settlement was pending once each, with one charge", async () => {
    const world = new World("before-self");
    const core = world.core();
    world.settler!.script = ["hold"];
    const signed = await sign(alice);
    await payScreen(core, xPayment(signed));
    world.settler!.release();
    const retries = await Promise.all([
      core.admit(SCREEN, paidRequest(xPayment(signed))),
      core.admit(SCREEN, paidRequest(xPayment(signed))),
    ]);
    expect(retries).toMatchObject([
      { reply: { status: 200, body: ANSWER.body } },
      { reply: { status: 200, body: ANSWER.body } },
    ]);
    expect(world.charged(signed)).toHaveLength(1);
  });

  it("runs the handler once for two concurrent retries of a charged payment whose answer was never stored: one answer each, the same", async () => {
    const world = new World("before-remote");
    const signed = await sign(alice);
    claimOf(await world.core().admit(SCREEN, paidRequest(xPayment(signed))));
    world.chain.execute({ token: USDT.address, ...signed.authorization });
    skipTime(ABANDONED_AFTER_MS + 1_000);
    const core = world.core();
    await core.reconcileUnresolved(0);
    let handled = 0;
    const retry = async () => {
      const admitted = await core.admit(SCREEN, paidRequest(xPayment(signed)));
      if ("reply" in admitted) return admitted.reply.body;
      handled++;
      await core.conclude(SCREEN, paidRequest({}), admitted.claim, answered);
      return ANSWER.body;
    };
    expect(await Promise.all([retry(), retry()])).toEqual([ANSWER.body, ANSWER.body]);
    expect(handled).toBe(1);
    expect(world.chain.charges).toHaveLength(1);
  });

  it("a claim abandoned by a dead request is taken over by a retry once ABANDONED_AFTER_MS passed", async () => {
    const world = new World("before-remote");
    const signed = await sign(alice);
    claimOf(await world.core().admit(SCREEN, paidRequest(xPayment(signed))));
    skipTime(ABANDONED_AFTER_MS + 1_000);
    const restarted = world.core();
    await restarted.conclude(
      SCREEN,
      paidRequest({}),
      claimOf(await restarted.admit(SCREEN, paidRequest(xPayment(signed)))),
      answered,
    );
    expect(world.charged(signed)).toHaveLength(1);
  });
});

describe("a retry after the authorization's validBefore", () => {
  /** Moves the clock past `signed`'s validBefore: the authorization can pay nothing more. */
  const lapse = (signed: { authorization: { validBefore: bigint } }) =>
    skipTime((Number(signed.authorization.validBefore) - Math.floor(Date.now() / 1000) + 1) * 1000);
  const expiredText = (signed: { authorization: { validBefore: bigint } }) =>
    `The authorization expired (validBefore ${signed.authorization.validBefore}, now ${Math.floor(Date.now() / 1000)}).`;
  const receiptOf = (headers: Record<string, string>) =>
    JSON.parse(Buffer.from(headers["PAYMENT-RESPONSE"]!, "base64").toString()) as { transaction: string };

  it("reruns the handler for a payment charged whose answer was never stored: nothing charged again, the answer stored, the original transaction's receipt", async () => {
    const world = new World("before-remote");
    const signed = await sign(alice);
    // The process dies with the claim held; the authorization is settled to the treasury all the same.
    claimOf(await world.core().admit(SCREEN, paidRequest(xPayment(signed))));
    world.chain.execute({ token: USDT.address, ...signed.authorization });
    skipTime(ABANDONED_AFTER_MS + 1_000);
    const core = world.core();
    await core.reconcileUnresolved(0);
    const { transaction } = (await world.row(signed))!;
    expect(await world.row(signed)).toMatchObject({
      status: "settled",
      responseBody: null,
      transaction: expect.stringMatching(/^0x/),
    });

    lapse(signed);
    const rerun = claimOf(await core.admit(SCREEN, paidRequest(xPayment(signed))));
    expect(rerun.paid).toEqual({ transaction });
    const concluded = await core.conclude(SCREEN, paidRequest({}), rerun, answered);
    expect("headers" in concluded && receiptOf(concluded.headers).transaction).toBe(transaction);
    expect(await world.row(signed)).toMatchObject({ status: "settled", responseBody: ANSWER.body, transaction });
    const replay = await core.admit(SCREEN, paidRequest(xPayment(signed)));
    expect(replay).toMatchObject({
      reply: { status: 200, body: ANSWER.body, headers: { "x-payment-replayed": "true" } },
    });
    expect("reply" in replay && receiptOf(replay.reply.headers).transaction).toBe(transaction);
    expect([world.facilitator.verifies, world.facilitator.settlements, world.chain.charges.length]).toEqual([1, 0, 1]);
  });

  it("replays the stored answer of a settled, a queued and a waived payment, charging nothing", async () => {
    const before = new World("before-self");
    const settled = await sign(alice);
    await before
      .core()
      .conclude(
        SCREEN,
        paidRequest({}),
        claimOf(await before.core().admit(SCREEN, paidRequest(xPayment(settled)))),
        answered,
      );
    const { transaction } = (await before.row(settled))!;
    // A free read: a screen of the wallet first, then its signal.
    await before
      .core()
      .conclude(
        SCREEN,
        paidRequest({}),
        claimOf(await before.core().admit(SCREEN, paidRequest(xPayment(await sign(bob))))),
        answered,
      );
    const read = await sign(bob);
    const signal = () => paidRequest(xPayment(read), SUBJECT, "/api/wallet/signals");
    await before
      .core()
      .conclude(SIGNAL, paidRequest({}), claimOf(await before.core().admit(SIGNAL, signal())), answered);
    expect(await before.row(read)).toMatchObject({ status: "waived" });

    const deferred = new World("deferred");
    const queued = await sign(alice);
    await deferred
      .core()
      .conclude(
        SCREEN,
        paidRequest({}),
        claimOf(await deferred.core().admit(SCREEN, paidRequest(xPayment(queued)))),
        answered,
      );
    expect(await deferred.row(queued)).toMatchObject({ status: "queued" });

    lapse(settled);
    const charges = [before.chain.charges.length, deferred.chain.charges.length];
    const replayed = { status: 200, body: ANSWER.body, headers: { "x-payment-replayed": "true" } };
    const again = await before.core().admit(SCREEN, paidRequest(xPayment(settled)));
    expect(again).toMatchObject({ reply: replayed });
    expect("reply" in again && receiptOf(again.reply.headers).transaction).toBe(transaction);
    const free = await before.core().admit(SIGNAL, signal());
    expect(free).toMatchObject({ reply: replayed });
    expect("reply" in free && free.reply.headers["PAYMENT-RESPONSE"]).toBeUndefined();
    const pending = await deferred.core().admit(SCREEN, paidRequest(xPayment(queued)));
    expect(pending).toMatchObject({ reply: replayed });
    expect("reply" in pending && receiptOf(pending.reply.headers).transaction).toBe("");
    expect([before.chain.charges.length, deferred.chain.charges.length]).toEqual(charges);
    expect(before.settler!.submits + deferred.settler!.submits).toBe(2);
  });

  it("waits for a settlement whose outcome was unknown, then replays its answer", async () => {
    const world = new World("before-self");
    const core = world.core();
    world.settler!.script = ["hold"];
    const signed = await sign(alice);
    const concluded = await payScreen(core, xPayment(signed));
    expect("reply" in concluded && codeOf(concluded.reply)).toBe("settlement_pending");
    world.settler!.release();
    expect(await world.row(signed)).toMatchObject({ status: "settling" });
    lapse(signed);
    expect(await world.core().admit(SCREEN, paidRequest(xPayment(signed)))).toMatchObject({
      reply: { status: 200, body: ANSWER.body, headers: { "x-payment-replayed": "true" } },
    });
    expect(world.charged(signed)).toHaveLength(1);
  });

  it("asks the chain about a payment recorded as failed: sent by someone else after all, it is settled and its answer given, not charged again", async () => {
    const world = new World("before-remote");
    const core = world.core();
    world.facilitator.script = ["refuse"];
    const signed = await sign(alice);
    const refused = await payScreen(core, xPayment(signed));
    expect("reply" in refused && codeOf(refused.reply)).toBe("settlement_failed");
    world.chain.settleElsewhere({ token: USDT.address, ...signed.authorization });
    const [charge] = world.charged(signed);
    lapse(signed);
    // The answer was stored before the settlement was refused: it is the one replayed.
    const replay = await core.admit(SCREEN, paidRequest(xPayment(signed)));
    expect(replay).toMatchObject({
      reply: { status: 200, body: ANSWER.body, headers: { "x-payment-replayed": "true" } },
    });
    expect("reply" in replay && receiptOf(replay.reply.headers).transaction).toBe(charge!.transaction);
    expect(await world.row(signed)).toMatchObject({ status: "settled", transaction: charge!.transaction });

    // A claim whose request died, sent by someone else: no answer stored, so a rerun.
    const dead = await sign(alice, { validBefore: signed.authorization.validBefore + 300n });
    claimOf(await world.core().admit(SCREEN, paidRequest(xPayment(dead))));
    world.chain.settleElsewhere({ token: USDT.address, ...dead.authorization });
    lapse(dead);
    const rerun = claimOf(await world.core().admit(SCREEN, paidRequest(xPayment(dead))));
    expect(rerun.paid).toEqual({ transaction: world.charged(dead)[0]!.transaction });
    await core.conclude(SCREEN, paidRequest({}), rerun, answered);
    expect(await world.row(dead)).toMatchObject({ status: "settled", responseBody: ANSWER.body });
    expect(world.chain.charges).toHaveLength(2);
    expect(world.facilitator.settlements).toBe(1);
  });

  it("refuses an authorization never claimed, failed or claimed by a request that died (authorization_expired, the same words as before): nothing claimed, nothing charged", async () => {
    const world = new World("before-remote");
    const core = world.core();
    const unclaimed = await sign(alice);
    const failed = await sign(alice);
    await core.conclude(SCREEN, paidRequest({}), claimOf(await core.admit(SCREEN, paidRequest(xPayment(failed)))), {
      failed: "handler answered 500",
    });
    const abandoned = await sign(alice);
    claimOf(await core.admit(SCREEN, paidRequest(xPayment(abandoned)))); // the process dies here
    const verifies = world.facilitator.verifies;

    lapse(unclaimed);
    const restarted = world.core();
    for (const signed of [unclaimed, failed, abandoned]) {
      const refused = await restarted.admit(SCREEN, paidRequest(xPayment(signed)));
      expect(
        "reply" in refused && [refused.reply.status, codeOf(refused.reply), JSON.parse(refused.reply.body).error],
      ).toEqual([402, "authorization_expired", expiredText(signed)]);
    }
    expect(await world.row(unclaimed)).toBeUndefined();
    expect((await world.row(failed))?.status).toBe("failed");
    expect(world.facilitator.verifies).toBe(verifies);
    expect(world.chain.charges).toHaveLength(0);
  });

  it("leaves the payment-identifier path as it was: a retry signed anew follows the earlier payment, the lapsed authorization under the identifier is refused", async () => {
    const world = new World("before-remote");
    const core = world.core();
    const first = await sign(alice);
    await payScreen(core, xPayment(first, "order-0006-alice"));
    lapse(first);
    // Signed before the clock moved: lapsed too, and never claimed; it neither follows nor pays.
    const stale = await sign(alice, { validBefore: first.authorization.validBefore });
    const refused = await core.admit(SCREEN, paidRequest(xPayment(stale, "order-0006-alice")));
    expect("reply" in refused && [codeOf(refused.reply), JSON.parse(refused.reply.body).error]).toEqual([
      "authorization_expired",
      expiredText(stale),
    ]);
    const resigned = await sign(alice);
    expect(await core.admit(SCREEN, paidRequest(xPayment(resigned, "order-0006-alice")))).toMatchObject({
      reply: { status: 200, body: ANSWER.body },
    });
    // The earlier authorization itself: its own row, replayed.
    expect(await core.admit(SCREEN, paidRequest(xPayment(first, "order-0006-alice")))).toMatchObject({
      reply: { status: 200, body: ANSWER.body },
    });
    expect(await world.row(stale)).toBeUndefined();
    expect(await world.row(resigned)).toBeUndefined();
    expect(world.chain.charges).toHaveLength(1);
  });
});

describe("free reads", () => {
  it("waives a read the route makes free after a paid screen of the same wallet, settles nothing, and replays it", async () => {
    const world = new World("before-remote");
    const core = world.core();
    const first = claimOf(
      await core.admit(SIGNAL, paidRequest(xPayment(await sign(alice)), SUBJECT, "/api/wallet/signals")),
    );
    expect(first.waived).toBe(false);
    await core.conclude(SIGNAL, paidRequest({}), first, { failed: "not needed" });

    await payScreen(core, xPayment(await sign(alice)));
    const read = await sign(alice);
    const free = claimOf(await core.admit(SIGNAL, paidRequest(xPayment(read), SUBJECT, "/api/wallet/signals")));
    expect(free.billing).toMatchObject({ chargedUnits: 0n, waived: true });
    const charges = world.chain.charges.length;
    expect(await core.conclude(SIGNAL, paidRequest({}), free, answered)).toEqual({ headers: {} });
    expect(world.chain.charges).toHaveLength(charges);
    expect(await world.row(read)).toMatchObject({ status: "waived" });
    const replay = await core.admit(SIGNAL, paidRequest(xPayment(read), SUBJECT, "/api/wallet/signals"));
    expect(replay).toMatchObject({
      reply: { status: 200, body: ANSWER.body, headers: { "x-payment-replayed": "true" } },
    });
    expect("reply" in replay && replay.reply.headers["PAYMENT-RESPONSE"]).toBeUndefined();

    // Only to the payer who screened that wallet; the 402 says when it is free.
    expect(
      claimOf(await core.admit(SIGNAL, paidRequest(xPayment(await sign(bob)), SUBJECT, "/api/wallet/signals"))).waived,
    ).toBe(false);
    const unpaid = await core.admit(SIGNAL, paidRequest({}, SUBJECT, "/api/wallet/signals"));
    expect("reply" in unpaid && JSON.parse(unpaid.reply.body).freeWhen).toBe(SIGNAL.freeRead!.rule);
  });
});

describe("deferred settlement", () => {
  it("answers within the caps before settling (queued), settles first past a cap, and the worker settles the queue", async () => {
    const world = new World("deferred", { caps: { perPayer: 20_000n, total: 100_000n } });
    const core = world.core();
    const payments = [await sign(alice), await sign(alice), await sign(alice)];
    const receipts = [];
    const notices = [];
    for (const signed of payments) {
      const concluded = await payScreen(core, xPayment(signed));
      if (!("headers" in concluded)) throw new Error(concluded.reply.body);
      receipts.push(JSON.parse(Buffer.from(concluded.headers["PAYMENT-RESPONSE"]!, "base64").toString()));
      notices.push(concluded.headers["Payment-Notice"]);
    }
    expect(receipts.map((r) => r.transaction)).toEqual(["", "", expect.stringMatching(/^0x/)]);
    // The call settled first is told why, and of prepaid credit.
    expect(notices).toEqual([undefined, undefined, expect.stringMatching(/^unsettled_cap: .*POST \/api\/credit/)]);
    expect(receipts[0].extra).toEqual({ settlement: "pending" });
    expect(world.queued).toBe(2);
    expect((await Promise.all(payments.map((p) => world.row(p)))).map((r) => r?.status)).toEqual([
      "queued",
      "queued",
      "settled",
    ]);

    // A retry of a queued payment replays its answer with the pending receipt.
    const replay = await core.admit(SCREEN, paidRequest(xPayment(payments[0]!)));
    expect(replay).toMatchObject({
      reply: {
        status: 200,
        body: ANSWER.body,
        headers: { "x-payment-replayed": "true", "PAYMENT-RESPONSE": expect.any(String) },
      },
    });

    await new SettlementWorker(core).run();
    await flush();
    expect((await Promise.all(payments.map((p) => world.row(p)))).map((r) => r?.status)).toEqual([
      "settled",
      "settled",
      "settled",
    ]);
    expect(world.chain.charges).toHaveLength(3);
  });

  it("refuses a payment the indexed balance less the unsettled ones cannot cover, claiming nothing: the same payment goes through once funded", async () => {
    const world = new World("deferred");
    const core = world.core();
    const payer = (await sign(alice)).authorization.from;
    world.chain.fund(USDT, payer, 15_000n);
    await payScreen(core, xPayment(await sign(alice)));
    const second = await sign(alice);
    const refused = await core.admit(SCREEN, paidRequest(xPayment(second)));
    expect("reply" in refused && [refused.reply.status, codeOf(refused.reply)]).toEqual([402, "insufficient_balance"]);
    expect(await world.row(second)).toBeUndefined();
    world.chain.fund(USDT, payer, 20_000n);
    expect("claim" in (await core.admit(SCREEN, paidRequest(xPayment(second))))).toBe(true);
  });

  it("settles first an authorization about to lapse (within the worker's expiry margin and its settle window): never answered and then expired unpaid", async () => {
    const world = new World("deferred");
    const core = world.core();
    const worker = new SettlementWorker(core);
    const now = Math.floor(Date.now() / 1000);
    // Valid 20 s (accepted: at least 6 s), then just short of and just past margin + window.
    for (const lifetime of [20, EXPIRY_MARGIN_SECONDS + SETTLE_WINDOW_SECONDS - 2]) {
      const signed = await sign(alice, { validBefore: BigInt(now + lifetime) });
      expect("headers" in (await payScreen(core, xPayment(signed)))).toBe(true);
      expect(world.charged(signed), `valid ${lifetime} s: settled before its answer`).toHaveLength(1);
      await worker.run();
      expect((await world.row(signed))?.status).toBe("settled");
    }
    const long = await sign(alice, { validBefore: BigInt(now + EXPIRY_MARGIN_SECONDS + SETTLE_WINDOW_SECONDS + 5) });
    expect("headers" in (await payScreen(core, xPayment(long)))).toBe(true);
    expect((await world.row(long))?.status, "valid long enough: deferred").toBe("queued");
    expect(world.queued).toBe(1);
  });

  it("never makes a payer owe a call taken again and not answered: the claim starts without its earlier attempt's answer", async () => {
    // A per-payer cap below the price: every deferred call settles first.
    const world = new World("deferred", { caps: { perPayer: 5_000n, total: 100_000n } });
    const core = world.core();
    const signed = await sign(alice);
    // Claimed; the payer's balance moves away before settlement: the transfer reverts, no data.
    const first = claimOf(await core.admit(SCREEN, paidRequest(xPayment(signed))));
    world.chain.fund(USDT, payerOf(alice), 0n);
    const refused = await core.conclude(SCREEN, paidRequest({}), first, { answer: ANSWER });
    expect("reply" in refused && codeOf(refused.reply)).toBe("settlement_failed");
    // Funded again, the same request and payment are claimed again (deferred), and the handler fails.
    world.chain.fund(USDT, payerOf(alice), 1_000_000n);
    const again = claimOf(await core.admit(SCREEN, paidRequest(xPayment(signed))));
    await core.conclude(SCREEN, paidRequest({}), again, { failed: "handler threw" });
    expect(await world.row(signed)).toMatchObject({ status: "failed", responseBody: null });
    expect(world.chain.charges).toHaveLength(0);
    expect((await world.ledger.outcomeCounts()).owedUnits, "nothing answered, nothing owed").toBe("0");
    const next = await core.admit(SCREEN, paidRequest(xPayment(await sign(alice))));
    expect("claim" in next, "the payer's next call is not refused unsettled_payment").toBe(true);
  });

  it("repays only the debts owed when the repaying payment was admitted: one that arose while it ran stays owed", async () => {
    const world = new World("deferred");
    const core = world.core();
    const worker = new SettlementWorker(core);
    const settleRound = async () => {
      world.settler!.script = ["refuse"];
      await worker.run();
      for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    };
    const [q1, q2] = [await sign(alice), await sign(alice)];
    await payScreen(core, xPayment(q1));
    const q2claim = claimOf(await core.admit(SCREEN, paidRequest(xPayment(q2))));
    // The payer cancels Q1: the worker finds it used elsewhere, a debt of 10,000.
    world.chain.cancel(USDT.address, q1.authorization.from, q1.authorization.nonce);
    await settleRound();
    await core.conclude(SCREEN, paidRequest({}), q2claim, { answer: ANSWER });
    // It pays the price and the debt it owes now; meanwhile Q2 is cancelled too: a second debt.
    const covering = await sign(alice, { value: 20_000n });
    const claim = claimOf(await core.admit(SCREEN, paidRequest(xPayment(covering))));
    world.chain.cancel(USDT.address, q2.authorization.from, q2.authorization.nonce);
    await settleRound();
    expect((await world.ledger.outcomeCounts()).owedUnits).toBe("20000");
    await core.conclude(SCREEN, paidRequest({}), claim, { answer: ANSWER });
    expect(world.charged(covering)).toHaveLength(1);
    expect(await world.row(q1)).toMatchObject({ repaidBy: covering.authorization.nonce });
    expect(await world.row(q2)).toMatchObject({ status: "used_elsewhere", repaidBy: null });
    expect((await world.ledger.outcomeCounts()).owedUnits, "three answers, 20,000 charged").toBe("10000");
  });

  it("settles a settle-first route before its answer in deferred mode", async () => {
    const world = new World("deferred");
    const core = world.core();
    const signed = await sign(alice, { value: 50_000n });
    const concluded = await core.conclude(
      REPORT,
      paidRequest({}),
      claimOf(await core.admit(REPORT, paidRequest(xPayment(signed)))),
      answered,
    );
    expect("headers" in concluded).toBe(true);
    expect(world.charged(signed)).toHaveLength(1);
    expect(world.queued).toBe(0);
  });

  it("a payer whose deferred settlement failed owes it: unsettled_payment asks for price plus debt, and a payment that covers it repays the debt", async () => {
    const world = new World("deferred");
    const core = world.core();
    const unpaid = await sign(alice);
    await payScreen(core, xPayment(unpaid));
    world.chain.cancel(USDT.address, unpaid.authorization.from, unpaid.authorization.nonce);
    world.settler!.script = ["refuse"];
    await new SettlementWorker(core).run();
    expect(await world.row(unpaid)).toMatchObject({ status: "used_elsewhere", responseBody: ANSWER.body });

    const refused = await core.admit(SCREEN, paidRequest(xPayment(await sign(alice))));
    if (!("reply" in refused)) throw new Error("claimed with a debt");
    expect([refused.reply.status, codeOf(refused.reply)]).toEqual([402, "unsettled_payment"]);
    expect(JSON.parse(refused.reply.body)).toMatchObject({
      details: { owedUnits: "10000" },
      accepts: [{ maxAmountRequired: "20000" }, { maxAmountRequired: "20000" }],
    });

    const covering = await sign(alice, { value: 20_000n });
    const claim = claimOf(await core.admit(SCREEN, paidRequest(xPayment(covering))));
    expect(claim).toMatchObject({ deferred: false, repays: 10_000n });
    await core.conclude(SCREEN, paidRequest({}), claim, answered);
    expect(world.charged(covering)).toHaveLength(1);
    expect(await world.row(unpaid)).toMatchObject({ repaidBy: covering.authorization.nonce });
    expect("claim" in (await core.admit(SCREEN, paidRequest(xPayment(await sign(alice)))))).toBe(true);
  });
  it("never makes a payer owe what our own settlement failed: a relayer without gas, a batch reverted whole or a transaction dropped is tried again uncounted, while a transfer that fails counts", async () => {
    const world = new World("deferred");
    const core = world.core();
    const rounds = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const worker = new SettlementWorker(core);
        await worker.run();
        await worker.stop(); // waits for the receipts the run follows
      }
    };
    const ours = await sign(alice);
    await payScreen(core, xPayment(ours));
    // More failures of ours than a payer's transfer is allowed (MAX_SETTLE_ATTEMPTS), then a block that takes it.
    world.settler!.script = ["unfunded", "revert_whole", "drop", "unfunded", "revert_whole", "drop"];
    await rounds(6);
    expect(await world.row(ours)).toMatchObject({ status: "queued", attempts: 0 });
    await rounds(1);
    expect(await world.row(ours)).toMatchObject({ status: "settled", attempts: 0 });
    expect(world.charged(ours)).toHaveLength(1);
    expect((await world.ledger.outcomeCounts()).owedUnits).toBe("0");

    // The payer's own transfer refused three times (its balance cannot pay): that failure stands, a debt.
    const theirs = await sign(alice);
    await payScreen(core, xPayment(theirs));
    world.settler!.script = ["refuse", "refuse", "refuse"];
    await rounds(3);
    expect(await world.row(theirs)).toMatchObject({ status: "failed", attempts: 2 });
    expect((await world.ledger.outcomeCounts()).owedUnits).toBe("10000");
  });

  it("never counts against its payers a refusal of our own transaction (its fee when sent, a node's error, a batch's estimate), while a lone transfer that would revert counts", async () => {
    /** A world whose relayer is relayer.ts itself, over a node that answers `estimate` and `send` as given. */
    const relayedWorld = (node: { estimate?: string; send?: string }) => {
      const world = new World("deferred");
      const refuse = (message?: string) => {
        if (message) throw new RpcRequestError({ body: {}, url: "http://rpc.test", error: { code: -32000, message } });
      };
      const client = {
        chain: celo,
        estimateFeesPerGas: async () => ({ maxFeePerGas: 1_000n, maxPriorityFeePerGas: 1n }),
        prepareTransactionRequest: async (args: Record<string, unknown>) => {
          refuse(node.estimate);
          return {
            to: args.to,
            data: args.data,
            maxFeePerGas: 1_000n,
            maxPriorityFeePerGas: 1n,
            gas: 300_000n,
            chainId: 42220,
            type: "eip1559",
          };
        },
        getTransactionCount: async () => 7,
        sendRawTransaction: async () => {
          refuse(node.send);
          throw new Error("unreachable: every case refuses");
        },
      } as unknown as RelayerClient;
      Object.defineProperty(world.facilitator, "settler", {
        value: relayerSettler(client, privateKeyToAccount(generatePrivateKey())),
      });
      const core = world.core();
      const rounds = async () => {
        for (let i = 0; i < MAX_SETTLE_ATTEMPTS; i++) await new SettlementWorker(core).run();
      };
      return { world, core, rounds };
    };
    const cases = [
      {
        node: { send: "max fee per gas less than block base fee: maxFeePerGas: 1000 baseFee: 25000000000" },
        payers: [alice, bob],
      },
      { node: { send: "nonce too low" }, payers: [alice] },
      { node: { estimate: "execution reverted: FiatTokenV2: invalid signature" }, payers: [alice, bob] },
      { node: { estimate: "header not found" }, payers: [alice] },
    ];
    for (const { node, payers } of cases) {
      const { world, core, rounds } = relayedWorld(node);
      const signed = await Promise.all(payers.map((key) => sign(key)));
      for (const s of signed) await payScreen(core, xPayment(s));
      await rounds();
      for (const s of signed)
        expect(await world.row(s), JSON.stringify(node)).toMatchObject({ status: "queued", attempts: 0 });
      expect((await world.ledger.outcomeCounts()).owedUnits).toBe("0");
    }
    // A lone transfer whose estimate reverts: the payer's transfer itself cannot go through.
    const { world, core, rounds } = relayedWorld({
      estimate: "execution reverted: ERC20: transfer amount exceeds balance",
    });
    const lone = await sign(alice);
    await payScreen(core, xPayment(lone));
    await rounds();
    expect(await world.row(lone)).toMatchObject({ status: "failed", attempts: 2 });
    expect((await world.ledger.outcomeCounts()).owedUnits).toBe("10000");
  });

  it("refuses a deferred answer the store did not take (503 settlement_unavailable, nothing charged); one it took after all is settled and answered to a retry", async () => {
    const world = new World("deferred");
    const core = world.core();
    const settle = async () => {
      const worker = new SettlementWorker(core);
      await worker.run();
      await worker.stop();
    };
    const queue = world.ledger.queuedWithinCaps.bind(world.ledger);
    /** A call paid by `signed` whose answer's queueing loses its connection, after the write `landed` or before it. */
    const queueingLost = async (signed: Awaited<ReturnType<typeof sign>>, landed: boolean) => {
      vi.spyOn(world.ledger, "queuedWithinCaps").mockImplementationOnce(async (...args) => {
        if (landed) await queue(...args);
        throw new Error("Connection terminated unexpectedly");
      });
      const claim = claimOf(await core.admit(SCREEN, paidRequest(xPayment(signed))));
      const refused = await core.conclude(SCREEN, paidRequest({}), claim, answered);
      return "reply" in refused && [refused.reply.status, codeOf(refused.reply)];
    };

    // Not taken: the claim is given up, and the same payment sent again pays, once.
    const signed = await sign(alice);
    expect(await queueingLost(signed, false)).toEqual([503, "settlement_unavailable"]);
    expect(await world.row(signed)).toMatchObject({ status: "failed" });
    await settle();
    expect(world.charged(signed)).toHaveLength(0);
    const again = claimOf(await core.admit(SCREEN, paidRequest(xPayment(signed))));
    expect("headers" in (await core.conclude(SCREEN, paidRequest({}), again, answered))).toBe(true);
    await settle();
    expect(world.charged(signed)).toHaveLength(1);

    // Taken, its acknowledgement lost: settled, and the retry gets the answer it paid for.
    const landed = await sign(bob);
    expect(await queueingLost(landed, true)).toEqual([503, "settlement_unavailable"]);
    await settle();
    expect(world.charged(landed)).toHaveLength(1);
    const replay = await core.admit(SCREEN, paidRequest(xPayment(landed)));
    expect("reply" in replay && [replay.reply.status, replay.reply.body]).toEqual([200, ANSWER.body]);
    expect((await world.ledger.outcomeCounts()).owedUnits).toBe("0");
  });

  it("leaves the shared queue to a replica that can settle: one without a relayer key takes nothing", async () => {
    const deferred = new World("deferred");
    const core = deferred.core();
    const signed = await sign(alice);
    await payScreen(core, xPayment(signed));
    // A replica in remote-facilitator mode on the same ledger runs its worker too.
    const remote = new World("before-remote", { ledger: deferred.ledger });
    expect(await new SettlementWorker(remote.core()).run()).toMatchObject({ taken: 0 });
    expect(await deferred.row(signed)).toMatchObject({ status: "queued", attempts: 0 });
    expect((await deferred.ledger.outcomeCounts()).owedUnits).toBe("0");
    // The payer's next call is not refused for a debt; the relayer's replica settles the row.
    expect("claim" in (await core.admit(SCREEN, paidRequest(xPayment(await sign(alice)))))).toBe(true);
    const worker = new SettlementWorker(core);
    await worker.run();
    await worker.stop();
    expect(await deferred.row(signed)).toMatchObject({ status: "settled" });
  });

  it("a worker whose send failed does not requeue a row another worker has sent meanwhile (a retry requeued it)", async () => {
    const world = new World("deferred");
    const core = world.core();
    const settler = world.settler!;
    const signed = await sign(alice, { validBefore: BigInt(Math.floor(Date.now() / 1000) + 75) });
    await payScreen(core, xPayment(signed));
    const submit = settler.submit.bind(settler);
    let taken!: () => void;
    let unstall!: () => void;
    const takenByA = new Promise<void>((r) => (taken = r));
    const stalled = new Promise<void>((r) => (unstall = r));
    let calls = 0;
    settler.submit = async (payload, requirements, record) => {
      if (calls++ > 0) return submit(payload, requirements, record);
      // Worker A: its RPC stalls, then the send fails before anything was recorded.
      taken();
      await stalled;
      return { sent: false, reason: "The request took too long to respond.", unavailable: true };
    };
    const runA = new SettlementWorker(core).run();
    await takenByA;
    expect(await world.row(signed)).toMatchObject({ transaction: null });
    // The payer retries the same payment: nothing was sent, so the row goes back to the queue...
    const retry = await core.admit(SCREEN, paidRequest(xPayment(signed)));
    expect("reply" in retry && retry.reply.status).toBe(200);
    expect(await world.row(signed)).toMatchObject({ status: "queued" });
    // ...and worker B (another replica) sends it; it is mined later.
    settler.script = ["hold"];
    await new SettlementWorker(core).run();
    const sent = (await world.row(signed))!.transaction;
    expect(await world.row(signed)).toMatchObject({ status: "settling", transaction: expect.any(String) });
    unstall();
    await runA;
    // A's failure left B's transaction recorded: once mined, the row is settled, not expired.
    expect(await world.row(signed)).toMatchObject({ status: "settling", transaction: sent });
    settler.release();
    expect(world.charged(signed)).toHaveLength(1);
    skipTime(50_000);
    await new SettlementWorker(core).run();
    await core.reconcileUnresolved(0);
    expect(await world.row(signed)).toMatchObject({ status: "settled", transaction: sent });
  });
});

describe("shutdown", () => {
  it("drain waits for the requests holding a claim, refuses new payments meanwhile, and ends when they concluded", async () => {
    const world = new World("before-remote");
    const core = world.core();
    const claim = claimOf(await core.admit(SCREEN, paidRequest(xPayment(await sign(alice)))));
    const draining = core.drain(5_000);
    const refused = await core.admit(SCREEN, paidRequest(xPayment(await sign(bob))));
    expect("reply" in refused && codeOf(refused.reply)).toBe("settlement_unavailable");
    await core.conclude(SCREEN, paidRequest({}), claim, answered);
    expect(await draining).toEqual({ drained: true, inFlight: 0 });
    expect(world.chain.charges).toHaveLength(1);
  });

  it("drain gives up after its timeout with the requests still holding a claim counted", async () => {
    const world = new World("before-remote");
    const core = world.core();
    claimOf(await core.admit(SCREEN, paidRequest(xPayment(await sign(alice)))));
    expect(await core.drain(30)).toEqual({ drained: false, inFlight: 1 });
  });
});

/** Lets the settlement worker's receipts (already mined) be recorded. */
async function flush() {
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
}
