import { createPayments } from "../../api/payments/payments.ts";
import { settlementRole } from "../../api/payments/settlement-worker.ts";
import { openServiceStore } from "../../api/store/store.ts";
import { readEnv } from "../../config/env.ts";
import { settlementTiming } from "../../config/payments.ts";
import { anvilDevAccount } from "../../devnet/accounts.ts";
import { devnetPaymentSettings } from "../../harness/payments.ts";

// `npm run bench:payments -- --settler process`: the process that settles, beside one that answers
// with X402_SETTLEMENT_WORKER=off. It runs the settlement worker on the benchmark's shared queue and
// answers nothing (woken by the other's signal of queued answers), with a relayer key of its own
// (anvil dev account #6, a well-known dev key): a replica with the worker on that the load
// balancer sends no traffic. Arguments: the devnet's
// manifest and the service store's connection string. Prints "ready" once it runs; SIGTERM stops it.

const [manifestPath, connectionString] = process.argv.slice(2);
const settings = {
  ...devnetPaymentSettings(manifestPath!),
  settlement: { mode: "self" as const, relayerKey: anvilDevAccount(6).privateKey },
  timing: settlementTiming({ ...readEnv({}), X402_SETTLEMENT: "deferred" }),
};
const store = await openServiceStore({ kind: "postgres", connectionString: connectionString! });
const settlement = settlementRole(true, { db: Promise.resolve(store.db), connectionString: connectionString! });
settlement.start(createPayments(settings, store.db, undefined, { onQueued: settlement.onQueued }));
process.once("SIGTERM", async () => {
  await settlement.stop();
  await store.close();
  process.exit(0);
});
console.log("ready");
