import { randomBytes } from "node:crypto";
import { and, asc, desc, eq, gt, isNull, sql } from "drizzle-orm";
import type { z } from "zod";
import type { Address } from "../../config/addresses.ts";
import { MONITOR_PERIOD_MS } from "../payments/prices.ts";
import { monitor, monitorEvent, webhookEndpoint } from "../store/schema.ts";
import type { ServiceDb } from "../store/store.ts";
import type { MonitorEventType, monitorEventSchema, monitorSchema } from "./schema.ts";

// The monitor rows (service.monitor) as the routes read and write them. A deleted monitor keeps its
// row (deleted_at): its events still name it.

type MonitorRow = typeof monitor.$inferSelect;
type Db = Pick<ServiceDb, "select" | "insert" | "update" | "delete">;

const newMonitorId = () => `mon_${randomBytes(12).toString("hex")}`;

/** A monitor is screened while it is paid for: until `paid_until`. */
const isActive = (row: Pick<MonitorRow, "paidUntil">, now: Date) => row.paidUntil > now;

const notDeleted = isNull(monitor.deletedAt);

/** Monitors of one owner that count against its limit: not deleted, paid until later than now. */
export async function activeCount(db: Db, owner: Address, now: Date): Promise<number> {
  const [row] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(monitor)
    .where(and(eq(monitor.owner, owner), notDeleted, gt(monitor.paidUntil, now)));
  return row?.n ?? 0;
}

type NewMonitors = {
  owner: Address;
  wallets: readonly Address[];
  events: readonly MonitorEventType[];
  scoreBelow?: number;
  worseThan?: string;
  endpointId: string | null;
  paidUntil: Date;
  paymentRef: string;
};

/** One monitor row per wallet, no snapshot yet (the watcher screens it first). */
export async function insertMonitors(db: Db, m: NewMonitors): Promise<MonitorRow[]> {
  return db
    .insert(monitor)
    .values(
      m.wallets.map((wallet) => ({
        id: newMonitorId(),
        owner: m.owner,
        wallet,
        endpointId: m.endpointId,
        events: [...m.events],
        scoreBelow: m.scoreBelow ?? null,
        worseThan: m.worseThan ?? null,
        paidUntil: m.paidUntil,
        paymentRef: m.paymentRef,
        snapshot: null,
      })),
    )
    .returning();
}

/** The monitor by id, not deleted; with `owner`, only if that wallet owns it. */
export async function findMonitor(db: Db, id: string, owner?: Address): Promise<MonitorRow | undefined> {
  const [row] = await db
    .select()
    .from(monitor)
    .where(and(eq(monitor.id, id), notDeleted, owner ? eq(monitor.owner, owner) : undefined));
  return row;
}

/** The owner's monitors not deleted, newest first. */
export async function ownerMonitors(db: Db, owner: Address): Promise<MonitorRow[]> {
  return db
    .select()
    .from(monitor)
    .where(and(eq(monitor.owner, owner), notDeleted))
    .orderBy(desc(monitor.createdAt), desc(monitor.id));
}

/** Marks the owner's monitor deleted: false when there is none to delete. */
export async function deleteMonitor(db: Db, id: string, owner: Address, now: Date): Promise<boolean> {
  const rows = await db
    .update(monitor)
    .set({ deletedAt: now })
    .where(and(eq(monitor.id, id), eq(monitor.owner, owner), notDeleted))
    .returning({ id: monitor.id });
  return rows.length > 0;
}

/** A paid period more: from paid_until, or from now when it already passed. */
export async function renewMonitor(
  db: Db,
  id: string,
  paymentRef: string,
  now: Date,
): Promise<{ row: MonitorRow; previous: { paidUntil: Date; paymentRef: string } } | undefined> {
  const current = await findMonitor(db, id);
  if (!current) return undefined;
  const from = current.paidUntil > now ? current.paidUntil : now;
  // Conditional on the paid_until read: two renewals at once both count (the second retries on the first's).
  const [row] = await db
    .update(monitor)
    .set({ paidUntil: new Date(from.getTime() + MONITOR_PERIOD_MS), paymentRef })
    .where(and(eq(monitor.id, id), notDeleted, eq(monitor.paidUntil, current.paidUntil)))
    .returning();
  if (!row) return renewMonitor(db, id, paymentRef, now);
  return { row, previous: { paidUntil: current.paidUntil, paymentRef: current.paymentRef } };
}

/** Undoes a renewal whose payment was not settled (unless renewed again since): the previous period and payment. */
export async function undoRenewal(
  db: Db,
  id: string,
  paymentRef: string,
  previous: { paidUntil: Date; paymentRef: string },
): Promise<void> {
  await db
    .update(monitor)
    .set(previous)
    .where(and(eq(monitor.id, id), eq(monitor.paymentRef, paymentRef)));
}

/** Removes what a payment that was not settled created (it never stood): its monitors, and the endpoint made with them. */
export async function removeUnpaid(db: Db, paymentRef: string, endpointId?: string): Promise<void> {
  await db.delete(monitor).where(eq(monitor.paymentRef, paymentRef));
  if (endpointId) await db.delete(webhookEndpoint).where(eq(webhookEndpoint.id, endpointId));
}

/** The owner's events after the cursor (their seq), in order. */
export async function eventsAfter(db: Db, owner: Address, since: number, limit: number) {
  return db
    .select()
    .from(monitorEvent)
    .where(and(eq(monitorEvent.owner, owner), gt(monitorEvent.seq, since)))
    .orderBy(asc(monitorEvent.seq))
    .limit(limit);
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** A monitor as the routes answer it. */
export function monitorView(row: MonitorRow, now: Date): z.infer<typeof monitorSchema> {
  return {
    id: row.id,
    wallet: row.wallet as Address,
    events: row.events,
    thresholds: { scoreBelow: row.scoreBelow, recommendationWorseThan: row.worseThan },
    endpointId: row.endpointId,
    status: isActive(row, now) ? "active" : "expired",
    paidUntil: row.paidUntil.toISOString(),
    createdAt: row.createdAt.toISOString(),
    lastScreened: {
      at: iso(row.screenedAt),
      block: row.snapshotBlock,
      values: row.snapshot ?? null,
    },
  };
}

/** An event as the feed answers it. */
export function eventView(row: typeof monitorEvent.$inferSelect): z.infer<typeof monitorEventSchema> {
  return {
    id: row.id,
    type: row.type,
    monitorId: row.monitorId,
    wallet: row.wallet as Address,
    before: row.before ?? null,
    after: row.after ?? null,
    block: row.block,
    blockHash: row.blockHash,
    modelVersion: row.modelVersion,
    retracts: row.retracts,
    createdAt: row.createdAt.toISOString(),
  };
}
