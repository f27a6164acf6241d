import { createHash } from "node:crypto";
import { and, eq, gt, gte, inArray, isNull, sql } from "drizzle-orm";
import { BlockNotFoundError, type PublicClient } from "viem";
import type { Address } from "../../config/addresses.ts";
import type { IndexTarget } from "../../config/target.ts";
import { firstLine } from "../../shared/async.ts";
import { log } from "../../shared/log.ts";
import { arrayParam, type IndexDb, queryPrepared } from "../db.ts";
import type { IndexState } from "../indexing/state.ts";
import { sanctionsVersion } from "../sanctions/queries.ts";
import { monitor, monitorCursor, monitorEvent, webhookDelivery, webhookEndpoint } from "../store/schema.ts";
import type { ServiceDb } from "../store/store.ts";
import { WalletAssessor } from "../wallet/assess.ts";
import { recentReportsOf } from "../wallet/queries.ts";
import { type Change, changesFor, type Watch } from "./events.ts";
import { EVENT_RETRACTED } from "./schema.ts";
import { type Snapshot, snapshotOf } from "./snapshot.ts";

export type WatcherDeps = {
  db: IndexDb;
  store: Promise<ServiceDb>;
  target: Pick<IndexTarget, "schema" | "tracked" | "sanctions">;
  index: Pick<IndexState, "status">;
  chain: Pick<PublicClient, "getBlock">;
  /** Called when deliveries were queued (the webhook worker sends at once). */
  onQueued?: () => void;
  intervalMs?: number;
  /** Every watched wallet is screened again at least this often: time alone moves scores. */
  rescreenMs?: number;
};

const CURSOR = "watcher";
/** Events of the last this many blocks are checked against the chain's blocks: a reorg retracts them. */
const REORG_DEPTH = 128;
const SCREEN_BATCH = 100;
const DAY_MS = 86_400_000;

type Head = { number: number; timestamp: number; hash: string };
type Watched = typeof monitor.$inferSelect;

/** An event's id: derived from what happened, so that the same change seen twice is one event. */
const eventId = (...parts: unknown[]) =>
  `evt_${createHash("sha256").update(JSON.stringify(parts)).digest("hex").slice(0, 32)}`;

/**
 * Follows the index for the monitors (in the indexer's process only): each new indexed block, the
 * watched wallets it touched (a transfer, a passport attested, revoked or expired, a sanctions
 * listing) are screened again, and what changed for each monitor (api/monitors/events.ts) becomes
 * an event and a webhook delivery per endpoint, in one transaction with the monitor's new snapshot.
 * Wallets are also screened at least daily. Events whose block a reorg replaced are retracted.
 */
export class MonitorWatcher {
  private readonly assessor: WalletAssessor;
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private cursorTime?: { block: number; timestamp: number };
  private listings?: string;
  /** The indexed head's hash at the last round. */
  private lastHead?: string;

  constructor(private readonly deps: WatcherDeps) {
    this.assessor = new WalletAssessor(deps);
  }

  start(): this {
    this.timer = setInterval(() => void this.tick(), this.deps.intervalMs ?? 500);
    this.timer.unref();
    return this;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One round (tests call it directly); rounds never overlap. */
  tick(): Promise<void> {
    this.running ??= this.round()
      .catch((error) => log.error(`[monitors] watching failed: ${firstLine(error)}`))
      .finally(() => (this.running = undefined));
    return this.running;
  }

  private async round(): Promise<void> {
    const store = await this.deps.store;
    // Nothing watched, nothing to do: no index or chain read (the usual case of a process). Only
    // what picks the wallets to screen is read here; whole rows, for those screened.
    const watched = await store
      .select({ id: monitor.id, wallet: monitor.wallet, screenedAt: monitor.screenedAt })
      .from(monitor)
      .where(and(isNull(monitor.deletedAt), gt(monitor.paidUntil, new Date())));
    if (!watched.length) return;
    const status = await this.deps.index.status();
    if (!status.current || !status.indexedBlock) return;
    const block = await this.deps.chain.getBlock({ blockNumber: BigInt(status.indexedBlock.number) });
    const head: Head = { number: Number(block.number), timestamp: Number(block.timestamp), hash: block.hash };
    const [cursor] = await store.select().from(monitorCursor).where(eq(monitorCursor.name, CURSOR));
    // A reorg shows as a new indexed head: the recent events are checked only then.
    const retracted = head.hash === this.lastHead ? [] : await this.retractReorged(store, head);
    this.lastHead = head.hash;
    // An index behind what was screened (Ponder's crash recovery reverts to its safe checkpoint, a
    // reorg to a shorter chain) would compare older data with newer: wait for it to catch up.
    if (cursor && head.number < Number(cursor.block)) return;
    const from = cursor ? Number(cursor.block) : head.number;

    const touched = new Set<Address>(retracted);
    const due = Date.now() - (this.deps.rescreenMs ?? DAY_MS);
    // Never screened (a new monitor: its first snapshot), or not for a day.
    for (const m of watched) if (!m.screenedAt || m.screenedAt.getTime() < due) touched.add(m.wallet as Address);
    const wallets = [...new Set(watched.map((m) => m.wallet as Address))];
    const listings = await sanctionsVersion(this.deps.db, this.deps.target.schema);
    if (this.listings !== undefined && listings !== this.listings) for (const w of wallets) touched.add(w);
    this.listings = listings;
    if (head.number > from) for (const w of await this.touchedSince(wallets, from, head.timestamp)) touched.add(w);

    const ids = watched.filter((m) => touched.has(m.wallet as Address)).map((m) => m.id);
    const rows = ids.length ? await store.select().from(monitor).where(inArray(monitor.id, ids)) : [];
    const queued = await this.screen(store, head, rows);
    await store
      .insert(monitorCursor)
      .values({ name: CURSOR, block: String(head.number) })
      .onConflictDoUpdate({ target: monitorCursor.name, set: { block: String(head.number), updatedAt: new Date() } });
    this.cursorTime = { block: head.number, timestamp: head.timestamp };
    if (queued) this.deps.onQueued?.();
  }

  /** Watched wallets with a transfer or a passport change in the blocks after `from`. */
  private async touchedSince(wallets: Address[], from: number, until: number): Promise<Address[]> {
    const { db, target, chain } = this.deps;
    const since =
      this.cursorTime?.block === from
        ? this.cursorTime.timestamp
        : Number((await chain.getBlock({ blockNumber: BigInt(from) })).timestamp);
    // Per wallet, index probes on both sides of its transfers (from/to, timestamp: blocks after the
    // cursor's share or pass its time; its number then leaves the cursor's own block out), and its passports.
    const rows = await queryPrepared<{ wallet: Address }>(
      db,
      `monitor_touched:${target.schema}`,
      `select w.address as wallet from unnest(${arrayParam(1, "text")}) as w(address)
       where exists (select 1 from "${target.schema}".transfer where "from" = w.address and timestamp >= $2 and block_number > $3)
          or exists (select 1 from "${target.schema}".transfer where "to" = w.address and timestamp >= $2 and block_number > $3)
          or exists (select 1 from "${target.schema}".report where wallet = w.address
                       and (block_number > $3 or revoked_at >= $2 or expires_at between $2 and $4))`,
      [wallets, since, from, until],
    );
    return rows.map((r) => r.wallet);
  }

  /** Screens the monitors' wallets and records each monitor's events and new snapshot; whether deliveries were queued. */
  private async screen(store: ServiceDb, head: Head, monitors: Watched[]): Promise<boolean> {
    const wallets = [...new Set(monitors.map((m) => m.wallet as Address))].filter((w) => this.assessor.isIndexed(w));
    let queued = false;
    for (let i = 0; i < wallets.length; i += SCREEN_BATCH) {
      const batch = wallets.slice(i, i + SCREEN_BATCH);
      const [assessments, reports] = await Promise.all([
        this.assessor.assessMany(batch),
        recentReportsOf(this.deps.db, batch),
      ]);
      const snapshots = new Map(batch.map((w, j) => [w, snapshotOf(assessments[j]!, reports.get(w)!)]));
      const modelVersion = assessments[0]?.result.modelVersion ?? "";
      for (const m of monitors) {
        const after = snapshots.get(m.wallet as Address);
        if (!after) continue;
        const changes = changesFor(m.snapshot as Snapshot | null, after, watchOf(m));
        queued = (await this.record(store, m, after, changes, head, modelVersion)) || queued;
      }
    }
    return queued;
  }

  /** The monitor's events, their deliveries and its new snapshot, together. */
  private async record(
    store: ServiceDb,
    m: Watched,
    after: Snapshot,
    changes: Change[],
    head: Head,
    modelVersion: string,
  ): Promise<boolean> {
    return store.transaction(async (tx) => {
      const ids = changes.map((c) => eventId(m.id, c.type, head.number, c.after));
      if (changes.length)
        await tx
          .insert(monitorEvent)
          .values(
            changes.map((c, i) => ({
              id: ids[i]!,
              owner: m.owner,
              monitorId: m.id,
              wallet: m.wallet,
              type: c.type,
              before: c.before,
              after: c.after,
              block: String(head.number),
              blockHash: head.hash,
              modelVersion,
            })),
          )
          .onConflictDoNothing();
      await tx
        .update(monitor)
        .set({ snapshot: after, snapshotBlock: String(head.number), screenedAt: new Date() })
        .where(eq(monitor.id, m.id));
      return changes.length > 0 && (await queueDeliveries(tx as unknown as ServiceDb, m.endpointId, ids));
    });
  }

  /**
   * Events of the last REORG_DEPTH blocks whose block is no longer the chain's: each gets an
   * `event.retracted` naming it. Returns the wallets concerned, to be screened again now.
   */
  private async retractReorged(store: ServiceDb, head: Head): Promise<Address[]> {
    const recent = await store
      .select()
      .from(monitorEvent)
      .where(
        and(
          gte(monitorEvent.block, String(Math.max(0, head.number - REORG_DEPTH))),
          isNull(monitorEvent.retracts),
          sql`not exists (select 1 from ${monitorEvent} r where r.retracts = ${monitorEvent.id})`,
        ),
      );
    if (!recent.length) return [];
    // The chain's block at each height, from the RPC (the index may be behind it): null when the
    // chain is shorter now, undefined when it could not be read (checked again next round).
    const blocks = [...new Set(recent.map((e) => e.block))];
    const hashes = await Promise.all(
      blocks.map((n) =>
        this.deps.chain.getBlock({ blockNumber: BigInt(n) }).then(
          (b) => b.hash,
          (error) => (error instanceof BlockNotFoundError ? null : undefined),
        ),
      ),
    );
    const canonical = new Map(blocks.map((n, i) => [n, hashes[i]]));
    const gone = recent.filter((e) => {
      const hash = canonical.get(e.block);
      return hash !== undefined && hash !== e.blockHash;
    });
    if (!gone.length) return [];
    const endpoints = new Map(
      (
        await store
          .select({ id: monitor.id, endpointId: monitor.endpointId })
          .from(monitor)
          .where(inArray(monitor.id, [...new Set(gone.map((e) => e.monitorId))]))
      ).map((r) => [r.id, r.endpointId]),
    );
    let queued = false;
    for (const e of gone) {
      const id = eventId("retract", e.id);
      await store
        .insert(monitorEvent)
        .values({
          id,
          owner: e.owner,
          monitorId: e.monitorId,
          wallet: e.wallet,
          type: EVENT_RETRACTED,
          before: { type: e.type, after: e.after, block: Number(e.block), blockHash: e.blockHash },
          after: null,
          block: String(head.number),
          blockHash: head.hash,
          modelVersion: e.modelVersion,
          retracts: e.id,
        })
        .onConflictDoNothing();
      queued = (await queueDeliveries(store, endpoints.get(e.monitorId) ?? null, [id])) || queued;
      log.warn(`[monitors] block ${e.block} of event ${e.id} (${e.type}) was reorganised away: retracted`);
    }
    if (queued) this.deps.onQueued?.();
    return [...new Set(gone.map((e) => e.wallet as Address))];
  }
}

/** One pending delivery per event to the monitor's endpoint, unless it has none or it is disabled. */
async function queueDeliveries(db: ServiceDb, endpointId: string | null, eventIds: string[]): Promise<boolean> {
  if (!endpointId || !eventIds.length) return false;
  const [endpoint] = await db.select().from(webhookEndpoint).where(eq(webhookEndpoint.id, endpointId));
  if (!endpoint || endpoint.disabledAt) return false;
  await db
    .insert(webhookDelivery)
    .values(eventIds.map((eventId) => ({ eventId, endpointId })))
    .onConflictDoNothing();
  return true;
}

const watchOf = (m: Watched): Watch => ({
  events: m.events,
  scoreBelow: m.scoreBelow,
  worseThan: (m.worseThan as Watch["worseThan"]) ?? null,
});
