/** Moved to api/payments/ledger/ (ledger.ts: the interface; sql/: the SQL ledger; memory.ts): kept while imports move. */
export * from "./ledger/ledger.ts";
export type { Ledger as PaymentLedger } from "./ledger/ledger.ts";
