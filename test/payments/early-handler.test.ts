import { describe, expect, it } from "vitest";
import { mount } from "../../api/http/mount.ts";
import { x402Billing } from "../../api/payments/billing.ts";
import type { PaymentCore } from "../../api/payments/core.ts";
import { mintCreditToken } from "../../api/payments/credit-token.ts";
import type { CreditLedger } from "../../api/payments/ledger/ledger.ts";
import { screenRoute } from "../../api/screen/route.ts";
import { statementRoute } from "../../api/statement/route.ts";
import { paidApp } from "../support/paid-app.ts";
import { buyCredit, PAYER_KEYS, payerOf, SUBJECT, World } from "./fakes.ts";

// The payment adapter (api/http/payment.ts) over a real payment core and the in-memory ledger: on a
// read-only route, a credit payer this process has seen pay gets the handler started while the price
// is being taken (a lease opened, when this replica's has run out), so that the round trip overlaps
// the handler's reads. What must not change: the price taken once and exactly, a refused price
// answered instead of the handler's answer and nothing taken, a failed handler's price given back,
// and an unknown token never given a handler.

const owner = payerOf(PAYER_KEYS[0]!);

/**
 * The in-memory ledger with each lease opening and token lookup waiting (up to `waitMs`) for the
 * handler to start, and logging when it ends ("lease", "owner").
 */
function slowLedger(world: World, events: string[], waitMs = 150) {
  let handlerStarted: () => void = () => {};
  const credit = world.ledger.credit;
  const slow =
    <A extends unknown[], R>(event: string, call: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      const started = new Promise<void>((resolve) => (handlerStarted = resolve));
      await Promise.race([started, new Promise((resolve) => setTimeout(resolve, waitMs))]);
      const result = await call(...args);
      events.push(event);
      return result;
    };
  const wrapped: Partial<CreditLedger> = {
    openLease: slow("lease", (lease) => credit.openLease(lease)),
    tokenOwner: slow("owner", (hash) => credit.tokenOwner(hash)),
  };
  const ledger = new Proxy(world.ledger, {
    get: (target, key) =>
      key === "credit"
        ? new Proxy(credit, { get: (c, k) => (k in wrapped ? wrapped[k as keyof CreditLedger] : Reflect.get(c, k, c)) })
        : Reflect.get(target, key, target),
  });
  return { ledger, handlerStarts: () => handlerStarted() };
}

function app(core: PaymentCore, events: string[], handlerStarts: () => void, fail = false) {
  return paidApp(core, (a) => {
    const handler = async (c: { var: { billing: Promise<Parameters<typeof x402Billing>[0]> } }) => {
      events.push("handler");
      handlerStarts();
      // The reads come first; the billing is awaited to render.
      await new Promise((resolve) => setTimeout(resolve, 5));
      if (fail) throw new Error("handler crashed after its reads");
      return { data: "screen", x402Billing: x402Billing(await c.var.billing) };
    };
    mount(a, screenRoute, async (c) => c.json(await handler(c)) as never);
    // Not read-only (a statement pins and records): its handler always waits for the price.
    mount(a, statementRoute, async (c) => c.json(await handler(c)) as never);
  });
}

type Served = { request: (p: string, i: RequestInit) => Response | Promise<Response> };

/** A credit-paid call of `path` about SUBJECT, by `token`. */
const call = (target: Served, token: string, path = "/api/lender/screen") =>
  target.request(path, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ walletAddress: SUBJECT }),
  });
const screen = (target: Served, token: string) => call(target, token);

/**
 * `amount` of credit bought by the first payer, and the app over a core whose lease openings and
 * token lookups wait for the handler (up to `waitMs`); `crashing` is the same with handlers that
 * fail after their reads.
 */
async function credited(amount: bigint, waitMs?: number) {
  const world = new World("before-self");
  const events: string[] = [];
  const { ledger, handlerStarts } = slowLedger(world, events, waitMs);
  const core = world.core(ledger);
  const { token } = await buyCredit(world, core, amount);
  return {
    world,
    core,
    events,
    token,
    served: app(core, events, handlerStarts),
    crashing: app(core, events, handlerStarts, true),
  };
}

describe("a read-only route's handler runs while a credit payer's price is taken", () => {
  it("starts a seen token's handler before its lease opens, and takes the price once, exactly", async () => {
    const { world, core, events, token, served } = await credited(10_000n);

    // First use of the token in this process: its owner is looked up and the price taken before the handler starts.
    const first = await screen(served, token);
    expect(first.status).toBe(200);
    expect(events.splice(0)).toEqual(["owner", "lease", "handler"]);

    // Seen, its lease spent: the handler starts first, and renders once the new lease tells it the balance left.
    await buyCredit(world, core, 100_000n);
    const second = await screen(served, token);
    expect(second.status).toBe(200);
    expect(events.splice(0)).toEqual(["handler", "lease"]);
    expect(await second.json()).toMatchObject({ x402Billing: { chargedUsdt: "0.01", creditLeft: "0.09" } });
    expect(second.headers.get("Credit-Balance")).toBe("90000");
    // From the lease: no ledger round trip before the handler at all.
    expect((await screen(served, token)).status).toBe(200);
    expect(events.splice(0)).toEqual(["handler"]);
    expect(await world.ledger.credit.balance(owner)).toBe(80_000n);
    expect((await world.ledger.credit.recent(owner, 10)).map((s) => s.status)).toEqual(["spent", "spent", "spent"]);
  });

  it("answers a price refused after the handler started (short, revoked) with the refusal, nothing taken", async () => {
    const { world, events, token, served } = await credited(15_000n);
    expect((await screen(served, token)).status).toBe(200);
    events.splice(0);

    // 0.005 left: the handler started, then the lease's opening found the balance short (and the token live).
    const short = await screen(served, token);
    expect(events.splice(0)).toEqual(["handler", "lease", "owner"]);
    expect(short.status).toBe(402);
    const body = (await short.json()) as { code: string; accepts: unknown[]; data?: unknown };
    expect(body.code).toBe("credit_insufficient");
    expect(body.accepts.length).toBeGreaterThan(0);
    expect(body.data).toBeUndefined();
    expect(await world.ledger.credit.balance(owner)).toBe(5_000n);

    // Revoked after it was seen: refused at once (401), its handler's work dropped.
    await world.ledger.credit.revokeTokens(owner);
    const revoked = await screen(served, token);
    expect([revoked.status, ((await revoked.json()) as { error: { code: string } }).error.code]).toEqual([
      401,
      "credit_token_invalid",
    ]);
    expect(await world.ledger.credit.balance(owner)).toBe(5_000n);
    expect((await world.ledger.credit.recent(owner, 10)).length).toBe(1);
  });

  it("gives the price back when a handler started early fails", async () => {
    const { world, events, token, served, crashing } = await credited(100_000n);
    expect((await screen(served, token)).status).toBe(200);
    events.splice(0);
    const crashed = await screen(crashing, token);
    expect(crashed.status).toBe(500);
    expect(events).toEqual(["handler"]);
    expect(await world.ledger.credit.balance(owner)).toBe(90_000n);
    expect((await world.ledger.credit.recent(owner, 10)).length).toBe(1);
  });

  it("never starts the handler first for an unknown token, nor on a route that is not read-only", async () => {
    const { world, core, events, token, served } = await credited(10_000n, 30);
    const unknown = await screen(served, mintCreditToken());
    expect(unknown.status).toBe(401);
    expect(events.splice(0)).toEqual(["owner"]);

    expect((await screen(served, token)).status).toBe(200);
    events.splice(0);
    // The lease is spent: the statement's price is taken (a new lease) before its handler starts.
    await buyCredit(world, core, 100_000n);
    const statement = await call(served, token, "/api/agent/statement");
    expect(statement.status).toBe(200);
    expect(events).toEqual(["lease", "handler"]);
  });
});
