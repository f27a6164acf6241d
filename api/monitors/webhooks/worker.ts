import { and, count, eq, isNull, lt, or, sql } from "drizzle-orm";
import { firstLine } from "../../../shared/async.ts";
import { log } from "../../../shared/log.ts";
import { monitorEvent, webhookDelivery, webhookEndpoint } from "../../store/schema.ts";
import type { ServiceDb } from "../../store/store.ts";
import { webhookMessage } from "./message.ts";
import { nextAttemptAt, retryAfterMs } from "./schedule.ts";
import { checkEndpointUrl } from "./ssrf.ts";

/** How often the worker looks for due deliveries when nothing kicked it (retries, other replicas' rows). */
const POLL_INTERVAL_MS = 500;
/** The longest last_error kept: enough to say what happened, never a receiver's whole page. */
const MAX_ERROR_LENGTH = 200;

export type WebhookWorkerOptions = {
  /** Allow endpoints on loopback and private networks (development, tests). */
  allowPrivate?: boolean;
  /** How long one send may take, headers included. */
  timeoutMs?: number;
  /**
   * How long a taken row stays this worker's. Longer than timeoutMs: a worker that dies mid-send
   * leaves its rows to the others once the lease passes (the message is then sent again).
   */
  leaseMs?: number;
  /** The most rows taken in one round. */
  batch?: number;
  now?: () => Date;
  fetch?: typeof fetch;
};

export type WebhookRound = { taken: number; delivered: number; retrying: number; failed: number; cancelled: number };

type Lease = { eventId: string; endpointId: string; attempts: number; leasedUntil: Date };
type Outcome =
  | { kind: "delivered"; status: number }
  | { kind: "gone"; status: number }
  | { kind: "failed"; status: number | null; error: string; retryAfterMs?: number };

const d = webhookDelivery;

/**
 * Delivers monitor events to webhook endpoints from the durable queue in the service store
 * (`webhook_delivery`). Every replica runs one: a round leases due rows in one statement (FOR
 * UPDATE SKIP LOCKED), so no two workers send a row at once; each result is recorded only while
 * the lease is still this worker's. Delivery is at least once: a send whose result was not
 * recorded (crash, lease lost) is sent again with the same webhook-id, which receivers dedupe on.
 */
export class WebhookWorker {
  private readonly allowPrivate: boolean;
  private readonly timeoutMs: number;
  private readonly leaseMs: number;
  private readonly batch: number;
  private readonly now: () => Date;
  private readonly fetch: typeof fetch;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: ServiceDb,
    options: WebhookWorkerOptions = {},
  ) {
    this.allowPrivate = options.allowPrivate ?? false;
    this.timeoutMs = options.timeoutMs ?? 15_000;
    // Twice the longest send: a dead worker's rows are sent again within 30 s by default.
    this.leaseMs = options.leaseMs ?? 2 * this.timeoutMs;
    if (this.leaseMs <= this.timeoutMs) throw new Error("leaseMs must be longer than timeoutMs");
    this.batch = options.batch ?? 20;
    this.now = options.now ?? (() => new Date());
    this.fetch = options.fetch ?? fetch;
  }

  start(intervalMs = POLL_INTERVAL_MS): this {
    this.stopped = false;
    this.kick();
    this.timer = setInterval(() => (this.running ? undefined : this.kick()), intervalMs);
    this.timer.unref?.();
    return this;
  }

  /** Something was queued: runs the queue now, or again right after the run under way (nothing once stopped). */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      try {
        let full: boolean;
        do {
          this.again = false;
          full = (await this.runOnce()).taken === this.batch;
        } while ((full || this.again) && !this.stopped);
      } catch (error) {
        log.warn(`[webhooks] delivery worker: ${firstLine(error)}`);
      } finally {
        this.running = null;
      }
    })();
  }

  /** Stops polling and waits for the sends in flight to be recorded. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** Deliveries waiting, and those of them due now (both read from the partial index on pending rows). */
  async counts(): Promise<{ pending: number; due: number }> {
    const [row] = await this.db
      .select({
        pending: count(),
        due: count(sql`case when ${d.nextAttemptAt} < ${new Date(this.now().getTime() + 1)} then 1 end`),
      })
      .from(d)
      .where(eq(d.status, "pending"));
    return { pending: row?.pending ?? 0, due: row?.due ?? 0 };
  }

  /** One round: leases up to `batch` due rows and sends them, all at once. */
  async runOnce(): Promise<WebhookRound> {
    const leases = await this.lease();
    const outcomes = await Promise.all(
      leases.map((lease) =>
        this.deliver(lease).catch((error) => {
          // The lease expires and another round sends the row again.
          log.warn(`[webhooks] delivery ${lease.eventId} → ${lease.endpointId}: ${firstLine(error)}`);
          return "retrying" as const;
        }),
      ),
    );
    const round: WebhookRound = { taken: leases.length, delivered: 0, retrying: 0, failed: 0, cancelled: 0 };
    for (const outcome of outcomes) round[outcome]++;
    return round;
  }

  /** Takes the due rows no live lease holds, in one statement: a row locked by another worker's lease is skipped. */
  private async lease(): Promise<Lease[]> {
    const now = this.now();
    const leasedUntil = new Date(now.getTime() + this.leaseMs);
    // Due up to the end of this millisecond: the database keeps microseconds, so a row queued
    // (next_attempt_at defaults to the database's now()) in the same millisecond counts as due.
    const dueBefore = new Date(now.getTime() + 1);
    const due = this.db
      .select({ eventId: d.eventId, endpointId: d.endpointId })
      .from(d)
      .where(
        and(eq(d.status, "pending"), lt(d.nextAttemptAt, dueBefore), or(isNull(d.leasedUntil), lt(d.leasedUntil, now))),
      )
      .orderBy(d.nextAttemptAt)
      .limit(this.batch)
      .for("update", { skipLocked: true });
    return this.db
      .update(d)
      .set({ leasedUntil })
      .where(sql`(${d.eventId}, ${d.endpointId}) in (${due})`)
      .returning({ eventId: d.eventId, endpointId: d.endpointId, attempts: d.attempts, leasedUntil: d.leasedUntil })
      .then((rows) => rows.map((row) => ({ ...row, leasedUntil: row.leasedUntil ?? leasedUntil })));
  }

  private async deliver(lease: Lease): Promise<keyof Omit<WebhookRound, "taken">> {
    const [found] = await this.db
      .select({ event: monitorEvent, endpoint: webhookEndpoint })
      .from(d)
      .leftJoin(monitorEvent, eq(monitorEvent.id, d.eventId))
      .leftJoin(webhookEndpoint, eq(webhookEndpoint.id, d.endpointId))
      .where(and(eq(d.eventId, lease.eventId), eq(d.endpointId, lease.endpointId)));
    const { event, endpoint } = found ?? {};
    if (!event || !endpoint || endpoint.disabledAt) {
      await this.record(lease, {
        status: "cancelled",
        leasedUntil: null,
        lastError: !event || !endpoint ? "the event or the endpoint no longer exists" : "endpoint disabled",
      });
      return "cancelled";
    }

    const outcome = await this.send(event, endpoint);
    if (outcome.kind === "delivered") {
      await this.record(lease, {
        status: "delivered",
        attempts: lease.attempts + 1,
        deliveredAt: this.now(),
        lastStatus: outcome.status,
        lastError: null,
        leasedUntil: null,
      });
      return "delivered";
    }
    if (outcome.kind === "gone") {
      await this.disable(lease, endpoint);
      return "cancelled";
    }
    const attempts = lease.attempts + 1;
    const next = nextAttemptAt(attempts, this.now(), outcome.retryAfterMs);
    const failed = {
      attempts,
      lastStatus: outcome.status,
      lastError: outcome.error.slice(0, MAX_ERROR_LENGTH),
      leasedUntil: null,
    };
    if (next) {
      await this.record(lease, { ...failed, nextAttemptAt: next });
      return "retrying";
    }
    if (await this.record(lease, { ...failed, status: "failed" }))
      log.warn(
        `[webhooks] event ${event.id} to endpoint ${endpoint.id}: failed after ${attempts} attempts (${failed.lastError})`,
      );
    return "failed";
  }

  /** Sends one message; every way it can end, as an outcome (never a throw). */
  private async send(
    event: typeof monitorEvent.$inferSelect,
    endpoint: typeof webhookEndpoint.$inferSelect,
  ): Promise<Outcome> {
    // Again before each send: what the host resolves to may have changed since it was registered.
    const check = await checkEndpointUrl(endpoint.url, { allowPrivate: this.allowPrivate });
    if (!check.ok) return { kind: "failed", status: null, error: `refused: ${check.reason}` };
    const sentAt = this.now();
    const { body, headers } = webhookMessage(event, endpoint, sentAt);
    let response: Response;
    try {
      response = await this.fetch(endpoint.url, {
        method: "POST",
        headers,
        body,
        redirect: "manual",
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      const name = (error as Error)?.name;
      if (name === "TimeoutError" || name === "AbortError")
        return { kind: "failed", status: null, error: `no answer within ${this.timeoutMs} ms` };
      // fetch's own error says only "fetch failed"; its cause names what failed (ECONNREFUSED, …).
      return { kind: "failed", status: null, error: firstLine((error as Error)?.cause ?? error) };
    }
    // The answer's body is not read: only its status counts.
    await response.body?.cancel().catch(() => undefined);
    const { status } = response;
    if (status >= 200 && status < 300) return { kind: "delivered", status };
    if (status === 410) return { kind: "gone", status };
    if (status >= 300 && status < 400)
      return { kind: "failed", status, error: `answered ${status}: redirects are not followed` };
    const wait =
      status === 429 || status === 503 ? retryAfterMs(response.headers.get("retry-after"), sentAt) : undefined;
    return { kind: "failed", status, error: `answered ${status}`, retryAfterMs: wait };
  }

  /** The endpoint answered 410 Gone: it gets nothing more, and every delivery waiting for it is cancelled. */
  private async disable(lease: Lease, endpoint: typeof webhookEndpoint.$inferSelect): Promise<void> {
    const at = this.now();
    await this.db
      .update(webhookEndpoint)
      .set({ disabledAt: at, disabledReason: `410 Gone from ${endpoint.url}` })
      .where(and(eq(webhookEndpoint.id, endpoint.id), isNull(webhookEndpoint.disabledAt)));
    await this.record(lease, {
      status: "cancelled",
      attempts: lease.attempts + 1,
      lastStatus: 410,
      lastError: "410 Gone: endpoint disabled",
      leasedUntil: null,
    });
    // Rows other workers hold lose their lease too: their results are then not recorded.
    await this.db
      .update(d)
      .set({ status: "cancelled", lastError: "endpoint disabled", leasedUntil: null })
      .where(and(eq(d.endpointId, endpoint.id), eq(d.status, "pending")));
    log.info(`[webhooks] endpoint ${endpoint.id} answered 410 Gone: disabled`);
  }

  /** Records a result, only while the row is still pending under this worker's lease; whether it was. */
  private async record(lease: Lease, values: Partial<typeof d.$inferInsert>): Promise<boolean> {
    const rows = await this.db
      .update(d)
      .set(values)
      .where(
        and(
          eq(d.eventId, lease.eventId),
          eq(d.endpointId, lease.endpointId),
          eq(d.status, "pending"),
          eq(d.leasedUntil, lease.leasedUntil),
        ),
      )
      .returning({ eventId: d.eventId });
    return rows.length > 0;
  }
}
