import { index, integer, numeric, pgSchema, primaryKey, text, timestamp } from "drizzle-orm/pg-core";

/**
 * The service store: what the API itself writes (never Ponder's tables, which are read-only to
 * the API). One Postgres schema of its own, or a PGlite directory of its own.
 */
export const SERVICE_SCHEMA = "service";
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
  (t) => [primaryKey({ columns: [t.token, t.payer, t.nonce] }), index("payment_payer_subject").on(t.payer, t.subject, t.settledAt)],
);

export type PaymentRow = typeof payment.$inferSelect;

/** The DDL for the tables above (kept beside them; the ledger tests exercise every column). */
export const SERVICE_DDL = `
create schema if not exists ${SERVICE_SCHEMA};
create table if not exists ${SERVICE_SCHEMA}.payment (
  token text not null,
  payer text not null,
  nonce text not null,
  amount numeric(78, 0) not null,
  route text not null,
  subject text,
  fingerprint text not null,
  signature_hash text not null,
  encoding text not null,
  status text not null check (status in ('pending', 'settled', 'failed', 'waived')),
  failure text,
  transaction text,
  response_status integer,
  response_type text,
  response_body text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  settled_at timestamptz,
  primary key (token, payer, nonce)
);
create index if not exists payment_payer_subject on ${SERVICE_SCHEMA}.payment (payer, subject, settled_at);
`;
