import type { Ledger } from "../ledger.ts";
import { sqlClaims } from "./claims.ts";
import { sqlCredit } from "./credit.ts";
import { sqlSettlementQueue } from "./queue.ts";
import { sqlReconciliation } from "./reconciliation.ts";
import { sqlSignInNonces } from "./sign-in.ts";
import type { Store } from "./statements.ts";
import { sqlLedgerStats } from "./stats.ts";

/**
 * The payment ledger in the service store (drizzle, prepared statements batched with `coalesced`),
 * one part per concern. Takes the store as a promise: the API module is loaded synchronously, the
 * store opens later.
 */
export function createSqlLedger(store: Store): Ledger {
  return {
    ...sqlClaims(store),
    ...sqlSettlementQueue(store),
    ...sqlReconciliation(store),
    ...sqlSignInNonces(store),
    ...sqlLedgerStats(store),
    credit: sqlCredit(store),
  };
}
