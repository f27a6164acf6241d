import { sql } from "drizzle-orm";
import { check, index, integer, numeric, pgSchema, primaryKey, text, timestamp } from "drizzle-orm/pg-core";

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

export const PAYMENT_STATUSES = ["pending", "settled", "failed", "waived"] as const;
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number];

/**
 * The payment ledger: one row per EIP-3009 authorization presented with a valid signature.
 * The primary key (token, payer, nonce) is what makes a payment single-use across API replicas.
 */
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
  },
  (t) => [
    primaryKey({ name: "payment_pkey", columns: [t.token, t.payer, t.nonce] }),
    index("payment_payer_subject").on(t.payer, t.subject, t.settledAt),
    check("payment_status_check", sql.raw(`${t.status.name} in (${PAYMENT_STATUSES.map((s) => `'${s}'`).join(", ")})`)),
  ],
);

export type PaymentRow = typeof payment.$inferSelect;
