import { afterEach, describe, expect, it, type Mock, vi } from "vitest";
import { payment, walletRequest } from "../../api/http/payment.ts";
import type { PaymentCore, PricedRoute, Reply } from "../../api/payments/core.ts";
import { mintCreditToken } from "../../api/payments/credit-token.ts";
import { ABANDONED_AFTER_MS } from "../../api/payments/lifecycle.ts";
import { sleep } from "../../shared/async.ts";
import { paidApp } from "../support/paid-app.ts";
import {
  ANSWER,
  buyCredit,
  claimOf,
  codeOf,
  PAYER_KEYS,
  paidRequest,
  payerOf,
  SCREEN,
  SIGNAL,
  SUBJECT,
  World,
} from "./fakes.ts";

// Prepaid credit through the payment core, its collaborators faked (fakes.ts): bought with one
// payment settled first, spent by token or signed-in wallet, each call's price taken (from a lease,
// or held with its claim when it has a Payment-Identifier) and kept or given back with its outcome.
// No process, no database, no chain.

const [alice, bob] = PAYER_KEYS;
const owner = payerOf(alice);

const screenWith = (headers: Parameters<typeof paidRequest>[0] & { paymentId?: string }, subject = SUBJECT) =>
  paidRequest(headers, subject);

/** A free read's request: free after a screen of the same wallet by the same payer. */
const signal = (subject = SUBJECT) => paidRequest({}, subject, "/api/wallet/signals");

afterEach(() => {
  vi.restoreAllMocks();
});

/**
 * The ledger's next `write` (a leased call's recording, or a held call's spent) loses its
 * connection, after the write `landed` or before it.
 */
function nextWriteDropped(
  credit: World["ledger"]["credit"],
  write: "recordSpend" | "spent",
  { landed }: { landed: boolean },
): void {
  // Bound before the once-implementation is set: inside it, a call of the spy writes as the ledger does.
  const written = credit[write].bind(credit) as (...args: unknown[]) => Promise<unknown>;
  const spy = (vi.isMockFunction(credit[write]) ? credit[write] : vi.spyOn(credit, write)) as unknown as Mock<
    (...args: unknown[]) => Promise<never>
  >;
  spy.mockImplementationOnce(async (...args) => {
    if (landed) await written(...args);
    throw new Error("Connection terminated unexpectedly");
  });
}

/** What the store answers while it is down. */
const unreachable = () => new Error("connect ECONNREFUSED 127.0.0.1:5432");

/** The store's answers to whether a call's spend landed and to its undo (spendRecorded, voidSpend), none while it is down. */
function storeOutage(credit: World["ledger"]["credit"]) {
  let down = false;
  const whileUp =
    <A extends unknown[], R>(ask: (...args: A) => Promise<R>) =>
    async (...args: A) => {
      if (down) throw unreachable();
      return ask(...args);
    };
  // Bound before the spies replace them.
  const [recorded, voidSpend] = [credit.spendRecorded.bind(credit), credit.voidSpend.bind(credit)];
  vi.spyOn(credit, "spendRecorded").mockImplementation(whileUp(recorded));
  const undo = vi.spyOn(credit, "voidSpend").mockImplementation(whileUp(voidSpend));
  return { undo, goDown: () => void (down = true), comeBack: () => void (down = false) };
}

/** A route with a side effect (as POST /api/monitors), paid from credit behind the payment middleware. */
const MONITOR: PricedRoute = {
  name: "POST /api/monitors",
  description: "Monitor",
  microUsd: 10_000n,
  settleFirst: true,
};

/**
 * An app serving MONITOR: the effects its handler left, and the undo the middleware runs for a call
 * not paid. `leased`: declared without settleFirst, so that a credit call takes its price from a lease.
 */
function monitorApp(core: PaymentCore, { leased = false } = {}) {
  const effects: string[] = [];
  const undo = vi.fn(async () => void effects.pop());
  const route = leased ? { ...MONITOR, settleFirst: false } : MONITOR;
  const app = paidApp(core, (a) =>
    a.post(
      "/api/monitors",
      payment(route, { ...walletRequest, settleFirst: !leased, onSettlementFailed: undo }),
      async (c) => {
        await c.var.billing;
        effects.push("monitor created");
        return c.json({ ok: true });
      },
    ),
  );
  const call = async (headers: Record<string, string>) => {
    const res = await app.request("/api/monitors", { method: "POST", headers });
    return [res.status, codeOf({ body: await res.text() } as Reply)] as const;
  };
  return { call, effects, undo };
}

describe("prepaid credit", () => {
  it("is bought with one payment settled first, then pays calls by token and by signed-in wallet, to the unit", async () => {
    const world = new World("deferred");
    const core = world.core();
    const { token, signed, concluded } = await buyCredit(world, core, 100_000n);
    expect("headers" in concluded && concluded.headers["PAYMENT-RESPONSE"]).toBeTruthy();
    expect(world.charged(signed)).toEqual([expect.objectContaining({ amount: 100_000n })]);
    expect(await world.ledger.credit.balance(owner)).toBe(100_000n);

    const byToken = claimOf(await core.admitCredit(SCREEN, screenWith({}), { token }));
    expect(byToken.billing).toMatchObject({ chargedUnits: 10_000n, payer: owner, creditLeft: 90_000n });
    const kept = await core.conclude(SCREEN, screenWith({}), byToken, { answer: ANSWER });
    expect(kept).toEqual({ headers: expect.objectContaining({ "Credit-Balance": "90000" }) });
    const byWallet = claimOf(await core.admitCredit(SCREEN, screenWith({}), { wallet: owner }));
    await core.conclude(SCREEN, screenWith({}), byWallet, { answer: ANSWER });
    expect(await world.ledger.credit.balance(owner)).toBe(80_000n);
    // Nothing more moved on chain: the calls were paid by the purchase.
    expect(world.chain.charges).toHaveLength(1);
    expect(world.queued).toBe(0);
  });

  it("gives the price back when the call fails before its answer leaves, and takes nothing when the credit is short", async () => {
    const world = new World("before-self");
    const core = world.core();
    const { token } = await buyCredit(world, core, 100_000n);
    const failed = claimOf(await core.admitCredit(SCREEN, screenWith({}), { token }));
    await core.conclude(SCREEN, screenWith({}), failed, { failed: "handler answered 404" });
    expect(await world.ledger.credit.balance(owner)).toBe(100_000n);

    const dear = { ...SCREEN, microUsd: 150_000n };
    const short = await core.admitCredit(dear, screenWith({}), { token });
    if (!("reply" in short)) throw new Error("held past the balance");
    // A 402 with the payment requirements: a stock x402 client pays per call instead.
    expect(short.reply.status).toBe(402);
    expect(JSON.parse(short.reply.body)).toMatchObject({
      code: "credit_insufficient",
      details: { balance: "0.10", price: "0.15" },
      accepts: [{ maxAmountRequired: "150000" }, { maxAmountRequired: "150000" }],
      credit: { buy: "POST /api/credit", minimumUsd: "0.10" },
    });
    expect(await world.ledger.credit.balance(owner)).toBe(100_000n);
  });

  it("answers a retry under the same Payment-Identifier again, charged once; the identifier on another request is refused", async () => {
    const world = new World("before-remote");
    const core = world.core();
    const { token } = await buyCredit(world, core, 100_000n);
    const paymentId = "pid_retry_0123456789";
    const first = claimOf(await core.admitCredit(SCREEN, screenWith({ paymentId }), { token }));
    // A copy sent while the first runs waits for it, then gets its answer.
    const copy = core.admitCredit(SCREEN, screenWith({ paymentId }), { token });
    await core.conclude(SCREEN, screenWith({}), first, { answer: ANSWER });
    for (const again of [await copy, await core.admitCredit(SCREEN, screenWith({ paymentId }), { wallet: owner })])
      expect(again).toMatchObject({
        reply: { status: 200, body: ANSWER.body, headers: { "x-payment-replayed": "true" } },
      });
    expect(await world.ledger.credit.balance(owner)).toBe(90_000n);
    const other = await core.admitCredit(SCREEN, screenWith({ paymentId }, payerOf(bob)), { token });
    expect("reply" in other && [other.reply.status, codeOf(other.reply)]).toEqual([409, "payment_id_reused"]);
    const malformed = await core.admitCredit(SCREEN, screenWith({ paymentId: "short" }), { token });
    expect("reply" in malformed && [malformed.reply.status, codeOf(malformed.reply)]).toEqual([
      400,
      "payment_malformed",
    ]);
    expect(await world.ledger.credit.balance(owner)).toBe(90_000n);
  });

  it("refuses an unknown or revoked token (401), and a callerAddress that is not the credit's owner", async () => {
    const world = new World("before-remote");
    const core = world.core();
    const { token } = await buyCredit(world, core, 100_000n);
    // Used once (the replica now knows its owner), then revoked: refused at the next call.
    const used = claimOf(await core.admitCredit(SCREEN, screenWith({}), { token }));
    await core.conclude(SCREEN, screenWith({}), used, { answer: ANSWER });
    const byToken = await core.admitCredit(SCREEN, { ...screenWith({}), caller: payerOf(bob) }, { token });
    expect("reply" in byToken && codeOf(byToken.reply)).toBe("caller_mismatch");
    expect(await world.ledger.credit.revokeTokens(owner)).toBe(1);
    // Seen by this replica: the price comes from its lease, and the spend's recording is refused
    // before the answer leaves (401, nothing taken).
    const seen = claimOf(await core.admitCredit(SCREEN, screenWith({}), { token }));
    const dropped = await core.conclude(SCREEN, screenWith({}), seen, { answer: ANSWER });
    expect("reply" in dropped && [dropped.reply.status, codeOf(dropped.reply)]).toEqual([401, "credit_token_invalid"]);
    // Not seen (another replica, or a token never issued): refused before the handler.
    for (const [replica, t] of [
      [world.core(), token],
      [core, mintCreditToken()],
    ] as const) {
      const refused = await replica.admitCredit(SCREEN, screenWith({}), { token: t });
      expect("reply" in refused && [refused.reply.status, codeOf(refused.reply)]).toEqual([
        401,
        "credit_token_invalid",
      ]);
    }
    const mismatch = await core.admitCredit(SCREEN, { ...screenWith({}), caller: payerOf(bob) }, { wallet: owner });
    expect("reply" in mismatch && codeOf(mismatch.reply)).toBe("caller_mismatch");
    expect(await world.ledger.credit.balance(owner)).toBe(90_000n);
  });

  it("refuses a credit owner listed on the sanctions oracle (403), by a token new or known, signed in, short or on a free read; nothing taken", async () => {
    const world = new World("before-remote");
    const listed = new Set<string>();
    const core = world.core(world.ledger, { sanctions: { isListed: async (payer) => listed.has(payer) } });
    const { token } = await buyCredit(world, core, 100_000n);
    const screened = claimOf(await core.admitCredit(SCREEN, screenWith({}), { token }));
    await core.conclude(SCREEN, screenWith({}), screened, { answer: ANSWER });
    listed.add(owner);
    const dear = { ...SCREEN, microUsd: 150_000n };
    const calls = [
      () => core.admitCredit(SCREEN, screenWith({}), { token }),
      () => core.admitCredit(SCREEN, screenWith({}), { wallet: owner }),
      () => core.admitCredit(dear, screenWith({}), { token }),
      () => core.admitCredit(SIGNAL, signal(), { token }),
      () => core.admitCredit(SIGNAL, signal(), { wallet: owner }),
      // Another replica, which has not seen this token yet.
      () =>
        world
          .core(world.ledger, { sanctions: { isListed: async (payer) => listed.has(payer) } })
          .admitCredit(SCREEN, screenWith({}), { token }),
    ];
    for (const call of calls) {
      const refused = await call();
      expect("reply" in refused && [refused.reply.status, codeOf(refused.reply)]).toEqual([403, "sanctioned_payer"]);
    }
    expect(await world.ledger.credit.balance(owner)).toBe(90_000n);
    listed.delete(owner);
    expect("claim" in (await core.admitCredit(SCREEN, screenWith({}), { token }))).toBe(true);
  });

  it("grants nothing for a purchase whose settlement failed: the lot never becomes spendable", async () => {
    const world = new World("before-self");
    const core = world.core();
    world.settler!.script = ["refuse"];
    const { token, concluded } = await buyCredit(world, core, 100_000n);
    expect("reply" in concluded && codeOf(concluded.reply)).toBe("settlement_failed");
    expect(world.chain.charges).toHaveLength(0);
    expect(await world.ledger.credit.balance(owner)).toBe(0n);
    const refused = await core.admitCredit(SCREEN, screenWith({}), { token });
    expect("reply" in refused && codeOf(refused.reply)).toBe("credit_insufficient");
  });

  it("gives back the credit a request held when it died, and a dead replica's lease, on the reconciler's sweep after ABANDONED_AFTER_MS", async () => {
    const world = new World("before-remote");
    const core = world.core();
    await buyCredit(world, core, 100_000n);
    // Held (a Payment-Identifier), and leased: both requests die with their replica.
    claimOf(await core.admitCredit(SCREEN, screenWith({ paymentId: "pid_dies_0123456789" }), { wallet: owner }));
    claimOf(await core.admitCredit(SCREEN, screenWith({}), { wallet: owner }));
    const remaining = () => world.ledger.credit.snapshot().lots.map((l) => l.remaining);
    await core.reconcileUnresolved(0);
    // The hold is taken; the leased call was never recorded, so its price is not (the lease holds the rest).
    expect(await world.ledger.credit.balance(owner)).toBe(90_000n);
    expect(remaining()).toEqual(["0"]);
    world.ledger.age(ABANDONED_AFTER_MS + 1_000);
    await world.core().reconcileUnresolved(0);
    expect(await world.ledger.credit.balance(owner)).toBe(100_000n);
    expect(remaining()).toEqual(["100000"]);
    expect(world.ledger.credit.snapshot().leases.map((l) => [l.spent, l.closedAt !== null])).toEqual([["0", true]]);
  });

  it("holds a settle-first call paid from credit, naming what it made: if its request dies, the sweep undoes that before the price goes back", async () => {
    const world = new World("before-remote");
    const undone: string[] = [];
    let undoFails = true;
    // The route's undo (the report route revokes the passport): the RPC down at first.
    const onOutcome = vi.fn(async (row: { route: string; reference: string | null }, outcome: { status: string }) => {
      if (undoFails) throw new Error("fetch failed");
      undone.push(`${row.route} ${row.reference} ${outcome.status}`);
    });
    const core = world.core(undefined, { onOutcome });
    await buyCredit(world, core, 100_000n);
    const request = paidRequest({}, SUBJECT, "/api/monitors");
    const claim = claimOf(await core.admitCredit(MONITOR, request, { wallet: owner }));
    expect(claim.credit?.leased, "held in a row, not taken from a lease in memory").toBeUndefined();
    await core.reference(claim, "REP-DIES");
    // The request dies here: what it made stands, its answer never left.
    expect(await world.ledger.credit.balance(owner)).toBe(90_000n);
    world.ledger.age(ABANDONED_AFTER_MS + 1_000);
    const sweeper = world.core(undefined, { onOutcome });
    await sweeper.reconcileUnresolved(0);
    expect(await world.ledger.credit.balance(owner), "not undone: the price stays taken, for the next sweep").toBe(
      90_000n,
    );
    undoFails = false;
    await sweeper.reconcileUnresolved(0);
    expect(undone).toEqual(["POST /api/monitors REP-DIES failed"]);
    expect(await world.ledger.credit.balance(owner)).toBe(100_000n);
    await sweeper.reconcileUnresolved(0);
    expect(onOutcome, "undone once").toHaveBeenCalledTimes(2);
    // The request was only stalled, and comes back: refused, nothing taken.
    const late = await core.conclude(MONITOR, request, claim, { answer: ANSWER });
    expect("reply" in late && codeOf(late.reply)).toBe("settlement_unavailable");
    expect(await world.ledger.credit.balance(owner)).toBe(100_000n);
  });

  it("refuses a call whose lease was closed under it (503, nothing taken), and pays the next from a new lease", async () => {
    const world = new World("before-remote");
    const core = world.core();
    await buyCredit(world, core, 100_000n);
    const first = claimOf(await core.admitCredit(SCREEN, screenWith({}), { wallet: owner }));
    await core.conclude(SCREEN, screenWith({}), first, { answer: ANSWER });
    // This replica stalls past ABANDONED_AFTER_MS with a call running: another replica's sweep closes its lease.
    const stalled = claimOf(await core.admitCredit(SCREEN, screenWith({}), { wallet: owner }));
    world.ledger.age(ABANDONED_AFTER_MS + 1_000);
    expect(await world.ledger.credit.closeAbandonedLeases()).toBe(1);
    const refused = await core.conclude(SCREEN, screenWith({}), stalled, { answer: ANSWER });
    expect("reply" in refused && [refused.reply.status, codeOf(refused.reply)]).toEqual([
      503,
      "settlement_unavailable",
    ]);
    expect(await world.ledger.credit.balance(owner)).toBe(90_000n);
    const next = claimOf(await core.admitCredit(SCREEN, screenWith({}), { wallet: owner }));
    expect("headers" in (await core.conclude(SCREEN, screenWith({}), next, { answer: ANSWER }))).toBe(true);
    expect(await world.ledger.credit.balance(owner)).toBe(80_000n);
    // The closed lease kept its one recorded call; the new one has the next.
    expect(
      world.ledger.credit.snapshot().leases.map((l) => [l.spent, l.closedAt === null ? "open" : "closed"]),
    ).toEqual([
      ["10000", "closed"],
      ["10000", "open"],
    ]);
  });

  it("refuses a held call whose hold was released under it (503, nothing taken); its retry under the same identifier is charged once", async () => {
    const world = new World("before-remote");
    const core = world.core();
    await buyCredit(world, core, 100_000n);
    const paymentId = "pid_stalled_0123456789";
    const stalled = claimOf(await core.admitCredit(SCREEN, screenWith({ paymentId }), { wallet: owner }));
    // This replica stalls past ABANDONED_AFTER_MS with the call running: another replica's sweep releases its hold.
    world.ledger.age(ABANDONED_AFTER_MS + 1_000);
    await world.core().reconcileUnresolved(0);
    expect(await world.ledger.credit.balance(owner)).toBe(100_000n);
    const refused = await core.conclude(SCREEN, screenWith({ paymentId }), stalled, { answer: ANSWER });
    expect("reply" in refused && [refused.reply.status, codeOf(refused.reply)]).toEqual([
      503,
      "settlement_unavailable",
    ]);
    expect(await world.ledger.credit.balance(owner), "no answer left, nothing taken").toBe(100_000n);
    const retry = claimOf(await core.admitCredit(SCREEN, screenWith({ paymentId }), { wallet: owner }));
    expect("headers" in (await core.conclude(SCREEN, screenWith({ paymentId }), retry, { answer: ANSWER }))).toBe(true);
    expect(await world.ledger.credit.balance(owner)).toBe(90_000n);
  });

  it("pays a call with a Payment-Identifier from credit a lease holds: the lease goes back, not a refusal", async () => {
    const world = new World("before-remote");
    const [a, b] = [world.core(), world.core()];
    await buyCredit(world, a, 100_000n);
    // Calls without an identifier: a's lease takes the whole balance (16 calls' worth is more).
    const leased = claimOf(await a.admitCredit(SCREEN, screenWith({}), { wallet: owner }));
    await a.conclude(SCREEN, screenWith({}), leased, { answer: ANSWER });
    expect(await world.ledger.credit.balance(owner)).toBe(90_000n);
    // On the same replica: its own lease goes back, and the hold takes from the lots.
    const own = claimOf(
      await a.admitCredit(SCREEN, screenWith({ paymentId: "pid_same_replica_0123" }), { wallet: owner }),
    );
    expect(own.credit?.balance).toBe(80_000n);
    await a.conclude(SCREEN, screenWith({ paymentId: "pid_same_replica_0123" }), own, { answer: ANSWER });
    // On another replica, while a's new lease holds the balance: a's lease is asked back, and b waits for it.
    const again = claimOf(await a.admitCredit(SCREEN, screenWith({}), { wallet: owner }));
    const fromB = b.admitCredit(SCREEN, screenWith({ paymentId: "pid_other_replica_0123" }), { wallet: owner });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await a.conclude(SCREEN, screenWith({}), again, { answer: ANSWER });
    const held = claimOf(await fromB);
    expect(held.credit?.balance).toBe(60_000n);
    await b.conclude(SCREEN, screenWith({ paymentId: "pid_other_replica_0123" }), held, { answer: ANSWER });
    expect(await world.ledger.credit.balance(owner)).toBe(60_000n);
    expect((await world.ledger.credit.recent(owner, 10)).length).toBe(4);
  });

  it("answers a leased call whose recording landed with its acknowledgement lost (charged once), and not one whose recording did not land (nothing taken)", async () => {
    const world = new World("before-remote");
    const core = world.core();
    await buyCredit(world, core, 100_000n);
    const { credit } = world.ledger;
    nextWriteDropped(credit, "recordSpend", { landed: true });
    const landed = claimOf(await core.admitCredit(SCREEN, screenWith({}), { wallet: owner }));
    const answered = await core.conclude(SCREEN, screenWith({}), landed, { answer: ANSWER });
    expect("headers" in answered && answered.headers["Credit-Spend"]).toBe(landed.credit?.spend);
    expect(await credit.balance(owner)).toBe(90_000n);
    nextWriteDropped(credit, "recordSpend", { landed: false });
    const lost = claimOf(await core.admitCredit(SCREEN, screenWith({}), { wallet: owner }));
    const refused = await core.conclude(SCREEN, screenWith({}), lost, { answer: ANSWER });
    expect("reply" in refused && [refused.reply.status, codeOf(refused.reply)]).toEqual([
      503,
      "settlement_unavailable",
    ]);
    expect(await credit.balance(owner), "its answer did not leave: nothing taken").toBe(90_000n);
    const next = claimOf(await core.admitCredit(SCREEN, screenWith({}), { wallet: owner }));
    expect("headers" in (await core.conclude(SCREEN, screenWith({}), next, { answer: ANSWER }))).toBe(true);
    expect(await credit.balance(owner)).toBe(80_000n);
    expect((await credit.recent(owner, 10)).length).toBe(2);
  });

  it("undoes a leased call's recording that landed while the store stayed down past the check: refused, and nothing taken once the store is back", async () => {
    const world = new World("before-remote");
    const core = world.core();
    await buyCredit(world, core, 100_000n);
    const { credit } = world.ledger;
    // The recording lands, its acknowledgement is lost, and the store answers nothing more for a while.
    const store = storeOutage(credit);
    nextWriteDropped(credit, "recordSpend", { landed: true });
    store.goDown();
    const call = claimOf(await core.admitCredit(SCREEN, screenWith({}), { wallet: owner }));
    const refused = await core.conclude(SCREEN, screenWith({}), call, { answer: ANSWER });
    expect("reply" in refused && [refused.reply.status, codeOf(refused.reply)]).toEqual([
      503,
      "settlement_unavailable",
    ]);
    expect(await credit.recent(owner, 10), "recorded, its answer refused").toHaveLength(1);

    store.comeBack();
    await vi.waitFor(async () => expect(await credit.recent(owner, 10)).toHaveLength(0), { timeout: 10_000 });
    expect(await store.undo.mock.results.at(-1)?.value).toBe(true);
    expect(await credit.balance(owner), "nothing taken").toBe(100_000n);
    // The lease's units are the replica's again: the next call is paid from them and answered.
    const next = claimOf(await core.admitCredit(SCREEN, screenWith({}), { wallet: owner }));
    expect("headers" in (await core.conclude(SCREEN, screenWith({}), next, { answer: ANSWER }))).toBe(true);
    expect(await credit.balance(owner)).toBe(90_000n);
  });

  it("keeps a lease open at shutdown while a refused call's recording is being undone (up to the drain's deadline, then for the sweep): nothing taken once the store is back", async () => {
    const world = new World("before-remote");
    await buyCredit(world, world.core(), 100_000n);
    const { credit } = world.ledger;
    const store = storeOutage(credit);
    const lots = () => credit.snapshot().lots.reduce((sum, l) => sum + BigInt(l.remaining), 0n);
    // Twice: the store back before the drain's deadline, then after it.
    for (const timeoutMs of [10_000, 200]) {
      const core = world.core();
      nextWriteDropped(credit, "recordSpend", { landed: true });
      store.goDown();
      const call = claimOf(await core.admitCredit(SCREEN, screenWith({}), { wallet: owner }));
      expect("reply" in (await core.conclude(SCREEN, screenWith({}), call, { answer: ANSWER }))).toBe(true);
      const drained = core.drain(timeoutMs);
      await sleep(400);
      if (timeoutMs < 400) {
        await drained;
        expect(
          credit.snapshot().leases.filter((l) => l.closedAt === null),
          "left open for the undo",
        ).toHaveLength(1);
      }
      store.comeBack();
      await drained;
      await vi.waitFor(() => expect(credit.snapshot().leases.every((l) => l.closedAt !== null)).toBe(true), {
        timeout: 10_000,
      });
      expect(await credit.recent(owner, 10), "undone").toHaveLength(0);
      expect(await credit.balance(owner), "nothing taken").toBe(100_000n);
      expect(lots(), "every lease gone back").toBe(100_000n);
    }
  });

  it("answers 503 settlement_unavailable for a leased call whose recording could not be confirmed, and undoes what its handler did (nothing taken)", async () => {
    const world = new World("before-remote");
    const core = world.core();
    const { token } = await buyCredit(world, core, 100_000n);
    const { credit } = world.ledger;
    storeOutage(credit).goDown();
    nextWriteDropped(credit, "recordSpend", { landed: false });
    const { call, effects, undo } = monitorApp(core, { leased: true });
    expect(await call({ authorization: `Bearer ${token}` })).toEqual([503, "settlement_unavailable"]);
    expect(undo).toHaveBeenCalledOnce();
    expect(effects).toEqual([]);
    expect(await credit.balance(owner)).toBe(100_000n);
  });

  it("answers a held call whose spent write landed with its acknowledgement lost; one not confirmed is 503 settlement_unavailable, undone, its hold given back", async () => {
    const world = new World("before-remote");
    const core = world.core();
    const { token } = await buyCredit(world, core, 100_000n);
    const { credit } = world.ledger;
    const store = storeOutage(credit);
    const { call, effects, undo } = monitorApp(core);
    const headers = (paymentId: string) => ({ authorization: `Bearer ${token}`, "payment-identifier": paymentId });
    nextWriteDropped(credit, "spent", { landed: true });
    expect(await call(headers("pid_landed_0123456789"))).toEqual([200, ""]);
    expect(await credit.balance(owner)).toBe(90_000n);
    nextWriteDropped(credit, "spent", { landed: false });
    store.goDown();
    expect(await call(headers("pid_not_landed_0123456789"))).toEqual([503, "settlement_unavailable"]);
    expect(undo).toHaveBeenCalledOnce();
    expect(effects).toEqual(["monitor created"]);
    await vi.waitFor(async () => expect(await credit.balance(owner), "the hold given back").toBe(90_000n));
    expect((await credit.recent(owner, 10)).length).toBe(1);
  });

  it("refuses a call whose token is revoked while it runs, on a free-read route and with a Payment-Identifier (401, nothing taken)", async () => {
    const world = new World("before-remote");
    const core = world.core();
    const { token } = await buyCredit(world, core, 100_000n);
    const paymentId = "pid_revoked_0123456789";
    // Held first (from the lots), then leased (the lease takes the rest).
    const held = claimOf(await core.admitCredit(SCREEN, screenWith({ paymentId }), { token }));
    const read = claimOf(await core.admitCredit(SIGNAL, signal(), { token }));
    await world.ledger.credit.revokeTokens(owner);
    for (const [route, request, claim] of [
      [SCREEN, screenWith({ paymentId }), held],
      [SIGNAL, signal(), read],
    ] as const) {
      const refused = await core.conclude(route, request, claim, { answer: ANSWER });
      expect("reply" in refused && [refused.reply.status, codeOf(refused.reply)]).toEqual([
        401,
        "credit_token_invalid",
      ]);
    }
    expect(await world.ledger.credit.balance(owner)).toBe(100_000n);
    expect(await world.ledger.credit.recent(owner, 10)).toEqual([]);
    expect(await world.ledger.credit.find(owner, paymentId), "the hold released").toBeUndefined();
  });

  it("shares the balance between replicas' leases: one asks, the other gives back what it did not spend, and a drained replica gives back all", async () => {
    const world = new World("before-remote");
    const [a, b] = [world.core(), world.core()];
    const { token } = await buyCredit(world, a, 30_000n);
    // Replica a leases the whole balance (a lease is sized for many calls), and spends one call of it.
    const first = claimOf(await a.admitCredit(SCREEN, screenWith({}), { token }));
    await a.conclude(SCREEN, screenWith({}), first, { answer: ANSWER });
    const running = claimOf(await a.admitCredit(SCREEN, screenWith({}), { token }));
    // Replica b finds the lots empty: it asks a's lease back, and waits for it.
    const fromB = b.admitCredit(SCREEN, screenWith({}), { token });
    await new Promise((resolve) => setTimeout(resolve, 100));
    // a's running call ends: its recording learns that b wants the lease, which goes back once idle.
    await a.conclude(SCREEN, screenWith({}), running, { answer: ANSWER });
    const second = claimOf(await fromB);
    expect(second.credit?.balance).toBe(0n);
    await b.conclude(SCREEN, screenWith({}), second, { answer: ANSWER });
    expect(await world.ledger.credit.balance(owner)).toBe(0n);
    // Nothing left anywhere: refused at once, with the balance.
    const short = await b.admitCredit(SCREEN, screenWith({}), { token });
    expect("reply" in short && codeOf(short.reply)).toBe("credit_insufficient");
    // More credit; a drain gives back what b's lease did not spend.
    await buyCredit(world, a, 100_000n);
    const third = claimOf(await b.admitCredit(SCREEN, screenWith({}), { token }));
    await b.conclude(SCREEN, screenWith({}), third, { answer: ANSWER });
    expect(world.ledger.credit.snapshot().lots.reduce((sum, l) => sum + BigInt(l.remaining), 0n)).toBe(0n);
    await b.drain(1_000);
    expect(world.ledger.credit.snapshot().lots.reduce((sum, l) => sum + BigInt(l.remaining), 0n)).toBe(90_000n);
    expect(world.ledger.credit.snapshot().leases.every((l) => l.closedAt !== null)).toBe(true);
    expect((await world.ledger.credit.recent(owner, 10)).length).toBe(4);
  });

  it("sizes leases for an owner calling in a loop: each used up is followed by one twice as large (to 512 calls), one gone back idle by one of 16", async () => {
    const world = new World("before-remote");
    const core = world.core();
    const { token } = await buyCredit(world, core, 1_000_000n);
    // A call of 0.0005: a thousand calls' leases fit in the payer's dollar.
    const route = { ...SCREEN, microUsd: 500n };
    const call = async () => {
      const claim = claimOf(await core.admitCredit(route, screenWith({}), { token }));
      await core.conclude(route, screenWith({}), claim, { answer: ANSWER });
    };
    const leases = () =>
      world.ledger.credit.snapshot().leases.map((l) => [Number(l.amount) / 500, Number(l.spent) / 500]);
    for (let i = 0; i < 16 + 32 + 64 + 128 + 256 + 512 + 1; i++) await call();
    expect(leases(), "calls each lease was sized for, and paid").toEqual([
      [16, 16],
      [32, 32],
      [64, 64],
      [128, 128],
      [256, 256],
      [512, 512],
      [512, 1],
    ]);
    // Idle for LEASE_IDLE_MS: the lease goes back, and the next call opens one of 16.
    await sleep(1_100);
    await call();
    expect(leases().slice(-2)).toEqual([
      [512, 1],
      [16, 1],
    ]);
    expect(await world.ledger.credit.balance(owner)).toBe(1_000_000n - 1_010n * 500n);
  });

  it("makes a free read free to the credit payer who screened that wallet, by token or signed in; charged otherwise", async () => {
    const world = new World("deferred");
    const core = world.core();
    const { token } = await buyCredit(world, core, 100_000n);
    const before = await core.admitCredit(SIGNAL, signal(), { token });
    expect("claim" in before, "a read before any screen is charged").toBe(true);
    await core.conclude(SIGNAL, signal(), claimOf(before), { answer: ANSWER });

    const screened = claimOf(await core.admitCredit(SCREEN, screenWith({}), { token }));
    await core.conclude(SCREEN, screenWith({}), screened, { answer: ANSWER });
    for (const payer of [{ token }, { wallet: owner }]) {
      const read = await core.admitCredit(SIGNAL, signal(), payer);
      expect(read).toEqual({ free: expect.objectContaining({ chargedUnits: 0n, payer: owner, waived: true }) });
    }
    expect(await world.ledger.credit.balance(owner)).toBe(80_000n);
    // Another wallet, another payer, a revoked token: not free.
    expect("claim" in (await core.admitCredit(SIGNAL, signal(payerOf(bob)), { token }))).toBe(true);
    await buyCredit(world, core, 100_000n, bob);
    expect("claim" in (await core.admitCredit(SIGNAL, signal(), { wallet: payerOf(bob) }))).toBe(true);
    await world.ledger.credit.revokeTokens(owner);
    const revoked = await core.admitCredit(SIGNAL, signal(), { token });
    expect("reply" in revoked && revoked.reply.status).toBe(401);
  });
});
