import { z } from "zod";
import { addressSchema, addressString } from "../../config/addresses.ts";
import { x402BillingSchema } from "../payments/billing.ts";

/**
 * What a monitor can watch, one event type each (the watcher emits them; a monitor names those it
 * wants). The one list: the request schema, the docs and the watcher read it.
 */
export const MONITOR_EVENT_TYPES = [
  "screen.recommendation_changed",
  "score.threshold_crossed",
  "drain.detected",
  "income.dropped",
  "passport.revoked",
  "passport.expired",
  "sanctions.listed",
  "sanctions.delisted",
  "counterparty.sanctioned",
] as const;
export type MonitorEventType = (typeof MONITOR_EVENT_TYPES)[number];

/** Emitted by the system, never chosen: a reorg removed the block of the event it `retracts`. */
export const EVENT_RETRACTED = "event.retracted";

/** Most wallets in one POST /api/monitors: 100 x 0.01 is the 1.00 USD a single authorization may carry. */
const MAX_WALLETS_PER_REQUEST = 100;

const distinct = <T>(values: readonly T[], ctx: z.RefinementCtx, what: string) => {
  const first = new Map<T, number>();
  values.forEach((value, i) => {
    const j = first.get(value);
    if (j === undefined) first.set(value, i);
    else ctx.addIssue({ code: "custom", path: [i], message: `the same ${what} as ${j}` });
  });
};

const thresholdsSchema = z
  .object({
    scoreBelow: z
      .number()
      .int()
      .min(0)
      .max(100)
      .optional()
      .describe("score.threshold_crossed: when the reputation score goes below this"),
    recommendationWorseThan: z
      .enum(["approve", "review"])
      .optional()
      .describe(
        "screen.recommendation_changed only when the new recommendation is worse than this (approve < review < decline)",
      ),
  })
  .strict();

const webhookSchema = z.union([
  z.object({ url: z.string().max(2048).describe("A new endpoint: its whsec_ secret is answered once, now") }).strict(),
  z.object({ endpointId: z.string().min(1).max(64).describe("One of your endpoints") }).strict(),
]);

export const createMonitorsRequestSchema = z.object({
  wallets: z
    .array(addressSchema)
    .min(1)
    .max(MAX_WALLETS_PER_REQUEST)
    .superRefine((wallets, ctx) => distinct(wallets, ctx, "wallet"))
    .describe(`The wallets to watch, 1 to ${MAX_WALLETS_PER_REQUEST}, each once; one monitor each, each paid for`),
  events: z
    .array(z.enum(MONITOR_EVENT_TYPES))
    .min(1)
    .superRefine((events, ctx) => distinct(events, ctx, "event"))
    .optional()
    .describe("The event types to watch; default all"),
  thresholds: thresholdsSchema.optional(),
  webhook: webhookSchema
    .optional()
    .describe("Where events are pushed: a new endpoint's URL, or an endpoint of yours; none: pull only"),
  callerAddress: addressSchema
    .optional()
    .describe(
      "The paying wallet, the monitors' owner: when given it must be the payer, and limits are checked before payment",
    ),
});

export const monitorIdParams = z.object({
  id: z.string().min(1).max(64).describe("A monitor id (mon_…)"),
});

export const endpointIdParams = z.object({
  id: z.string().min(1).max(64).describe("A webhook endpoint id"),
});

export const monitorSchema = z.object({
  id: z.string(),
  wallet: addressString,
  events: z.array(z.string()),
  thresholds: z.object({ scoreBelow: z.number().nullable(), recommendationWorseThan: z.string().nullable() }),
  endpointId: z.string().nullable(),
  status: z.enum(["active", "expired"]).describe("active while paidUntil is ahead; expired monitors are not screened"),
  paidUntil: z.string(),
  createdAt: z.string(),
  lastScreened: z
    .object({
      at: z.string().nullable(),
      block: z.string().nullable(),
      values: z.record(z.string(), z.unknown()).nullable(),
    })
    .describe("What the last screen said (null values until the watcher screened it)"),
});

const endpointSchema = z.object({
  id: z.string(),
  url: z.string(),
  createdAt: z.string(),
  disabled: z.object({ at: z.string(), reason: z.string().nullable() }).nullable(),
  secret: z
    .string()
    .optional()
    .describe("whsec_…: answered once, when the endpoint is created or its secret rotated; keep it"),
});

export const createMonitorsResultSchema = z.object({
  monitors: z.array(monitorSchema),
  endpoint: endpointSchema.nullable(),
  paidUntil: z.string(),
  x402Billing: x402BillingSchema,
});

export const renewResultSchema = z.object({
  monitor: monitorSchema,
  previousPaidUntil: z.string(),
  paidUntil: z.string(),
  x402Billing: x402BillingSchema,
});

export const monitorListSchema = z.object({ monitors: z.array(monitorSchema) });
export const monitorResultSchema = z.object({ monitor: monitorSchema });
export const deletedSchema = z.object({ id: z.string(), deleted: z.literal(true) });
export const endpointListSchema = z.object({ endpoints: z.array(endpointSchema) });
export const endpointResultSchema = z.object({ endpoint: endpointSchema });

export const recoverRequestSchema = z
  .object({
    since: z.iso.datetime({ offset: true }).describe("ISO time: re-send events created from this time…"),
    until: z.iso.datetime({ offset: true }).describe("…until this one"),
  })
  .refine((r) => Date.parse(r.since) <= Date.parse(r.until), {
    message: "since must not be after until",
    path: ["since"],
  });

export const recoverResultSchema = z.object({
  endpointId: z.string(),
  requeued: z.number().int().describe("Deliveries queued again"),
});

/** Feed cursors are the events' sequence numbers, as text. */
export const eventsQuerySchema = z.object({
  since: z
    .string()
    .regex(/^\d{1,10}$/, "a cursor: the `next` of a previous page")
    .optional()
    .describe("The `next` of the previous page; none: from the start"),
  limit: z.coerce.number().int().min(1).max(500).default(100).describe("Events per page, 1 to 500 (default 100)"),
});

export const monitorEventSchema = z.object({
  id: z.string(),
  type: z.string().describe(`One of ${MONITOR_EVENT_TYPES.join(", ")}, or ${EVENT_RETRACTED}`),
  monitorId: z.string(),
  wallet: addressString,
  before: z.unknown(),
  after: z.unknown(),
  block: z.string(),
  blockHash: z.string(),
  modelVersion: z.string(),
  retracts: z.string().nullable(),
  createdAt: z.string(),
});

export const eventsResultSchema = z.object({
  events: z.array(monitorEventSchema),
  next: z
    .string()
    .nullable()
    .describe(
      "The cursor after this page's last event: pass it as since to read on. null when this page is empty (nothing after since yet: keep your cursor)",
    ),
});
