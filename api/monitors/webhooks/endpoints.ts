import { randomBytes } from "node:crypto";
import { and, asc, eq, getTableColumns, sql } from "drizzle-orm";
import { webhookEndpoint } from "../../store/schema.ts";
import type { ServiceDb } from "../../store/store.ts";
import { newEndpointSecret } from "./secret.ts";

export type WebhookEndpointRow = typeof webhookEndpoint.$inferSelect;
/** An endpoint as its owner sees it after creation: everything but the secrets. */
export type WebhookEndpointView = Omit<WebhookEndpointRow, "secret" | "previousSecret">;

const { secret: _secret, previousSecret: _previousSecret, ...publicColumns } = getTableColumns(webhookEndpoint);

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Registers an endpoint for `owner` (a wallet, lowercased) with a new secret. The row returned
 * carries the secret: the caller shows it once. The URL is the caller's to check first
 * (checkEndpointUrl in ./ssrf.ts); the worker checks it again before each send.
 */
export async function createEndpoint(
  db: ServiceDb,
  input: { owner: string; url: string },
): Promise<WebhookEndpointRow> {
  const [row] = await db
    .insert(webhookEndpoint)
    .values({
      id: `whep_${randomBytes(12).toString("base64url")}`,
      owner: input.owner.toLowerCase(),
      url: input.url,
      secret: newEndpointSecret(),
    })
    .returning();
  return row!;
}

/**
 * Gives the endpoint a new secret, returned to be shown once. The one it replaces keeps signing
 * beside it for `overlapMs` (messages then carry both signatures), so that the receiver can switch
 * without refusing a message. Null when `owner` has no such endpoint.
 */
export async function rotateSecret(
  db: ServiceDb,
  id: string,
  owner: string,
  overlapMs = DAY_MS,
): Promise<string | null> {
  const secret = newEndpointSecret();
  const rows = await db
    .update(webhookEndpoint)
    .set({
      secret,
      // The right-hand sides read the row before the update: the previous secret is the current one.
      previousSecret: sql`${webhookEndpoint.secret}`,
      previousUntil: new Date(Date.now() + overlapMs),
    })
    .where(and(eq(webhookEndpoint.id, id), eq(webhookEndpoint.owner, owner.toLowerCase())))
    .returning({ id: webhookEndpoint.id });
  return rows.length ? secret : null;
}

/** The owner's endpoints, oldest first, without their secrets. */
export function listEndpoints(db: ServiceDb, owner: string): Promise<WebhookEndpointView[]> {
  return db
    .select(publicColumns)
    .from(webhookEndpoint)
    .where(eq(webhookEndpoint.owner, owner.toLowerCase()))
    .orderBy(asc(webhookEndpoint.createdAt), asc(webhookEndpoint.id));
}

/** One endpoint without its secrets (the caller checks `owner`), or undefined. */
export async function getEndpoint(db: ServiceDb, id: string): Promise<WebhookEndpointView | undefined> {
  const [row] = await db.select(publicColumns).from(webhookEndpoint).where(eq(webhookEndpoint.id, id));
  return row;
}

/**
 * Sends again what an endpoint missed: every event of the monitors pushing to it (monitor.endpoint_id)
 * created in [since, until) gets its delivery back to pending, due now with a fresh schedule, or
 * a delivery when it had none. A row a worker is sending loses its lease (its result is not
 * recorded) and is sent again. Returns how many deliveries were queued.
 */
export async function recoverDeliveries(
  db: ServiceDb,
  endpointId: string,
  range: { since: Date; until: Date },
): Promise<number> {
  const result = await db.execute(sql`
    insert into service.webhook_delivery as d (event_id, endpoint_id, status, attempts, next_attempt_at)
    select e.id, m.endpoint_id, 'pending', 0, now()
    from service.monitor_event e join service.monitor m on m.id = e.monitor_id
    where m.endpoint_id = ${endpointId}
      and e.created_at >= ${range.since.toISOString()} and e.created_at < ${range.until.toISOString()}
    on conflict (event_id, endpoint_id) do update set
      status = 'pending', attempts = 0, next_attempt_at = excluded.next_attempt_at, leased_until = null,
      last_status = null, last_error = null, delivered_at = null
    returning d.event_id`);
  return (result as unknown as { rows: unknown[] }).rows.length;
}
