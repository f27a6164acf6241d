import { db, publicClients } from "ponder:api";
import schema from "ponder:schema";
import { graphql } from "ponder";
import { createApp } from "../../api/app.ts";
import { storedConversations } from "../../api/chat/conversations.ts";
import { createDataApp } from "../../api/data/app.ts";
import { sqlOverHttp } from "../../api/data/sql.ts";
import { checkPonderVersion, hostOnPonder, indexesHere, ponderMetrics, ponderSchema } from "../../api/host/ponder.ts";
import { IndexState } from "../../api/indexing/state.ts";
import { openedOnUse, openServiceIpfs } from "../../api/ipfs/open.ts";
import { removeUnpaidMonitors } from "../../api/monitors/routes.ts";
import { monitorSettings } from "../../api/monitors/settings.ts";
import { MonitorWatcher } from "../../api/monitors/watcher.ts";
import { WebhookWorker } from "../../api/monitors/webhooks/worker.ts";
import { revokeUnpaidReports } from "../../api/passport/report-route.ts";
import { createReporter, resolveReporterSettings } from "../../api/passport/reporter.ts";
import { SHUTDOWN_DRAIN_MS } from "../../api/payments/core.ts";
import { indexedPayerState } from "../../api/payments/local-verify.ts";
import { createPayments } from "../../api/payments/payments.ts";
import { eachOutcome, startReconciler } from "../../api/payments/reconcile.ts";
import { relayerLockFor } from "../../api/payments/relayer-lock.ts";
import { settlementRole } from "../../api/payments/settlement-worker.ts";
import { payerSanctions } from "../../api/sanctions/payers.ts";
import { openServiceStore, serviceStoreLocation } from "../../api/store/store.ts";
import { readEnv } from "../../config/env.ts";
import { resolvePaymentSettings } from "../../config/payments.ts";
import { resolveIndexTarget } from "../../config/target.ts";

// Before anything starts (the store, the worker, the reconciler): the host layer was written for one Ponder version.
checkPonderVersion();

// Ponder serves this app; all behaviour lives in api/. Ponder's db is read-only to the API: what
// the API writes (the payment ledger) goes to the service store, opened beside the indexer's data.
const target = resolveIndexTarget();
const storeLocation = serviceStoreLocation(target.database);
const store = openServiceStore(storeLocation);
store.catch((error) => console.error(`[api] cannot open the service store: ${(error as Error).message}`));
// Passports are published with the reporter key (anvil #3 on the devnet; REPORTER_PRIVATE_KEY on Celo).
const reporter = createReporter(resolveReporterSettings(target));
// A passport whose payment the reconciler finds unsettled is revoked on chain, and monitors created
// by such a call are removed (durable: the ledger row, or the credit hold, names them).
// Deferred settlement (X402_SETTLEMENT=deferred) verifies from the indexed payer state and queues
// the settlement for the workers on the shared queue: one in every process, unless
// X402_SETTLEMENT_WORKER=off leaves it to the others (a replica that only answers).
const env = readEnv();
const settlement = settlementRole(
  env.X402_SETTLEMENT_WORKER === "on",
  storeLocation.kind === "postgres"
    ? { db: store.then((s) => s.db), connectionString: storeLocation.connectionString }
    : undefined,
);
const payments = createPayments(
  resolvePaymentSettings(target),
  store.then((s) => s.db),
  undefined,
  {
    onOutcome: eachOutcome(revokeUnpaidReports(reporter), removeUnpaidMonitors(store.then((s) => s.db))),
    payerState: indexedPayerState(db, target),
    onQueued: settlement.onQueued,
    // Once per payer at each indexed checkpoint (the gate's read before the payment names it).
    sanctions: payerSanctions(db, target.schema, () => index.checkpoint()),
  },
);
settlement.start(payments);

// Payments whose outcome is unknown (a crash, a receipt that did not come) are settled from the
// chain: once at start, then on a schedule.
const reconciler = startReconciler(payments);

// Where indexing stands, from the database (so replicas agree) and the chain head: paid routes, stats,
// health and Ponder's own /ready and /health (answered in JSON by the host) all read it.
const index = new IndexState({ db, target, chain: publicClients.celo, maxLagBlocks: env.MAX_LAG_BLOCKS });

// The service's own IPFS node (offline): passport documents and statements are pinned here. On
// Postgres in the service store, shared by every replica; on PGlite (one process) on disk in IPFS_DIR.
// Opened on first use.
const ipfs = Promise.resolve(openedOnUse(() => openServiceIpfs(target, store)));

// Monitors: the indexer's process watches the index for changes to watched wallets and queues
// their events; every process (replicas too) delivers the queued webhooks, each message once.
const monitors = monitorSettings(env);
const webhooks = store.then((s) => new WebhookWorker(s.db, { allowPrivate: monitors.allowPrivateEndpoints }).start());
webhooks.catch(() => {}); // the store's failure is logged above
const watcher = indexesHere()
  ? new MonitorWatcher({
      db,
      store: store.then((s) => s.db),
      target,
      index,
      chain: publicClients.celo,
      onQueued: () => void webhooks.then((w) => w.kick()),
    }).start()
  : undefined;

const app = createApp({
  db,
  target,
  chain: publicClients.celo,
  index,
  payments,
  ipfs,
  reporter,
  monitorSettings: monitors,
  store: store.then((s) => s.db),
  conversations: storedConversations(store.then((s) => s.db)),
});

// Life under Ponder (api/host/ponder.ts): its version checked, its server hooked (JSON probes and
// client errors, the data paths hidden), its shutdown taken over, the data listener, the relayer lock.
hostOnPonder({
  index,
  // SIGTERM / SIGINT: Ponder's own handlers (which cut connections after 1 s and exit) wait until the
  // server stopped listening, new payments are refused and the requests in flight, settlement
  // included, are finished: at most SHUTDOWN_DRAIN_MS (docs/payments.md, "Shutdown").
  shutdown: {
    limitMs: SHUTDOWN_DRAIN_MS,
    drain: async (deadline) => {
      reconciler.stop();
      await watcher?.stop();
      await (await webhooks.catch(() => undefined))?.stop();
      await settlement.stop();
      const { drained, inFlight } = await payments.drain(Math.max(0, deadline - Date.now()));
      if (!drained)
        console.warn(
          `[payments] exiting with ${inFlight} paid requests unfinished; their payments are reconciled at the next start`,
        );
    },
    close: async () => (await store).close(),
  },
  // GraphQL, SQL over HTTP and /metrics: the indexed tables in bulk, for the operator's data team, on
  // a listener of their own (DATA_HOST:DATA_PORT, 127.0.0.1:42070 by default; docs/data.md), in the
  // indexer's process and, with DATA_LISTENER=on, a replica's. On the public port those paths answer a JSON 404.
  data: {
    setting: env.DATA_LISTENER,
    port: env.DATA_PORT,
    host: env.DATA_HOST,
    app: () =>
      createDataApp({
        graphql: graphql({ db, schema }),
        sql: sqlOverHttp({
          db,
          schema,
          namespace: ponderSchema() ?? target.schema,
          database: target.database,
          limits: { timeoutMs: env.DATA_QUERY_TIMEOUT_MS, maxRows: env.DATA_QUERY_MAX_ROWS },
        }),
        metrics: ponderMetrics,
      }),
  },
  // Relayer nonces are handed out per process: a second process on the same key refuses to start.
  relayer: relayerLockFor(payments.facilitator, target.database),
});

export default app;
