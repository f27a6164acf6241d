import { SIGN_IN_WITH_X, type SIWxExtension } from "@x402/extensions/sign-in-with-x";
import { and, eq, isNull } from "drizzle-orm";
import type { Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerPaymentSchemes } from "../../api/http/declare.ts";
import { MONITOR_EVENT_TYPES } from "../../api/monitors/schema.ts";
import type { MonitorSettings } from "../../api/monitors/settings.ts";
import { openApiDocument } from "../../api/openapi/route.ts";
import type { PaymentCore } from "../../api/payments/core.ts";
import { MONITOR_PERIOD_MS } from "../../api/payments/prices.ts";
import { ROUTES } from "../../api/routes.ts";
import { monitor, monitorEvent } from "../../api/store/schema.ts";
import { openServiceStore, type ServiceStore } from "../../api/store/store.ts";
import { PAYER_KEYS, payerOf, sign, USDT, World, xPayment } from "../payments/fakes.ts";
import { type DatabaseSlot, databaseSlot, testDatabase } from "../support/indexer.ts";
import { documentMismatch, type OpenApiDocument } from "../support/openapi.ts";
import { paidApp } from "../support/paid-app.ts";
import { signedChallenge } from "../support/sign-in.ts";

// The monitor routes in process: their real declarations and handlers on an app wired like the
// service's, a payment core over the fakes (test/payments/fakes.ts: signatures real, chain and
// facilitator in memory) and a fresh service store. Sign-in proofs are signed as a client would.
const ORIGIN = "https://monitors.example";
const [OWNER_KEY, OTHER_KEY, THIRD_KEY] = PAYER_KEYS;
const OWNER = payerOf(OWNER_KEY);
const wallet = (n: number) => `0x${n.toString(16).padStart(40, "0")}` as Hex;

describe(`monitors: paid creation, owner sign-in, webhooks, events (${testDatabase})`, () => {
  let slot: DatabaseSlot;
  let store: ServiceStore;
  let world: World;
  let core: PaymentCore;
  let doc: OpenApiDocument;
  const settings: MonitorSettings = { allowPrivateEndpoints: false, maxWalletsPerOwner: 5 };

  const app = () =>
    paidApp(core, (a) => {
      a.use(async (c, next) => {
        c.set("monitors", { store: Promise.resolve(store.db), settings });
        await next();
      });
      for (const r of ROUTES.filter((r) => r.route.path.startsWith("/api/monitors"))) r.mount(a as never, {} as never);
      registerPaymentSchemes(a.openAPIRegistry);
    });
  let served: ReturnType<typeof app>;

  type Call = { method: string; path: string; body?: unknown; headers?: Record<string, string> };
  const send = async ({ method, path, body, headers = {} }: Call) => {
    const res = await served.request(`${ORIGIN}${path}`, {
      method,
      headers: { ...(body ? { "content-type": "application/json" } : {}), ...headers },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  const pay = async (key: Hex, value: bigint) => ({
    "x-payment": xPayment(await sign(key, { value })).xPayment,
  });
  /** A proof for `call`, signed by `key`, on the challenge the route's own 401 offers. */
  const signIn = async (call: Call, key: Hex) => {
    const refused = await send(call);
    expect(refused.status).toBe(401);
    return signedChallenge(refused.body.extensions[SIGN_IN_WITH_X] as SIWxExtension, key);
  };
  const asOwner = async (call: Call, key: Hex = OWNER_KEY) => send({ ...call, headers: await signIn(call, key) });
  const create = async (body: Record<string, unknown>, key: Hex = OWNER_KEY) =>
    send({
      method: "POST",
      path: "/api/monitors",
      body,
      headers: await pay(key, 10_000n * BigInt((body.wallets as unknown[]).length)),
    });
  const conforms = (method: string, path: string, res: { status: number; body: unknown }) =>
    expect(documentMismatch(doc, method, path, res.status, res.body), `${method} ${path} ${res.status}`).toBe("");

  beforeAll(async () => {
    process.env.SIGN_IN_ORIGIN = ORIGIN;
    slot = databaseSlot();
    await slot.prepare();
    store = await openServiceStore(slot.store);
    world = new World("before-remote");
    core = world.core();
    served = app();
    doc = openApiDocument(served, ORIGIN) as unknown as OpenApiDocument;
  }, 120_000);

  afterAll(async () => {
    delete process.env.SIGN_IN_ORIGIN;
    await store?.close();
    await slot?.drop();
  });

  it("documents every monitor route: prices, the sign-in security of the free ones, their error codes", () => {
    const op = (method: string, path: string) => doc.paths[path]![method] as Record<string, any>;
    const create = op("post", "/api/monitors");
    expect(create["x-price"]).toMatchObject({ amountUnits: "10000", per: "wallet" });
    // Paid with x402, or from prepaid credit (a credit token, or signed in).
    expect(create.security).toEqual([
      { xPayment: [] },
      { paymentSignature: [] },
      { creditToken: [] },
      { signInWithX: [] },
    ]);
    expect(create.responses["400"].description).toContain("webhook_url_refused");
    expect(create.responses["409"].description).toContain("monitor_limit");
    expect(create.responses["402"]).toBeDefined();
    expect(op("post", "/api/monitors/{id}/renew")["x-price"]).toMatchObject({ amountUnits: "10000" });
    for (const [method, path] of [
      ["get", "/api/monitors"],
      ["get", "/api/monitors/{id}"],
      ["delete", "/api/monitors/{id}"],
      ["get", "/api/monitors/events"],
      ["get", "/api/monitors/endpoints"],
      ["post", "/api/monitors/endpoints/{id}/rotate"],
      ["post", "/api/monitors/endpoints/{id}/recover"],
    ] as const) {
      const o = op(method, path);
      expect(o.security, path).toEqual([{ signInWithX: [] }]);
      expect(o["x-price"].amountUnits, path).toBe("0");
      expect(o.responses["401"].description, path).toContain("sign_in_required, sign_in_invalid");
      expect(o.responses["402"], path).toBeUndefined();
    }
    expect(op("get", "/api/monitors/{id}").responses["404"].description).toContain("monitor_not_found");
  });

  it("prices a creation per wallet (the 402 names N cents), and makes one monitor per wallet owned by the payer", async () => {
    const wallets = [wallet(1), wallet(2), wallet(3)];
    const unpaid = await send({ method: "POST", path: "/api/monitors", body: { wallets } });
    expect(unpaid.status).toBe(402);
    expect(unpaid.body.accepts[0].maxAmountRequired).toBe("30000");

    const before = world.chain.balanceOf(USDT.address, OWNER);
    const res = await create({ wallets, events: ["drain.detected"], thresholds: { scoreBelow: 40 } });
    expect(res.status).toBe(200);
    conforms("POST", "/api/monitors", res);
    expect(world.chain.balanceOf(USDT.address, OWNER)).toBe(before - 30_000n);
    expect(res.body.x402Billing).toMatchObject({ chargedUsdt: "0.03", payer: OWNER });
    expect(res.body.endpoint).toBeNull();
    expect(res.body.monitors.map((m: { wallet: string }) => m.wallet)).toEqual(wallets);
    for (const m of res.body.monitors) {
      expect(m).toMatchObject({ status: "active", events: ["drain.detected"], endpointId: null });
      expect(m.id).toMatch(/^mon_[0-9a-f]{24}$/);
      expect(m.thresholds).toEqual({ scoreBelow: 40, recommendationWorseThan: null });
      expect(m.lastScreened).toEqual({ at: null, block: null, values: null });
    }
    const paidFor = Date.parse(res.body.paidUntil) - Date.now();
    expect(paidFor).toBeGreaterThan(MONITOR_PERIOD_MS - 60_000);
    expect(paidFor).toBeLessThanOrEqual(MONITOR_PERIOD_MS);
    const rows = await store.db.query.monitor.findMany();
    expect(rows.filter((r) => r.owner === OWNER)).toHaveLength(3);
    expect(new Set(rows.map((r) => r.paymentRef)).size).toBe(1);
    expect(rows[0]!.paymentRef).toMatch(new RegExp(`^${USDT.address.toLowerCase()}:${OWNER}:0x[0-9a-f]{64}$`));

    // Every type by default; a repeated wallet is a 400 before any payment.
    const all = await create({ wallets: [wallet(4)] });
    expect(all.body.monitors[0].events).toEqual([...MONITOR_EVENT_TYPES]);
    const twice = await send({ method: "POST", path: "/api/monitors", body: { wallets: [wallet(5), wallet(5)] } });
    expect([twice.status, twice.body.error.code]).toEqual([400, "invalid_request"]);
  });

  it("answers the owner signed in: list, read, delete; 401 with a challenge without a proof, 401 for a reused one, 404 to another wallet", async () => {
    const list = { method: "GET", path: "/api/monitors" };
    const none = await send(list);
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe("sign_in_required");
    expect(none.body.extensions[SIGN_IN_WITH_X].info).toMatchObject({
      domain: "monitors.example",
      uri: `${ORIGIN}/api/monitors`,
    });
    conforms("GET", "/api/monitors", none);

    const headers = await signIn(list, OWNER_KEY);
    const mine = await send({ ...list, headers });
    expect(mine.status).toBe(200);
    conforms("GET", "/api/monitors", mine);
    expect(mine.body.monitors).toHaveLength(4);
    // Newest first.
    expect(mine.body.monitors[0].wallet).toBe(wallet(4));
    const again = await send({ ...list, headers });
    expect([again.status, again.body.error.code, again.body.error.details.reason]).toEqual([
      401,
      "sign_in_invalid",
      "invalid_siwx_nonce",
    ]);
    expect(again.body.extensions[SIGN_IN_WITH_X]).toBeDefined();
    const garbage = await send({ ...list, headers: { "sign-in-with-x": "bm9wZQ==" } });
    expect([garbage.status, garbage.body.error.code]).toEqual([401, "sign_in_invalid"]);

    const id = mine.body.monitors[1].id as string;
    const read = { method: "GET", path: `/api/monitors/${id}` };
    const one = await asOwner(read);
    expect(one.status).toBe(200);
    conforms("GET", "/api/monitors/{id}", one);
    expect(one.body.monitor).toEqual(mine.body.monitors[1]);

    // Another wallet: as if it did not exist, to read and to delete; its own list is empty.
    const other = await asOwner(read, OTHER_KEY);
    expect([other.status, other.body.error.code]).toEqual([404, "monitor_not_found"]);
    conforms("GET", "/api/monitors/{id}", other);
    const notTheirs = await asOwner({ method: "DELETE", path: `/api/monitors/${id}` }, OTHER_KEY);
    expect([notTheirs.status, notTheirs.body.error.code]).toEqual([404, "monitor_not_found"]);
    expect((await asOwner(list, OTHER_KEY)).body.monitors).toEqual([]);

    const deleted = await asOwner({ method: "DELETE", path: `/api/monitors/${id}` });
    expect(deleted.status).toBe(200);
    conforms("DELETE", "/api/monitors/{id}", deleted);
    expect(deleted.body).toEqual({ id, deleted: true });
    expect((await asOwner(read)).status).toBe(404);
    expect((await asOwner({ method: "DELETE", path: `/api/monitors/${id}` })).status).toBe(404);
    expect((await asOwner(list)).body.monitors).toHaveLength(3);
  });

  it("refuses a private webhook URL with 400 before any payment unless allowed; shows an endpoint's secret once; rotates it", async () => {
    const body = { wallets: [wallet(10)], webhook: { url: "http://127.0.0.1:9/hook" } };
    const verifies = world.facilitator.verifies;
    const refused = await send({ method: "POST", path: "/api/monitors", body, headers: await pay(THIRD_KEY, 10_000n) });
    expect([refused.status, refused.body.error.code]).toEqual([400, "webhook_url_refused"]);
    conforms("POST", "/api/monitors", refused);
    expect(world.facilitator.verifies).toBe(verifies);
    // Refused before the 402 too.
    expect((await send({ method: "POST", path: "/api/monitors", body })).status).toBe(400);

    settings.allowPrivateEndpoints = true;
    try {
      const res = await create(body, THIRD_KEY);
      expect(res.status).toBe(200);
      const endpoint = res.body.endpoint;
      expect(endpoint).toMatchObject({ url: body.webhook.url, disabled: null });
      expect(endpoint.secret).toMatch(/^whsec_/);
      expect(res.body.monitors[0].endpointId).toBe(endpoint.id);

      // Reused by id: no secret; listed without one.
      const reuse = await create({ wallets: [wallet(11)], webhook: { endpointId: endpoint.id } }, THIRD_KEY);
      expect(reuse.status).toBe(200);
      expect(reuse.body.endpoint).toEqual({
        id: endpoint.id,
        url: endpoint.url,
        createdAt: endpoint.createdAt,
        disabled: null,
      });
      const listed = await asOwner({ method: "GET", path: "/api/monitors/endpoints" }, THIRD_KEY);
      expect(listed.status).toBe(200);
      conforms("GET", "/api/monitors/endpoints", listed);
      expect(listed.body.endpoints).toEqual([reuse.body.endpoint]);
      expect(JSON.stringify((await asOwner({ method: "GET", path: "/api/monitors" }, THIRD_KEY)).body)).not.toContain(
        "whsec_",
      );

      // Someone else's endpoint: 404, and not charged.
      const before = world.chain.balanceOf(USDT.address, payerOf(OTHER_KEY));
      const theirs = await create({ wallets: [wallet(12)], webhook: { endpointId: endpoint.id } }, OTHER_KEY);
      expect([theirs.status, theirs.body.error.code]).toEqual([404, "endpoint_not_found"]);
      expect(world.chain.balanceOf(USDT.address, payerOf(OTHER_KEY))).toBe(before);
      // With callerAddress, refused before payment.
      const early = await send({
        method: "POST",
        path: "/api/monitors",
        body: { wallets: [wallet(12)], webhook: { endpointId: endpoint.id }, callerAddress: payerOf(OTHER_KEY) },
      });
      expect([early.status, early.body.error.code]).toEqual([404, "endpoint_not_found"]);

      const rotate = { method: "POST", path: `/api/monitors/endpoints/${endpoint.id}/rotate` };
      expect((await asOwner(rotate, OTHER_KEY)).status).toBe(404);
      const rotated = await asOwner(rotate, THIRD_KEY);
      expect(rotated.status).toBe(200);
      conforms("POST", "/api/monitors/endpoints/{id}/rotate", rotated);
      expect(rotated.body.endpoint.secret).toMatch(/^whsec_/);
      expect(rotated.body.endpoint.secret).not.toBe(endpoint.secret);
      const [row] = await store.db.query.webhookEndpoint.findMany();
      expect([row!.secret, row!.previousSecret]).toEqual([rotated.body.endpoint.secret, endpoint.secret]);
      expect(row!.previousUntil!.getTime() - Date.now()).toBeGreaterThan(23 * 3_600_000);

      await store.db.insert(monitorEvent).values({
        id: "evt_recover",
        owner: payerOf(THIRD_KEY),
        monitorId: res.body.monitors[0].id,
        wallet: wallet(10),
        type: "drain.detected",
        block: "1",
        blockHash: `0x${"1".repeat(64)}`,
        modelVersion: "test",
      });
      const recover = {
        method: "POST",
        path: `/api/monitors/endpoints/${endpoint.id}/recover`,
        body: {
          since: new Date(Date.now() - 3_600_000).toISOString(),
          until: new Date(Date.now() + 60_000).toISOString(),
        },
      };
      const recovered = await asOwner(recover, THIRD_KEY);
      expect(recovered.status).toBe(200);
      conforms("POST", "/api/monitors/endpoints/{id}/recover", recovered);
      expect(recovered.body).toEqual({ endpointId: endpoint.id, requeued: 1 });
      expect((await asOwner(recover, OTHER_KEY)).status).toBe(404);
    } finally {
      settings.allowPrivateEndpoints = false;
    }
  });

  it("holds the owner's limit: over it 409 monitor_limit with the limit, not charged (before payment with callerAddress)", async () => {
    // OWNER has 3 active monitors of 5.
    const before = world.chain.balanceOf(USDT.address, OWNER);
    const over = await create({ wallets: [wallet(20), wallet(21), wallet(22)] });
    expect([over.status, over.body.error.code]).toEqual([409, "monitor_limit"]);
    expect(over.body.error.details).toMatchObject({ limit: 5, active: 3, requested: 3 });
    conforms("POST", "/api/monitors", over);
    expect(world.chain.balanceOf(USDT.address, OWNER)).toBe(before);
    const early = await send({
      method: "POST",
      path: "/api/monitors",
      body: { wallets: [wallet(20), wallet(21), wallet(22)], callerAddress: OWNER },
    });
    expect([early.status, early.body.error.code]).toEqual([409, "monitor_limit"]);
    expect((await create({ wallets: [wallet(20), wallet(21)] })).status).toBe(200);
  });

  it("removes what a creation made when its payment is not settled (the answer is the refusal)", async () => {
    settings.allowPrivateEndpoints = true;
    try {
      world.facilitator.script = ["refuse"];
      const res = await create({ wallets: [wallet(30)], webhook: { url: "http://127.0.0.1:9/unpaid" } }, OTHER_KEY);
      expect(res.status).toBe(402);
      expect(res.body.monitors).toBeUndefined();
      expect(
        await store.db
          .select()
          .from(monitor)
          .where(eq(monitor.wallet, wallet(30))),
      ).toEqual([]);
      const endpoints = await store.db.query.webhookEndpoint.findMany();
      expect(endpoints.map((e) => e.url)).not.toContain("http://127.0.0.1:9/unpaid");
    } finally {
      world.facilitator.script = [];
      settings.allowPrivateEndpoints = false;
    }
  });

  it("renews for 30 days from paid_until (or from now once expired), paid by anyone, the owner unchanged", async () => {
    // One the earlier cases did not delete (an unordered read could pick a deleted one).
    const [m] = await store.db
      .select()
      .from(monitor)
      .where(and(eq(monitor.owner, OWNER), isNull(monitor.deletedAt)))
      .limit(1);
    const path = `/api/monitors/${m!.id}/renew`;
    // With a payment (unpaid and bodiless, it is the crawlers' probe: a 402), refused before it is taken.
    const unknown = await send({
      method: "POST",
      path: "/api/monitors/mon_nope/renew",
      headers: await pay(OTHER_KEY, 10_000n),
    });
    expect(unknown.body.error.code).toBe("monitor_not_found");
    const unpaid = await send({ method: "POST", path });
    expect(unpaid.status).toBe(402);
    expect(unpaid.body.accepts[0].maxAmountRequired).toBe("10000");

    const res = await send({ method: "POST", path, headers: await pay(OTHER_KEY, 10_000n) });
    expect(res.status).toBe(200);
    conforms("POST", "/api/monitors/{id}/renew", res);
    expect(res.body.previousPaidUntil).toBe(m!.paidUntil.toISOString());
    expect(Date.parse(res.body.paidUntil)).toBe(m!.paidUntil.getTime() + MONITOR_PERIOD_MS);
    expect(res.body.x402Billing.payer).toBe(payerOf(OTHER_KEY));
    const [after] = await store.db.select().from(monitor).where(eq(monitor.id, m!.id));
    expect(after!.owner).toBe(OWNER);
    expect(after!.paymentRef).toContain(payerOf(OTHER_KEY));

    // Expired: counted from now, and listed as expired until then.
    await store.db
      .update(monitor)
      .set({ paidUntil: new Date(Date.now() - 1000) })
      .where(eq(monitor.id, m!.id));
    const expired = await asOwner({ method: "GET", path: `/api/monitors/${m!.id}` });
    expect(expired.body.monitor.status).toBe("expired");
    const renewed = await send({ method: "POST", path, headers: await pay(OWNER_KEY, 10_000n) });
    const ahead = Date.parse(renewed.body.paidUntil) - Date.now();
    expect(ahead).toBeGreaterThan(MONITOR_PERIOD_MS - 60_000);
    expect(ahead).toBeLessThanOrEqual(MONITOR_PERIOD_MS);
    expect(renewed.body.monitor.status).toBe("active");
  });

  it("pages the owner's events in order after the cursor, and only the owner's", async () => {
    const event = (n: number, owner: string) => ({
      id: `evt_${owner.slice(2, 8)}_${n}`,
      owner,
      monitorId: "mon_x",
      wallet: wallet(1),
      type: "drain.detected",
      before: { drained: false },
      after: { drained: true },
      block: String(100 + n),
      blockHash: `0x${n.toString(16).padStart(64, "0")}`,
      modelVersion: "test",
    });
    await store.db
      .insert(monitorEvent)
      .values([
        ...[1, 2, 3].map((n) => event(n, OWNER)),
        event(4, payerOf(OTHER_KEY)),
        ...[5, 6].map((n) => event(n, OWNER)),
      ]);
    const page = (since?: string) => ({
      method: "GET",
      path: `/api/monitors/events?limit=2${since ? `&since=${since}` : ""}`,
    });
    const first = await asOwner(page());
    expect(first.status).toBe(200);
    conforms("GET", "/api/monitors/events", first);
    expect(first.body.events.map((e: { id: string }) => e.id)).toEqual([event(1, OWNER).id, event(2, OWNER).id]);
    expect(first.body.events[0]).toMatchObject({
      type: "drain.detected",
      monitorId: "mon_x",
      block: "101",
      retracts: null,
      after: { drained: true },
    });
    const second = await asOwner(page(first.body.next));
    expect(second.body.events.map((e: { block: string }) => e.block)).toEqual(["103", "105"]);
    const third = await asOwner(page(second.body.next));
    expect(third.body.events.map((e: { block: string }) => e.block)).toEqual(["106"]);
    const last = await asOwner(page(third.body.next));
    expect(last.body).toEqual({ events: [], next: null });
    const other = await asOwner({ method: "GET", path: "/api/monitors/events" }, OTHER_KEY);
    expect(other.body.events.map((e: { block: string }) => e.block)).toEqual(["104"]);
    // Bad input is refused before the sign-in is looked at.
    const bad = await send({ method: "GET", path: "/api/monitors/events?limit=501" });
    expect([bad.status, bad.body.error.code]).toEqual([400, "invalid_request"]);
  });
});
