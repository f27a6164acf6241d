import { createPublicClient, http } from "viem";
import type { PaymentSettings } from "../../config/payments.ts";
import type { ServiceDb } from "../store/store.ts";
import { PaymentCore, type PaymentDeps } from "./core.ts";
import { createFacilitator, type Facilitator } from "./facilitator.ts";
import { createSqlLedger } from "./ledger/sql/sql-ledger.ts";

/** The payment core for these settings, its ledger in the service store. */
export function createPayments(
  settings: PaymentSettings,
  db: Promise<ServiceDb> | ServiceDb,
  facilitator: Facilitator = createFacilitator(settings),
  /** Shorter waits (tests), and what follows a reconciled outcome (the app: revoking unpaid passports). */
  options: Pick<
    PaymentDeps,
    "receiptWaitMs" | "settlingWaitMs" | "onOutcome" | "payerState" | "onQueued" | "sanctions"
  > = {},
): PaymentCore {
  return new PaymentCore({
    settings,
    facilitator,
    chain: createPublicClient({ transport: http(settings.rpcUrl, { retryCount: 1, timeout: 10_000 }) }),
    ledger: createSqlLedger(db),
    ...options,
  });
}
