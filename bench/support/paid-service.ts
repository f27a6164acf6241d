import { drizzle } from "drizzle-orm/node-postgres";
import { zeroAddress } from "viem";
import { createApp } from "../../api/app.ts";
import type { IndexDb } from "../../api/db.ts";
import type { PayerState } from "../../api/payments/local-verify.ts";
import { createPayments } from "../../api/payments/payments.ts";
import { settlementRole } from "../../api/payments/settlement-worker.ts";
import { payerSanctions } from "../../api/sanctions/payers.ts";
import type { ServiceDb } from "../../api/store/store.ts";
import type { Address } from "../../config/addresses.ts";
import { readEnv } from "../../config/env.ts";
import { type PaymentSettings, type SettlementTiming, settlementTiming } from "../../config/payments.ts";
import { type IndexTarget, resolveIndexTarget } from "../../config/target.ts";
import { stoppedIndexerState } from "../../harness/index-db.ts";
import type { indexedPostgresDevnet } from "../../harness/postgres-devnet.ts";
import * as schema from "../../ponder.schema.ts";
import type { Logger } from "../../shared/log.ts";

/**
 * The service's app over a stopped indexer's tables, paid in `mode` (deferred: the default caps of
 * X402_DEFERRED_MAX_PER_PAYER and X402_DEFERRED_MAX_TOTAL), with its part in settlement as src/api/index.ts gives it (its worker running unless `worker` is false) and the payer's sanctions check wired as
 * src/api/index.ts wires it: what the payment benchmarks measure.
 */
export function paidService(
  mode: SettlementTiming["mode"],
  deps: {
    settings: PaymentSettings;
    store: ServiceDb;
    db: IndexDb;
    target: IndexTarget;
    payerState: PayerState;
    logger: Logger;
    /** Whether this process runs the settlement worker (X402_SETTLEMENT_WORKER): off, another process settles. */
    worker?: boolean;
    /** The store's connection string, when other processes share it (a settling process): signalled as src/api/index.ts does. */
    storeUrl?: string;
  },
) {
  const timing = settlementTiming({ ...readEnv({}), X402_SETTLEMENT: mode });
  const settlement = settlementRole(
    deps.worker !== false,
    deps.storeUrl ? { db: Promise.resolve(deps.store), connectionString: deps.storeUrl } : undefined,
  );
  const payments = createPayments({ ...deps.settings, timing }, deps.store, undefined, {
    payerState: deps.payerState,
    onQueued: settlement.onQueued,
    sanctions: payerSanctions(deps.db, deps.target.schema, () => index.checkpoint()),
  });
  const index = stoppedIndexerState({ db: deps.db, target: deps.target, chain: payments.chain });
  settlement.start(payments);
  const app = createApp({
    db: deps.db,
    target: deps.target,
    payments,
    index,
    ipfs: undefined as never,
    logger: deps.logger,
  });
  return { payments, settlement, app };
}

/** The indexed tables of a benchmark's chain, as the service reads them, and up to 100 wallets that received transfers. */
export async function indexedReads(chain: Awaited<ReturnType<typeof indexedPostgresDevnet>>) {
  const { devnet, slot, pool } = chain;
  const db = drizzle(pool, { schema, casing: "snake_case" }) as unknown as IndexDb;
  const target = { ...resolveIndexTarget(readEnv({ DEVNET_MANIFEST: devnet.manifestPath })), schema: slot.schema };
  const { rows } = await pool.query<{ address: Address }>(
    `select distinct "to" as address from flow where "to" <> '${zeroAddress}' limit 100`,
  );
  return { db, target, wallets: rows.map((r) => r.address) };
}
