import { once } from "node:events";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { eq, sql } from "drizzle-orm";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  createEndpoint,
  getEndpoint,
  listEndpoints,
  recoverDeliveries,
  rotateSecret,
} from "../../api/monitors/webhooks/endpoints.ts";
import { WebhookWorker, type WebhookWorkerOptions } from "../../api/monitors/webhooks/worker.ts";
import { monitor, monitorEvent, webhookDelivery, webhookEndpoint } from "../../api/store/schema.ts";
import { openServiceStore, type ServiceStore, type ServiceStoreLocation } from "../../api/store/store.ts";
import { type DatabaseSlot, databaseSlot, testDatabase } from "../support/indexer.ts";

// The webhook delivery worker and the endpoint store, on a fresh service store (PGlite or
// Postgres), with local receivers on port 0. The pure parts: test/monitors/webhooks.test.ts.

const OWNER = "0x00000000000000000000000000000000000000aa";
let slot: DatabaseSlot;
let location: ServiceStoreLocation;
let store: ServiceStore;
const servers: Server[] = [];

beforeAll(async () => {
  slot = databaseSlot();
  await slot.prepare();
  location = slot.store;
  store = await openServiceStore(location);
});
afterAll(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    server.close();
  }
  await store?.close();
  await slot?.drop();
});
beforeEach(async () => {
  for (const table of [webhookDelivery, monitorEvent, monitor, webhookEndpoint]) await store.db.delete(table);
});

type Received = { headers: IncomingHttpHeaders; body: string };
type Answer = { status: number; headers?: Record<string, string> } | "hang";

/** A receiver on 127.0.0.1:0: records every request, answers what `answer` says for the nth (from 0). */
async function receiver(answer: (n: number) => Answer = () => ({ status: 200 })) {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const reply = answer(received.length);
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
      if (reply === "hang") return;
      res.writeHead(reply.status, reply.headers).end();
    });
  });
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received };
}

const worker = (options: WebhookWorkerOptions = {}) => new WebhookWorker(store.db, { allowPrivate: true, ...options });

let seq = 0;
/** An endpoint at `url`, a monitor pushing to it, and `n` events each with a pending delivery. */
async function seed(url: string, n = 1, createdAt?: (i: number) => Date) {
  const endpoint = await createEndpoint(store.db, { owner: OWNER, url });
  const monitorId = `mon_${++seq}`;
  await store.db.insert(monitor).values({
    id: monitorId,
    owner: OWNER,
    wallet: "0x00000000000000000000000000000000000000bb",
    endpointId: endpoint.id,
    events: ["score.threshold_crossed"],
    paidUntil: new Date(Date.now() + 86_400_000),
    paymentRef: `t:${OWNER}:${seq}`,
  });
  const ids = Array.from({ length: n }, (_, i) => `evt_${seq}_${i}`);
  if (n) {
    await store.db.insert(monitorEvent).values(
      ids.map((id, i) => ({
        id,
        owner: OWNER,
        monitorId,
        wallet: "0x00000000000000000000000000000000000000bb",
        type: "score.threshold_crossed",
        before: { score: 70 },
        after: { score: 40 + i },
        block: String(1000 + i),
        blockHash: `0x${i}`,
        modelVersion: "test",
        ...(createdAt ? { createdAt: createdAt(i) } : {}),
      })),
    );
    await store.db.insert(webhookDelivery).values(ids.map((eventId) => ({ eventId, endpointId: endpoint.id })));
  }
  return { endpoint, monitorId, ids };
}

const deliveries = () => store.db.select().from(webhookDelivery).orderBy(webhookDelivery.eventId);
const delivery = async (eventId: string) =>
  (await store.db.select().from(webhookDelivery).where(eq(webhookDelivery.eventId, eventId)))[0]!;

describe(`webhook delivery (${testDatabase})`, () => {
  it("delivers a message that standardwebhooks verifies; during a rotation both secrets sign it", async () => {
    const { url, received } = await receiver();
    const { endpoint, ids } = await seed(url, 2);
    expect(await worker({ batch: 1 }).runOnce()).toMatchObject({ taken: 1, delivered: 1 });
    const first = received[0]!;
    const payload = new Webhook(endpoint.secret).verify(first.body, first.headers as Record<string, string>);
    expect(payload).toMatchObject({ type: "score.threshold_crossed", data: { id: ids[0], block: 1000 } });
    expect(first.headers["webhook-id"]).toBe(ids[0]);
    expect(first.headers["user-agent"]).toContain("celo-wallet-reputation");
    expect(await delivery(ids[0]!)).toMatchObject({
      status: "delivered",
      attempts: 1,
      lastStatus: 200,
      leasedUntil: null,
    });
    expect((await delivery(ids[0]!)).deliveredAt).toBeInstanceOf(Date);

    const secret = await rotateSecret(store.db, endpoint.id, OWNER);
    expect(secret).toMatch(/^whsec_/);
    expect(await rotateSecret(store.db, endpoint.id, "0x00000000000000000000000000000000000000cc")).toBeNull();
    expect(await worker().runOnce()).toMatchObject({ taken: 1, delivered: 1 });
    const second = received[1]!;
    const signatures = (second.headers["webhook-signature"] as string).split(" ");
    expect(signatures).toHaveLength(2);
    for (const [key, signature] of [
      [secret!, signatures[0]!],
      [endpoint.secret, signatures[1]!],
    ] as const)
      expect(
        new Webhook(key).verify(second.body, { ...second.headers, "webhook-signature": signature } as never),
      ).toMatchObject({
        data: { id: ids[1] },
      });
  });

  it("retries a receiver that fails three times: the same webhook-id four times, delivered once", async () => {
    const { url, received } = await receiver((n) => ({ status: n < 3 ? 500 : 200 }));
    const { ids } = await seed(url, 1);
    let clock = Date.now();
    const w = worker({ now: () => new Date(clock) });
    for (let round = 0; round < 6; round++) {
      await w.runOnce();
      clock += 86_400_000;
    }
    expect(received.map((r) => r.headers["webhook-id"])).toEqual([ids[0], ids[0], ids[0], ids[0]]);
    expect(new Set(received.map((r) => r.body)).size).toBe(1);
    expect(await delivery(ids[0]!)).toMatchObject({ status: "delivered", attempts: 4, lastStatus: 200 });
  });

  it("gives up after the schedule: failed after ten attempts", async () => {
    const { url, received } = await receiver(() => ({ status: 500 }));
    const { ids } = await seed(url, 1);
    let clock = Date.now();
    const w = worker({ now: () => new Date(clock) });
    for (let round = 0; round < 12; round++) {
      await w.runOnce();
      clock += 2 * 86_400_000;
    }
    expect(received).toHaveLength(10);
    expect(await delivery(ids[0]!)).toMatchObject({
      status: "failed",
      attempts: 10,
      lastStatus: 500,
      lastError: "answered 500",
    });
  });

  it("410 disables the endpoint and cancels its other deliveries", async () => {
    const { url, received } = await receiver(() => ({ status: 410 }));
    const { endpoint, ids } = await seed(url, 3);
    const other = await receiver();
    const kept = await seed(other.url, 1);
    await worker({ batch: 1 }).runOnce();
    expect(received).toHaveLength(1);
    expect(await getEndpoint(store.db, endpoint.id)).toMatchObject({ disabledReason: `410 Gone from ${url}` });
    expect((await getEndpoint(store.db, endpoint.id))?.disabledAt).toBeInstanceOf(Date);
    for (const id of ids) expect((await delivery(id)).status).toBe("cancelled");
    expect((await delivery(ids[0]!)).lastStatus).toBe(410);
    // Queued later (the watcher does not know yet): cancelled, not sent.
    const { seq: _seq, ...first } = (
      await store.db.select().from(monitorEvent).where(eq(monitorEvent.id, ids[0]!))
    )[0]!;
    await store.db.insert(monitorEvent).values({ ...first, id: "evt_late" });
    await store.db.insert(webhookDelivery).values({ eventId: "evt_late", endpointId: endpoint.id });
    expect(await worker().runOnce()).toMatchObject({ taken: 2, delivered: 1, cancelled: 1 });
    expect(received).toHaveLength(1);
    expect(other.received.map((r) => r.headers["webhook-id"])).toEqual(kept.ids);
  });

  it("429 with Retry-After: 120 waits at least 120 s", async () => {
    const { url } = await receiver(() => ({ status: 429, headers: { "retry-after": "120" } }));
    const { ids } = await seed(url, 1);
    const now = new Date();
    await worker({ now: () => now }).runOnce();
    const row = await delivery(ids[0]!);
    expect(row).toMatchObject({ status: "pending", attempts: 1, lastStatus: 429, leasedUntil: null });
    expect(row.nextAttemptAt.getTime()).toBeGreaterThanOrEqual(now.getTime() + 120_000);
  });

  it("does not follow a redirect, and counts it as a failure", async () => {
    const target = await receiver();
    const { url } = await receiver(() => ({ status: 302, headers: { location: target.url } }));
    const { ids } = await seed(url, 1);
    await worker().runOnce();
    expect(target.received).toHaveLength(0);
    expect(await delivery(ids[0]!)).toMatchObject({
      status: "pending",
      attempts: 1,
      lastStatus: 302,
      lastError: expect.stringContaining("redirects are not followed"),
    });
  });

  it("a receiver that hangs past timeoutMs is a failed attempt", async () => {
    const { url, received } = await receiver(() => "hang");
    const { ids } = await seed(url, 1);
    const started = Date.now();
    await worker({ timeoutMs: 300 }).runOnce();
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(received).toHaveLength(1);
    expect(await delivery(ids[0]!)).toMatchObject({
      status: "pending",
      attempts: 1,
      lastStatus: null,
      lastError: "no answer within 300 ms",
    });
  });

  it("refuses a private endpoint without allowPrivate, before each send: a failed attempt, nothing sent", async () => {
    const { url, received } = await receiver();
    const { ids } = await seed(url, 1);
    await worker({ allowPrivate: false }).runOnce();
    expect(received).toHaveLength(0);
    expect(await delivery(ids[0]!)).toMatchObject({
      status: "pending",
      attempts: 1,
      lastError: expect.stringMatching(/^refused: .*loopback/),
    });
  });

  it("a row leased by a worker that died is delivered by another once the lease passes", async () => {
    const { url, received } = await receiver();
    const { ids } = await seed(url, 1);
    const dead = worker({ leaseMs: 60_000 });
    // The dead worker's round stopped right after its lease: the row is taken, never sent.
    expect(await (dead as unknown as { lease: () => Promise<unknown[]> }).lease()).toHaveLength(1);
    expect(await worker().runOnce()).toMatchObject({ taken: 0 });
    expect(received).toHaveLength(0);
    const later = worker({ now: () => new Date(Date.now() + 61_000) });
    expect(await later.runOnce()).toMatchObject({ taken: 1, delivered: 1 });
    expect(received.map((r) => r.headers["webhook-id"])).toEqual(ids);
  });

  it("two workers on one store deliver each of 50 messages exactly once", async () => {
    const { url, received } = await receiver();
    const { ids } = await seed(url, 50);
    // On Postgres each worker has its own pool, as two replicas would; PGlite is one process's.
    const other = testDatabase === "postgres" ? await openServiceStore(location) : store;
    try {
      const workers = [worker({ batch: 5 }), new WebhookWorker(other.db, { allowPrivate: true, batch: 5 })];
      const rounds = await Promise.all(
        workers.map(async (w) => {
          let taken = 0;
          for (let r = 0; r < 30 && (await w.counts()).due > 0; r++) taken += (await w.runOnce()).taken;
          return taken;
        }),
      );
      expect(rounds[0]! + rounds[1]!).toBe(50);
      if (testDatabase === "postgres") expect(rounds.every((n) => n > 0)).toBe(true);
    } finally {
      if (other !== store) await other.close();
    }
    expect(received.map((r) => r.headers["webhook-id"]).sort()).toEqual([...ids].sort());
    expect((await deliveries()).every((d) => d.status === "delivered" && d.attempts === 1)).toBe(true);
  });

  it("start() delivers without a round being called, kick() at once, and stop() waits for the sends", async () => {
    const { url, received } = await receiver();
    const { ids } = await seed(url, 2);
    const w = worker().start(50);
    try {
      await expect.poll(() => received.length, { timeout: 5_000 }).toBe(2);
      const more = await seed(url, 1);
      w.kick();
      await expect.poll(() => received.length, { timeout: 5_000 }).toBe(3);
      expect(received.map((r) => r.headers["webhook-id"]).sort()).toEqual([...ids, ...more.ids].sort());
    } finally {
      await w.stop();
    }
    expect(await w.counts()).toEqual({ pending: 0, due: 0 });
    // Stopped: a kick sends nothing.
    await seed(url, 1);
    w.kick();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(received).toHaveLength(3);
    expect(await w.counts()).toMatchObject({ pending: 1 });
  });
});

describe(`webhook endpoints (${testDatabase})`, () => {
  it("lists and gets endpoints without their secrets", async () => {
    const a = await createEndpoint(store.db, {
      owner: OWNER.toUpperCase().replace("0X", "0x"),
      url: "https://93.184.216.34/a",
    });
    expect(a).toMatchObject({ owner: OWNER, url: "https://93.184.216.34/a", secret: expect.stringMatching(/^whsec_/) });
    await createEndpoint(store.db, {
      owner: "0x00000000000000000000000000000000000000cc",
      url: "https://93.184.216.34/b",
    });
    const listed = await listEndpoints(store.db, OWNER);
    expect(listed.map((e) => e.id)).toEqual([a.id]);
    expect(JSON.stringify(listed)).not.toContain("whsec_");
    expect(JSON.stringify(await getEndpoint(store.db, a.id))).not.toContain("whsec_");
    expect(await getEndpoint(store.db, a.id)).toMatchObject({ id: a.id, owner: OWNER, disabledAt: null });
    expect(await getEndpoint(store.db, "whep_missing")).toBeUndefined();
  });

  it("recoverDeliveries sends again exactly the events created in [since, until)", async () => {
    const { url, received } = await receiver();
    const base = Date.parse("2026-11-01T00:00:00Z");
    const hour = 3_600_000;
    const { endpoint, ids } = await seed(url, 5, (i) => new Date(base + i * hour));
    // Another endpoint's event in the same range is not this endpoint's to recover.
    const other = await seed((await receiver()).url, 1, () => new Date(base + hour));
    await worker().runOnce();
    expect(received).toHaveLength(5);
    // One delivery lost altogether, one given up: both come back, as do the delivered ones in range.
    await store.db.delete(webhookDelivery).where(eq(webhookDelivery.eventId, ids[2]!));
    await store.db
      .update(webhookDelivery)
      .set({ status: "failed", attempts: 10 })
      .where(eq(webhookDelivery.eventId, ids[3]!));
    const recovered = await recoverDeliveries(store.db, endpoint.id, {
      since: new Date(base + hour),
      until: new Date(base + 4 * hour),
    });
    expect(recovered).toBe(3);
    expect((await deliveries()).filter((d) => d.status === "pending").map((d) => d.eventId)).toEqual(ids.slice(1, 4));
    expect((await delivery(ids[3]!)).attempts).toBe(0);
    await worker().runOnce();
    expect(
      received
        .slice(5)
        .map((r) => r.headers["webhook-id"])
        .sort(),
    ).toEqual(ids.slice(1, 4));
    expect((await delivery(other.ids[0]!)).attempts).toBe(1);
    expect(
      await store.db
        .execute(sql`select 1 from service.webhook_delivery where status <> 'delivered'`)
        .then((r) => (r as unknown as { rows: unknown[] }).rows.length),
    ).toBe(0);
  });
});
