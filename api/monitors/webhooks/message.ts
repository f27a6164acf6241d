import { Webhook } from "standardwebhooks";
import type { monitorEvent, webhookEndpoint } from "../../store/schema.ts";

type MonitorEventRow = typeof monitorEvent.$inferSelect;
type EndpointSecrets = Pick<typeof webhookEndpoint.$inferSelect, "secret" | "previousSecret" | "previousUntil">;

export type WebhookMessage = { body: string; headers: Record<string, string> };

const USER_AGENT = "celo-wallet-reputation-webhooks/1";

/**
 * The Standard Webhooks message for one monitor event, as sent at `sentAt`. The body is the same
 * at every attempt; `webhook-id` is the event's id, so a receiver drops a message it already had
 * (delivery is at least once). The signature covers id, send time and body; during a rotation
 * (until `previousUntil`) the previous secret signs too, and the header carries both.
 */
export function webhookMessage(event: MonitorEventRow, endpoint: EndpointSecrets, sentAt: Date): WebhookMessage {
  const body = JSON.stringify({
    type: event.type,
    timestamp: event.createdAt.toISOString(),
    data: {
      id: event.id,
      monitorId: event.monitorId,
      wallet: event.wallet,
      before: event.before ?? null,
      after: event.after ?? null,
      block: Number(event.block),
      blockHash: event.blockHash,
      modelVersion: event.modelVersion,
      retracts: event.retracts,
    },
  });
  const secrets = [endpoint.secret];
  if (endpoint.previousSecret && endpoint.previousUntil && endpoint.previousUntil > sentAt)
    secrets.push(endpoint.previousSecret);
  const signatures = secrets.map((secret) => new Webhook(secret).sign(event.id, sentAt, body));
  return {
    body,
    headers: {
      "content-type": "application/json",
      "user-agent": USER_AGENT,
      "webhook-id": event.id,
      "webhook-timestamp": String(Math.floor(sentAt.getTime() / 1000)),
      "webhook-signature": signatures.join(" "),
    },
  };
}
