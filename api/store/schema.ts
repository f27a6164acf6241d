import { sql } from "drizzle-orm";
import {
  boolean,
  check,
  customType,
  index,
  integer,
  jsonb,
  numeric,
  pgSchema,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} from "drizzle-orm/pg-core";

/**
 * The service store: what the API itself writes (never Ponder's tables, which are read-only to
 * the API). One Postgres schema of its own, or a PGlite directory of its own.
 *
 * This file is the source of the store's DDL: `npm run db:generate` (drizzle-kit) writes the
 * migrations in ./migrations from it, and store.ts applies them at open. Change a table here,
 * generate, commit the SQL; a test fails when the committed migrations lag behind this file.
 * Constraint names are spelled out so that they match the stores created before migrations.
 */
export const SERVICE_SCHEMA = "service";
// Not exported on purpose: drizzle-kit would then emit CREATE SCHEMA, which fails because the
// migrator creates the schema first (its journal lives there, see store.ts).
const service = pgSchema(SERVICE_SCHEMA);

/**
 * pending: claimed, the handler runs. queued (deferred settlement): answered, waiting for the
 * settlement worker. settling: a settlement was submitted (its transaction hash,
 * when known, is recorded before waiting for it), outcome not yet known. settled: the money moved.
 * failed: nothing was charged (the authorization is unspent). waived: a free read (answered
 * without charge, the authorization never submitted). expired: the authorization expired unused
 * (never charged). used_elsewhere: the nonce was used or cancelled on chain without paying the
 * treasury (not our charge). The moves between them: api/payments/lifecycle.ts.
 */
export const PAYMENT_STATUSES = [
  "pending",
  "queued",
  "settling",
  "settled",
  "failed",
  "waived",
  "expired",
  "used_elsewhere",
] as const;
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number];

/**
 * The payment ledger: one row per EIP-3009 authorization presented with a valid signature.
 * The primary key (token, payer, nonce) is what makes a payment single-use across API replicas.
 */
/**
 * Rows still open: claimed and not settled, or failed (a failed deferred answer is a debt until
 * repaid). SQL text, not parameters: a query must name the same literal list for the planner to
 * use the partial indexes below.
 */
export const OPEN_STATUSES = "'pending', 'queued', 'settling', 'failed', 'used_elsewhere'";
/** Rows read by their age (a claim or a settlement that stalled: the reconciler, /health): all that payment_status_updated holds. */
export const AGED_STATUSES = ["pending", "settling"] as const satisfies readonly PaymentStatus[];
/** The partial index payment_open_deferred's predicate: deferred rows open or possibly a debt (the exposure caps read them). */
export const OPEN_DEFERRED_ROWS = `deferred and repaid_by is null and status in (${OPEN_STATUSES})`;

export const payment = service.table(
  "payment",
  {
    token: text("token").notNull(),
    payer: text("payer").notNull(),
    nonce: text("nonce").notNull(),
    /** Smallest token units authorized (and, once settled, transferred). */
    amount: numeric("amount", { precision: 78, scale: 0 }).notNull(),
    /** The priced route, e.g. "POST /api/lender/screen". */
    route: text("route").notNull(),
    /** The wallet the paid call was about. */
    subject: text("subject"),
    /** sha256 of the validated request: a retry must match it to get the stored answer. */
    fingerprint: text("fingerprint").notNull(),
    /** sha256 of the signature: proof of possession for a retry, without keeping the signature. */
    signatureHash: text("signature_hash").notNull(),
    encoding: text("encoding").notNull(),
    status: text("status").$type<PaymentStatus>().notNull(),
    failure: text("failure"),
    transaction: text("transaction"),
    responseStatus: integer("response_status"),
    responseType: text("response_type"),
    responseBody: text("response_body"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
    settledAt: timestamp("settled_at", { withTimezone: true }),
    // Added by migration 0001 (settlement record): declared last, as ALTER TABLE appends them.
    /** The authorization's validBefore (unix seconds): after it, an unused authorization can never be charged. */
    validBefore: numeric("valid_before", { precision: 78, scale: 0 }),
    /** Self-settlement: the relayer that signed `transaction` and its account nonce (the signed transaction: settlement_transaction). */
    settler: text("settler"),
    settlerNonce: integer("settler_nonce"),
    /** Set when the outcome was decided by reconciliation with the chain rather than by the request that settled it. */
    reconciledAt: timestamp("reconciled_at", { withTimezone: true }),
    // Added by migration 0004 (deferred settlement).
    /** The answer was given before settlement (X402_SETTLEMENT=deferred): a failure here is the payer's debt. */
    deferred: boolean("deferred").notNull().default(false),
    /** The authorization's signature and validAfter, kept only until a deferred row is settled (they are what the worker submits). */
    signature: text("signature"),
    validAfter: numeric("valid_after", { precision: 78, scale: 0 }),
    /** Settlement attempts by the worker (a row is retried a few times before it counts as failed). */
    attempts: integer("attempts").notNull().default(0),
    /** The x402 payment-identifier the client sent: the same id on the same request gets the same answer. */
    paymentId: text("payment_id"),
    /** A failed deferred row (a debt) was paid again by the payment with this nonce. */
    repaidBy: text("repaid_by"),
    /**
     * What the paid call made that must be undone if its payment fails, recorded before it is made:
     * the report's REP- id, written before publishing, so that a crash before the answer is stored
     * still leaves the reconciler the passport to revoke.
     */
    reference: text("reference"),
  },
  (t) => [
    primaryKey({ name: "payment_pkey", columns: [t.token, t.payer, t.nonce] }),
    // A payer's settled calls about a subject (free reads after a paid one). Settled rows only:
    // a row is rewritten four times before it settles, and each rewrite adds an entry to every
    // index it is in (none is HOT: status is indexed). The open ones are read by payment_open_payer.
    index("payment_payer_subject").on(t.payer, t.subject, t.settledAt).where(sql.raw("status = 'settled'")),
    // One payment-identifier per payer: the id names one paid request, however many times it is sent.
    uniqueIndex("payment_payer_id").on(t.payer, t.paymentId).where(sql.raw("payment_id is not null")),
    // Read on every paid call: the open rows (claimed, not settled; or failed), a payer's and, when
    // deferred, all of them (the exposure caps). Settled rows leave these indexes, so the reads
    // stay as small as what is open, however long the ledger grows.
    index("payment_open_payer")
      .on(t.payer, t.token)
      .where(sql.raw(`status in (${OPEN_STATUSES})`)),
    index("payment_open_deferred").on(t.payer).where(sql.raw(OPEN_DEFERRED_ROWS)),
    // The rows whose age matters (a claim or a settlement that stalled: the reconciler, /health).
    // Not every status: the exposure sums could then be planned as a bitmap scan of this index,
    // which reads every dead entry the rewrites leave (see OPEN_EXPOSURE).
    index("payment_status_updated")
      .on(t.status, t.updatedAt)
      .where(sql.raw(`status in (${AGED_STATUSES.map((s) => `'${s}'`).join(", ")})`)),
    // The settlement queue in the order the worker takes it (soonest validBefore first) and expires
    // it: a take reads the batch it takes, not every queued row (a backlog after an outage).
    index("payment_queued_valid_before").on(t.validBefore).where(sql.raw("status = 'queued'")),
    check("payment_status_check", sql.raw(`${t.status.name} in (${PAYMENT_STATUSES.map((s) => `'${s}'`).join(", ")})`)),
  ],
);

/**
 * The deferred exposure in all (the payments OPEN_EXPOSURE selects, their amounts summed), kept by
 * triggers on `payment` that every write of it fires (migration 0020), so that the total cap reads
 * these rows instead of summing every open payment on each queued answer. Spread over
 * EXPOSURE_SLOTS rows (a write moves the one of its connection's backend), so that concurrent
 * writers, any replicas, do not queue on one row's lock through their commits. A row moves only
 * when a payment enters or leaves the exposure (a deferred claim, its settlement, a refusal, a
 * repayment): a queued answer reads them and writes none.
 */
export const EXPOSURE_SLOTS = 16;
export const paymentExposure = service.table(
  "payment_exposure",
  {
    slot: integer("slot").primaryKey(),
    amount: numeric("amount", { precision: 78, scale: 0 }).notNull(),
  },
  (t) => [check("payment_exposure_slot", sql.raw(`${t.slot.name} >= 0 and ${t.slot.name} < ${EXPOSURE_SLOTS}`))],
);

/**
 * Self-settlement: each transaction the relayer signed, recorded before it is sent, so that it can
 * be sent again if dropped. One row per transaction, however many payments it settles (they name
 * it in `payment.transaction`).
 */
export const settlementTransaction = service.table("settlement_transaction", {
  transaction: text("transaction").primaryKey(),
  /** The relayer that signed it, and its account nonce. */
  settler: text("settler").notNull(),
  settlerNonce: integer("settler_nonce").notNull(),
  /** The signed transaction, as sent. */
  rawTransaction: text("raw_transaction").notNull(),
  createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
});

export type PaymentRow = typeof payment.$inferSelect;

/**
 * Sign-in-with-x nonces that granted something (api/payments/sign-in.ts): one use per proof across
 * every replica. A row is kept until its proof would be refused as too old anyway.
 */
export const signInNonce = service.table(
  "sign_in_nonce",
  {
    nonce: text("nonce").primaryKey(),
    wallet: text("wallet").notNull(),
    expiresAt: timestamp("expires_at", { withTimezone: true }).notNull(),
  },
  (t) => [index("sign_in_nonce_expires").on(t.expiresAt)],
);

/**
 * Chat conversations (POST /api/agent/chat): what a follow-up needs, the wallets being discussed
 * and the last question's intent and period. A conversation belongs to the payer that opened it and
 * lives CONVERSATION_LIFETIME_MS (api/chat/conversations.ts) after its last use; expired rows are
 * ignored and pruned.
 */
export const chatConversation = service.table(
  "chat_conversation",
  {
    id: text("id").primaryKey(),
    payer: text("payer").notNull(),
    /** The wallets under discussion, lowercase 0x addresses, the subject first. */
    wallets: jsonb("wallets").$type<string[]>().notNull(),
    intent: text("intent"),
    /** The last period asked about (api/chat/period.ts `Period`), or null. */
    period: jsonb("period").$type<Record<string, unknown> | null>(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp("expires_at", { withTimezone: true }).notNull(),
  },
  (t) => [index("chat_conversation_expires").on(t.expiresAt)],
);

/**
 * What each pinned CID is (GET /ipfs/{cid} answers with this media type): recorded when the
 * service pins content it made. Content pinned without a row is served by sniffing its bytes.
 */
export const ipfsContent = service.table("ipfs_content", {
  cid: text("cid").primaryKey(),
  mediaType: text("media_type").notNull(),
  size: integer("size").notNull(),
  createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
});

/** Postgres bytea (drizzle 0.41 has no column type of its own for it): node-postgres reads it as a Buffer. */
const bytea = customType<{ data: Uint8Array; driverData: Buffer }>({
  dataType: () => "bytea",
  toDriver: (value) => Buffer.from(value.buffer, value.byteOffset, value.byteLength),
});

/**
 * The IPFS blocks of what the service pinned (passport documents, statements) when the store is
 * Postgres: one blockstore every replica reads and writes (api/ipfs/postgres-blockstore.ts). On
 * PGlite (one process) blocks stay on disk in IPFS_DIR.
 *
 * Keyed by multihash, as Helia keys blocks, spelled as a CIDv1 of the raw codec: for content under
 * 1 MiB (one raw block) that is the content's own CID. `pinned` marks the root of content the service
 * added and pinned (written in the same statement as its blocks); the other rows are blocks of a
 * larger file. Nothing unpins and nothing collects garbage, so the pinned set is these rows.
 */
export const ipfsBlock = service.table(
  "ipfs_block",
  {
    cid: text("cid").primaryKey(),
    bytes: bytea("bytes").notNull(),
    pinned: boolean("pinned").notNull().default(false),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  // Health counts the pinned roots on every call: from this index, not the blocks' heap.
  (t) => [index("ipfs_block_pinned").on(t.cid).where(sql.raw("pinned"))],
);

/**
 * Statements made (POST /api/agent/statement): the wallet's `statement` signal reads its latest.
 * The PDF's CID names wallet, period and data, so the same statement made again updates its row.
 */
export const statement = service.table(
  "statement",
  {
    cid: text("cid").primaryKey(),
    csvCid: text("csv_cid").notNull(),
    wallet: text("wallet").notNull(),
    period: text("period").notNull(),
    /** The period, unix seconds, both included. */
    fromAt: timestamp("from_at", { withTimezone: true }).notNull(),
    toAt: timestamp("to_at", { withTimezone: true }).notNull(),
    block: numeric("block", { precision: 78, scale: 0 }).notNull(),
    transfers: integer("transfers").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("statement_wallet_created").on(t.wallet, t.createdAt)],
);

export type StatementRecord = typeof statement.$inferSelect;

/**
 * The chain this store's payments were made on, as a block of it: the devnet launcher records the
 * head at each start and keeps the store only while that block is still on the chain. A hash
 * chains the whole history before it, and a head tells fresh devnets apart: their genesis and
 * deployment blocks are the same (fixed timestamps, same deployer), their seeded head is not.
 */
export const chainAnchor = service.table("chain_anchor", {
  chainId: integer("chain_id").primaryKey(),
  blockNumber: numeric("block_number", { precision: 78, scale: 0 }).notNull(),
  blockHash: text("block_hash").notNull(),
  recordedAt: timestamp("recorded_at", { withTimezone: true }).notNull().defaultNow(),
});

/**
 * The settings each indexed schema was built with (live Celo): the launcher refuses to resume a
 * schema whose settings changed (scripts/indexed-settings.ts). Keyed by the schema's name.
 */
export const indexSettings = service.table("index_settings", {
  schema: text("schema").primaryKey(),
  /** Setting name (as the operator sets it) → its value, or a hash of it. */
  settings: jsonb("settings").$type<Record<string, string>>().notNull(),
  recordedAt: timestamp("recorded_at", { withTimezone: true }).notNull().defaultNow(),
});

/**
 * Webhook endpoints (Standard Webhooks) where a lender's monitor events are delivered. The secret
 * (`whsec_…`) is shown once, at creation and at each rotation; during a rotation the previous one
 * signs too, until `previous_until`, so a receiver can switch without missing a message. An endpoint
 * that answered 410 Gone is disabled (`disabled_at`, `disabled_reason`) and gets nothing more.
 */
export const webhookEndpoint = service.table(
  "webhook_endpoint",
  {
    id: text("id").primaryKey(),
    /** The wallet that owns it (lowercase 0x): the payer of the monitor it was created with. */
    owner: text("owner").notNull(),
    url: text("url").notNull(),
    secret: text("secret").notNull(),
    previousSecret: text("previous_secret"),
    previousUntil: timestamp("previous_until", { withTimezone: true }),
    disabledAt: timestamp("disabled_at", { withTimezone: true }),
    disabledReason: text("disabled_reason"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("webhook_endpoint_owner").on(t.owner)],
);

/**
 * Monitors: one row per watched wallet of a lender, paid until `paid_until` (x402, per wallet per
 * period). `snapshot` is what the last screen said (api/monitors/snapshot.ts): the next screen's
 * events are the differences from it that the monitor watches.
 */
export const monitor = service.table(
  "monitor",
  {
    id: text("id").primaryKey(),
    owner: text("owner").notNull(),
    wallet: text("wallet").notNull(),
    /** Where its events are pushed; null: pull only (GET /api/monitors/events). */
    endpointId: text("endpoint_id"),
    /** The event types it watches. */
    events: jsonb("events").$type<string[]>().notNull(),
    /** score.threshold_crossed: when the reputation score goes below this. */
    scoreBelow: integer("score_below"),
    /** screen.recommendation_changed only when the recommendation becomes worse than this. */
    worseThan: text("worse_than"),
    paidUntil: timestamp("paid_until", { withTimezone: true }).notNull(),
    /** The ledger row of the payment that created or last renewed it: `token:payer:nonce`. */
    paymentRef: text("payment_ref").notNull(),
    snapshot: jsonb("snapshot").$type<Record<string, unknown> | null>(),
    snapshotBlock: numeric("snapshot_block", { precision: 78, scale: 0 }),
    screenedAt: timestamp("screened_at", { withTimezone: true }),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    deletedAt: timestamp("deleted_at", { withTimezone: true }),
  },
  (t) => [index("monitor_wallet").on(t.wallet), index("monitor_owner").on(t.owner, t.createdAt)],
);

/**
 * Events emitted by monitors, in order: `seq` is the pull API's cursor. The id is derived from what
 * happened (monitor, type, block, values), so the same change seen twice is one event. A reorg that
 * removes an event's block emits `event.retracted` with `retracts` naming it.
 */
export const monitorEvent = service.table(
  "monitor_event",
  {
    seq: integer("seq").primaryKey().generatedAlwaysAsIdentity(),
    id: text("id").notNull(),
    owner: text("owner").notNull(),
    monitorId: text("monitor_id").notNull(),
    wallet: text("wallet").notNull(),
    type: text("type").notNull(),
    before: jsonb("before").$type<unknown>(),
    after: jsonb("after").$type<unknown>(),
    block: numeric("block", { precision: 78, scale: 0 }).notNull(),
    blockHash: text("block_hash").notNull(),
    modelVersion: text("model_version").notNull(),
    retracts: text("retracts"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("monitor_event_id").on(t.id),
    index("monitor_event_owner").on(t.owner, t.seq),
    // The watcher's reorg check: the events of the last blocks, and whether each was retracted.
    index("monitor_event_block").on(t.block),
    index("monitor_event_retracts").on(t.retracts),
  ],
);

/**
 * One delivery per event and endpoint: the durable queue the delivery worker leases from (every
 * replica runs one; a lease is taken in one statement, so two never send one message). pending →
 * delivered, or failed after the retry schedule, or cancelled when its endpoint was disabled.
 */
export const webhookDelivery = service.table(
  "webhook_delivery",
  {
    eventId: text("event_id").notNull(),
    endpointId: text("endpoint_id").notNull(),
    status: text("status").$type<"pending" | "delivered" | "failed" | "cancelled">().notNull().default("pending"),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: timestamp("next_attempt_at", { withTimezone: true }).notNull().defaultNow(),
    leasedUntil: timestamp("leased_until", { withTimezone: true }),
    lastStatus: integer("last_status"),
    lastError: text("last_error"),
    deliveredAt: timestamp("delivered_at", { withTimezone: true }),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ name: "webhook_delivery_pkey", columns: [t.eventId, t.endpointId] }),
    index("webhook_delivery_due").on(t.nextAttemptAt).where(sql.raw("status = 'pending'")),
  ],
);

/** How far the monitor watcher has read the index: the last indexed block whose changes it screened. */
export const monitorCursor = service.table("monitor_cursor", {
  name: text("name").primaryKey(),
  block: numeric("block", { precision: 78, scale: 0 }).notNull(),
  updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
});

/**
 * Prepaid credit (api/credit): a wallet buys credit with one x402 payment and spends it on paid
 * calls without a payment each, by bearer token or signed in. Credit tokens are stored as their
 * sha256 only (the token is in the answer that issued it); each purchase issues one, and every
 * token of a wallet spends its balance until the owner revokes them all.
 */
export const creditToken = service.table(
  "credit_token",
  {
    /** sha256 (hex) of the token. */
    hash: text("hash").primaryKey(),
    owner: text("owner").notNull(),
    issuedAt: timestamp("issued_at", { withTimezone: true }).notNull().defaultNow(),
    revokedAt: timestamp("revoked_at", { withTimezone: true }),
  },
  (t) => [index("credit_token_owner").on(t.owner).where(sql.raw("revoked_at is null"))],
);

/**
 * One purchase of credit: the payment (token, payer, nonce) that bought it, in micro-USD. It is
 * spendable only while that payment's ledger row is `settled` (the lot is written before the
 * settlement it waits for, so a failed one grants nothing) and until `expires_at`.
 */
export const creditLot = service.table(
  "credit_lot",
  {
    token: text("token").notNull(),
    payer: text("payer").notNull(),
    nonce: text("nonce").notNull(),
    amount: numeric("amount", { precision: 78, scale: 0 }).notNull(),
    remaining: numeric("remaining", { precision: 78, scale: 0 }).notNull(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp("expires_at", { withTimezone: true }).notNull(),
  },
  (t) => [
    primaryKey({ name: "credit_lot_pkey", columns: [t.token, t.payer, t.nonce] }),
    index("credit_lot_payer").on(t.payer, t.expiresAt),
    check(
      "credit_lot_remaining_check",
      sql.raw(`${t.remaining.name} >= 0 and ${t.remaining.name} <= ${t.amount.name}`),
    ),
  ],
);

/** held: taken from the balance, the call runs. spent: its answer is stored. Released spends are deleted (lifecycle: api/payments/credit-lifecycle.ts). */
const CREDIT_SPEND_STATUSES = ["held", "spent"] as const;
export type CreditSpendStatus = (typeof CREDIT_SPEND_STATUSES)[number];

/** One paid call answered from credit: what it cost, which lots paid it, and its stored answer. */
export const creditSpend = service.table(
  "credit_spend",
  {
    id: text("id").primaryKey(),
    owner: text("owner").notNull(),
    route: text("route").notNull(),
    subject: text("subject"),
    fingerprint: text("fingerprint").notNull(),
    /** The Payment-Identifier the client sent: the same id on the same request is answered again, charged once. */
    paymentId: text("payment_id"),
    amount: numeric("amount", { precision: 78, scale: 0 }).notNull(),
    /** The lots it was drawn from ("token:payer:nonce" -> micro-USD): what a release gives back. Null when a lease paid it. */
    draws: jsonb("draws").$type<Record<string, string>>(),
    /** The lease (credit_lease) it was paid from: a call without a Payment-Identifier, recorded once answered. */
    lease: text("lease"),
    /** What the held call makes outside the ledger that must not stand unpaid (a passport's report id), named before it exists. */
    reference: text("reference"),
    status: text("status").$type<CreditSpendStatus>().notNull(),
    responseStatus: integer("response_status"),
    responseType: text("response_type"),
    responseBody: text("response_body"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    // Only spends with a Payment-Identifier: a leased call (none) adds no entry to it.
    uniqueIndex("credit_spend_owner_id").on(t.owner, t.paymentId).where(sql.raw("payment_id is not null")),
    index("credit_spend_owner_created").on(t.owner, t.createdAt),
    index("credit_spend_held").on(t.updatedAt).where(sql.raw("status = 'held'")),
    check(
      "credit_spend_status_check",
      sql.raw(`${t.status.name} in (${CREDIT_SPEND_STATUSES.map((s) => `'${s}'`).join(", ")})`),
    ),
  ],
);
export type CreditSpendRow = typeof creditSpend.$inferSelect;

/**
 * A slice of an owner's credit taken by one replica (api/payments/core/credit-leases.ts): drawn
 * from the lots in one write, then spent call by call in memory, each spend recorded (`spent`
 * grows) before its answer leaves. Closing it gives `amount - spent` back to the lots, latest to
 * expire first; a replica that died holding one has it closed by the sweep after ABANDONED_AFTER_MS.
 */
export const creditLease = service.table(
  "credit_lease",
  {
    id: text("id").primaryKey(),
    owner: text("owner").notNull(),
    amount: numeric("amount", { precision: 78, scale: 0 }).notNull(),
    spent: numeric("spent", { precision: 78, scale: 0 }).notNull().default("0"),
    /** The lots it was drawn from ("token:payer:nonce" -> micro-USD). */
    draws: jsonb("draws").$type<Record<string, string>>().notNull(),
    /** Another replica found the lots short while this lease was open: its holder gives it back when its calls end. */
    wanted: boolean("wanted").notNull().default(false),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    /** Last spend recorded (or its opening): a lease not renewed for ABANDONED_AFTER_MS belongs to a dead replica. */
    renewedAt: timestamp("renewed_at", { withTimezone: true }).notNull().defaultNow(),
    closedAt: timestamp("closed_at", { withTimezone: true }),
  },
  (t) => [
    index("credit_lease_open").on(t.owner).where(sql.raw("closed_at is null")),
    check("credit_lease_spent_check", sql.raw(`${t.spent.name} >= 0 and ${t.spent.name} <= ${t.amount.name}`)),
  ],
);
export type CreditLeaseRow = typeof creditLease.$inferSelect;
export type CreditLotRow = typeof creditLot.$inferSelect;
