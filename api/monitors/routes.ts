import type { RouteHandler } from "@hono/zod-openapi";
import { sql } from "drizzle-orm";
import type { Context, MiddlewareHandler } from "hono";
import type { Address } from "../../config/addresses.ts";
import { ApiError } from "../../shared/errors.ts";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute, jsonBody, routeName } from "../http/declare.ts";
import { validatedInput, walletRequest } from "../http/payment.ts";
import { x402Billing } from "../payments/billing.ts";
import type { Claim } from "../payments/core.ts";
import { MONITOR_PERIOD_MS } from "../payments/prices.ts";
import type { OnOutcome } from "../payments/reconcile.ts";
import type { ServiceDb } from "../store/store.ts";
import {
  activeCount,
  deleteMonitor,
  eventsAfter,
  eventView,
  findMonitor,
  insertMonitors,
  monitorView,
  ownerMonitors,
  removeUnpaid,
  renewMonitor,
  undoRenewal,
} from "./monitors.ts";
import {
  createMonitorsRequestSchema,
  createMonitorsResultSchema,
  deletedSchema,
  EVENT_RETRACTED,
  endpointIdParams,
  endpointListSchema,
  endpointResultSchema,
  eventsQuerySchema,
  eventsResultSchema,
  MONITOR_EVENT_TYPES,
  monitorIdParams,
  monitorListSchema,
  monitorResultSchema,
  recoverRequestSchema,
  recoverResultSchema,
  renewResultSchema,
} from "./schema.ts";
import { MAX_ENDPOINTS_PER_OWNER } from "./settings.ts";
import {
  createEndpoint,
  getEndpoint,
  listEndpoints,
  recoverDeliveries,
  rotateSecret,
  type WebhookEndpointView,
} from "./webhooks/endpoints.ts";
import { checkEndpointUrl } from "./webhooks/ssrf.ts";

const TAGS = ["Monitors"];
const PERIOD_DAYS = MONITOR_PERIOD_MS / 86_400_000;
/** A rotated secret still signs deliveries this long, so receivers can switch over. */
const ROTATION_OVERLAP_MS = 24 * 3_600_000;
/** Serialises one owner's creations, so two at once cannot pass its limits together (with the owner's hashtext). */
const OWNER_LOCK = 42_022_009;

const storeOf = async (c: Context<AppEnv>): Promise<ServiceDb> => {
  const store = c.var.monitors?.store;
  if (!store) throw new Error("the monitor routes need the service store");
  return store;
};

const paymentRef = (claim: Claim) => `${claim.key.token}:${claim.key.payer}:${claim.key.nonce}`.toLowerCase();

const monitorNotFound = (id: string) =>
  new ApiError(404, "monitor_not_found", `No monitor ${id} of yours (deleted, or never created by this wallet).`);
const endpointNotFound = (id: string) => new ApiError(404, "endpoint_not_found", `No webhook endpoint ${id} of yours.`);

/** An endpoint as answered: with its secret only when just created or rotated (shown once). */
function endpointView(row: WebhookEndpointView, secret?: string) {
  return {
    id: row.id,
    url: row.url,
    createdAt: row.createdAt.toISOString(),
    disabled: row.disabledAt ? { at: row.disabledAt.toISOString(), reason: row.disabledReason } : null,
    ...(secret ? { secret } : {}),
  };
}

/** The endpoint if `owner` owns it. */
async function ownedEndpoint(db: ServiceDb, id: string, owner: Address) {
  const endpoint = await getEndpoint(db, id);
  if (!endpoint || endpoint.owner !== owner) throw endpointNotFound(id);
  return endpoint;
}

type CreateInput = {
  wallets: Address[];
  webhook?: { url: string } | { endpointId: string };
};

/** The owner's limits for this request: active monitors, and endpoints when it creates one. */
async function checkLimits(c: Context<AppEnv>, db: ServiceDb, owner: Address, input: CreateInput, now: Date) {
  const max = c.var.monitors.settings.maxWalletsPerOwner;
  const active = await activeCount(db, owner, now);
  if (active + input.wallets.length > max)
    throw new ApiError(
      409,
      "monitor_limit",
      `At most ${max} active monitors per owner: ${owner} has ${active}, and this request adds ${input.wallets.length}. Nothing was charged.`,
      { limit: max, active, requested: input.wallets.length },
    );
  if (input.webhook && "url" in input.webhook) {
    const endpoints = (await listEndpoints(db, owner)).length;
    if (endpoints >= MAX_ENDPOINTS_PER_OWNER)
      throw new ApiError(
        409,
        "monitor_limit",
        `At most ${MAX_ENDPOINTS_PER_OWNER} webhook endpoints per owner: reuse one (webhook.endpointId). Nothing was charged.`,
        { endpointLimit: MAX_ENDPOINTS_PER_OWNER, endpoints },
      );
  }
  if (input.webhook && "endpointId" in input.webhook) await ownedEndpoint(db, input.webhook.endpointId, owner);
}

/**
 * Before payment: a webhook URL the SSRF guard refuses is a 400; with callerAddress (the owner to
 * be), its limits and endpoint too. Without it the owner is the payer, known only once paid: the
 * handler checks then, and its refusal is not charged.
 */
const checkCreate: MiddlewareHandler<AppEnv> = async (c, next) => {
  const input = validatedInput(c) as CreateInput & { callerAddress?: Address };
  if (input.webhook && "url" in input.webhook) {
    const allowPrivate = c.var.monitors.settings.allowPrivateEndpoints;
    const check = await checkEndpointUrl(input.webhook.url, { allowPrivate });
    if (!check.ok)
      throw new ApiError(
        400,
        "webhook_url_refused",
        `The webhook URL is refused: ${check.reason}. Nothing was charged.`,
        {
          reason: check.reason,
          privateEndpointsAllowed: allowPrivate,
        },
      );
  }
  if (input.callerAddress) await checkLimits(c, await storeOf(c), input.callerAddress, input, new Date());
  await next();
};

/** What a handler did that must not stand if its payment is not settled (the adapter's onSettlementFailed). */
const undos = new WeakMap<Context, () => Promise<void>>();
const undoUnpaid = async (c: Context) => {
  await undos.get(c)?.();
};

export const createMonitorsRoute = declareRoute("monitor", {
  method: "post",
  path: "/api/monitors",
  tags: TAGS,
  summary: `Watch wallets: one monitor per wallet, 0.01 per wallet per ${PERIOD_DAYS} days`,
  description:
    `One monitor per wallet, each watching the chosen event types (default all: ${MONITOR_EVENT_TYPES.join(", ")}), paid until ${PERIOD_DAYS} days from now; ` +
    "the 402 names the price of this request (0.01 per wallet). The payer owns the monitors: reading, listing and deleting them is free to it, signed in with SIGN-IN-WITH-X. " +
    "Events are read from GET /api/monitors/events, and pushed to the webhook when one is given: `webhook.url` creates an endpoint (its `whsec_` secret is in this answer only), " +
    "`webhook.endpointId` reuses one of the owner's. A URL the SSRF guard refuses (loopback, private, link-local, unless the operator allows them) is a 400 before any payment. " +
    "Limits per owner: MONITOR_MAX_WALLETS_PER_OWNER active monitors (default 1000) and 10 endpoints; past them 409 monitor_limit, not charged " +
    "(checked before payment when callerAddress is given, else once the payer is known).",
  request: { body: jsonBody(createMonitorsRequestSchema, "The wallets, events, thresholds and webhook") },
  ok: createMonitorsResultSchema,
  errors: { 400: ["webhook_url_refused"], 404: ["endpoint_not_found"], 409: ["monitor_limit"] },
  middleware: [checkCreate],
  payment: {
    ...walletRequest,
    units: { name: "wallet", count: (input) => (input.wallets as unknown[]).length },
    // Monitors are a period of service, not an answer to give on credit.
    settleFirst: true,
    onSettlementFailed: undoUnpaid,
  },
});

export const createMonitorsHandler: RouteHandler<typeof createMonitorsRoute, AppEnv> = async (c) => {
  const input = c.req.valid("json");
  const { claim } = c.var;
  const billing = await c.var.billing;
  const owner = billing.payer;
  const db = await storeOf(c);
  const now = new Date();
  const paidUntil = new Date(now.getTime() + MONITOR_PERIOD_MS);
  const ref = paymentRef(claim);
  // Named in the ledger before the monitors exist: if the process dies before the payment is
  // settled (or, from credit, recorded), the reconciler removes them (removeUnpaidMonitors).
  await c.var.payments.reference(claim, ref);
  const { monitors, endpoint } = await db.transaction(async (t) => {
    const tx = t as unknown as ServiceDb;
    await tx.execute(sql`select pg_advisory_xact_lock(${OWNER_LOCK}, hashtext(${owner}))`);
    await checkLimits(c, tx, owner, input, now);
    const webhook = input.webhook;
    const endpoint = webhook && "url" in webhook ? await createEndpoint(tx, { owner, url: webhook.url }) : undefined;
    const monitors = await insertMonitors(tx, {
      owner,
      wallets: input.wallets,
      events: input.events ?? MONITOR_EVENT_TYPES,
      scoreBelow: input.thresholds?.scoreBelow,
      worseThan: input.thresholds?.recommendationWorseThan,
      endpointId: endpoint?.id ?? (webhook && "endpointId" in webhook ? webhook.endpointId : null),
      paidUntil,
      paymentRef: ref,
    });
    return { monitors, endpoint };
  });
  undos.set(c, () => removeUnpaid(db, ref, endpoint?.id));
  const existing = !endpoint && input.webhook && "endpointId" in input.webhook;
  const reused = existing ? await getEndpoint(db, (input.webhook as { endpointId: string }).endpointId) : undefined;
  return c.json(
    {
      monitors: monitors.map((m) => monitorView(m, now)),
      endpoint: endpoint ? endpointView(endpoint, endpoint.secret) : reused ? endpointView(reused) : null,
      paidUntil: paidUntil.toISOString(),
      x402Billing: x402Billing(billing),
    },
    200,
  );
};

/**
 * The payment reconciler's hook (PaymentDeps.onOutcome): monitors created by a call whose payment
 * turned out unpaid after its request died (the chain says not settled, or a credit hold was
 * abandoned) never stood: they are removed, as the call's own undo would have.
 */
export function removeUnpaidMonitors(store: Promise<ServiceDb>): OnOutcome {
  const name = routeName(createMonitorsRoute);
  return async (row, outcome) => {
    if (outcome.status === "settled" || row.route !== name || !row.reference) return;
    await removeUnpaid(await store, row.reference);
  };
}

/** Before payment: only an existing monitor can be renewed. */
const monitorExists: MiddlewareHandler<AppEnv> = async (c, next) => {
  const { id } = validatedInput(c) as { id: string };
  if (!(await findMonitor(await storeOf(c), id))) throw monitorNotFound(id);
  await next();
};

export const renewMonitorRoute = declareRoute("monitorRenew", {
  method: "post",
  path: "/api/monitors/{id}/renew",
  tags: TAGS,
  summary: `${PERIOD_DAYS} more days of one monitor, 0.01`,
  description:
    `paidUntil becomes ${PERIOD_DAYS} days after the later of now and the current paidUntil (an expired monitor resumes). ` +
    "Anyone may pay to renew a monitor; its owner stays the wallet that created it. An unknown or deleted monitor is a 404 before any payment.",
  request: { params: monitorIdParams },
  ok: renewResultSchema,
  errors: { 400: ["invalid_request"], 404: ["monitor_not_found"] },
  middleware: [monitorExists],
  payment: { ...walletRequest, settleFirst: true, onSettlementFailed: undoUnpaid },
});

export const renewMonitorHandler: RouteHandler<typeof renewMonitorRoute, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const db = await storeOf(c);
  const now = new Date();
  const ref = paymentRef(c.var.claim);
  const renewed = await renewMonitor(db, id, ref, now);
  if (!renewed) throw monitorNotFound(id);
  undos.set(c, () => undoRenewal(db, id, ref, renewed.previous));
  return c.json(
    {
      monitor: monitorView(renewed.row, now),
      previousPaidUntil: renewed.previous.paidUntil.toISOString(),
      paidUntil: renewed.row.paidUntil.toISOString(),
      x402Billing: x402Billing(await c.var.billing),
    },
    200,
  );
};

export const listMonitorsRoute = declareRoute("monitorList", {
  method: "get",
  path: "/api/monitors",
  tags: TAGS,
  summary: "Your monitors (signed in)",
  description:
    "The signed-in wallet's monitors not deleted, newest first: status (active, or expired once paidUntil passed), what the last screen said, the endpoint. Free; SIGN-IN-WITH-X required.",
  ok: monitorListSchema,
  owner: true,
});

export const listMonitorsHandler: RouteHandler<typeof listMonitorsRoute, AppEnv> = async (c) => {
  const now = new Date();
  const rows = await ownerMonitors(await storeOf(c), c.var.owner);
  return c.json({ monitors: rows.map((m) => monitorView(m, now)) }, 200);
};

export const monitorEventsRoute = declareRoute("monitorEvents", {
  method: "get",
  path: "/api/monitors/events",
  tags: TAGS,
  summary: "Your monitors' events, in order (signed in)",
  description: `The signed-in wallet's events after the cursor \`since\` (the \`next\` of the previous page), oldest first, at most \`limit\` (1 to 500, default 100). Types: ${MONITOR_EVENT_TYPES.join(", ")}, and ${EVENT_RETRACTED} (a reorg removed the block of the event it \`retracts\`). Free; SIGN-IN-WITH-X required.`,
  request: { query: eventsQuerySchema },
  ok: eventsResultSchema,
  errors: { 400: ["invalid_request"] },
  owner: true,
});

export const monitorEventsHandler: RouteHandler<typeof monitorEventsRoute, AppEnv> = async (c) => {
  const { since, limit } = c.req.valid("query");
  const rows = await eventsAfter(await storeOf(c), c.var.owner, Number(since ?? 0), limit);
  const last = rows.at(-1);
  return c.json({ events: rows.map(eventView), next: last ? String(last.seq) : null }, 200);
};

export const listEndpointsRoute = declareRoute("monitorEndpoints", {
  method: "get",
  path: "/api/monitors/endpoints",
  tags: TAGS,
  summary: "Your webhook endpoints (signed in)",
  description:
    "The signed-in wallet's webhook endpoints, without their secrets (shown once). Free; SIGN-IN-WITH-X required.",
  ok: endpointListSchema,
  owner: true,
});

export const listEndpointsHandler: RouteHandler<typeof listEndpointsRoute, AppEnv> = async (c) => {
  const rows = await listEndpoints(await storeOf(c), c.var.owner);
  return c.json({ endpoints: rows.map((e) => endpointView(e)) }, 200);
};

export const rotateEndpointRoute = declareRoute("monitorEndpointRotate", {
  method: "post",
  path: "/api/monitors/endpoints/{id}/rotate",
  tags: TAGS,
  summary: "A new webhook secret (signed in)",
  description:
    "A new whsec_ secret for one of your endpoints, in this answer only; the previous one still signs deliveries for 24 hours. Free; SIGN-IN-WITH-X required.",
  request: { params: endpointIdParams },
  ok: endpointResultSchema,
  errors: { 400: ["invalid_request"], 404: ["endpoint_not_found"] },
  owner: true,
});

export const rotateEndpointHandler: RouteHandler<typeof rotateEndpointRoute, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const db = await storeOf(c);
  const endpoint = await ownedEndpoint(db, id, c.var.owner);
  const secret = await rotateSecret(db, id, c.var.owner, ROTATION_OVERLAP_MS);
  if (!secret) throw endpointNotFound(id);
  return c.json({ endpoint: endpointView(endpoint, secret) }, 200);
};

export const recoverEndpointRoute = declareRoute("monitorEndpointRecover", {
  method: "post",
  path: "/api/monitors/endpoints/{id}/recover",
  tags: TAGS,
  summary: "Re-send what an endpoint missed (signed in)",
  description:
    "Queues again the deliveries to one of your endpoints of events created between `since` and `until` (ISO times), whatever became of them. Free; SIGN-IN-WITH-X required.",
  request: { params: endpointIdParams, body: jsonBody(recoverRequestSchema, "The time range") },
  ok: recoverResultSchema,
  errors: { 404: ["endpoint_not_found"] },
  owner: true,
});

export const recoverEndpointHandler: RouteHandler<typeof recoverEndpointRoute, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const { since, until } = c.req.valid("json");
  const db = await storeOf(c);
  await ownedEndpoint(db, id, c.var.owner);
  const requeued = await recoverDeliveries(db, id, { since: new Date(since), until: new Date(until) });
  return c.json({ endpointId: id, requeued }, 200);
};

export const readMonitorRoute = declareRoute("monitorRead", {
  method: "get",
  path: "/api/monitors/{id}",
  tags: TAGS,
  summary: "One of your monitors (signed in)",
  description:
    "A monitor of the signed-in wallet; another wallet's is a 404, as an unknown one. Free; SIGN-IN-WITH-X required.",
  request: { params: monitorIdParams },
  ok: monitorResultSchema,
  errors: { 400: ["invalid_request"], 404: ["monitor_not_found"] },
  owner: true,
});

export const readMonitorHandler: RouteHandler<typeof readMonitorRoute, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const row = await findMonitor(await storeOf(c), id, c.var.owner);
  if (!row) throw monitorNotFound(id);
  return c.json({ monitor: monitorView(row, new Date()) }, 200);
};

export const deleteMonitorRoute = declareRoute("monitorDelete", {
  method: "delete",
  path: "/api/monitors/{id}",
  tags: TAGS,
  summary: "Stop one of your monitors (signed in)",
  description:
    "Deletes a monitor of the signed-in wallet: it is no longer screened nor listed (its events stay in the feed). Nothing is refunded. Free; SIGN-IN-WITH-X required.",
  request: { params: monitorIdParams },
  ok: deletedSchema,
  errors: { 400: ["invalid_request"], 404: ["monitor_not_found"] },
  owner: true,
});

export const deleteMonitorHandler: RouteHandler<typeof deleteMonitorRoute, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  if (!(await deleteMonitor(await storeOf(c), id, c.var.owner, new Date()))) throw monitorNotFound(id);
  return c.json({ id, deleted: true as const }, 200);
};
