import { createPublicClient, http, type PublicClient } from "viem";
import type { PaymentSettings } from "../../config/payments.ts";
import type { ServiceDb } from "../store/store.ts";
import { MAX_AGE_MS } from "../wallet/assess.ts";
import { createFacilitator, type Facilitator } from "./facilitator.ts";
import type { PaymentDeps } from "./guard.ts";
import { PaymentLedger } from "./ledger.ts";

export type Payments = PaymentDeps & { facilitator: Facilitator; chain: PublicClient };

/** Everything the payment guard needs, from the settings and the service store. */
export function createPayments(settings: PaymentSettings, db: Promise<ServiceDb> | ServiceDb, facilitator: Facilitator = createFacilitator(settings)): Payments {
  return {
    settings,
    facilitator,
    chain: createPublicClient({ transport: http(settings.rpcUrl, { retryCount: 1, timeout: 10_000 }) }),
    ledger: new PaymentLedger(db),
    cacheLifetimeMs: MAX_AGE_MS,
  };
}
