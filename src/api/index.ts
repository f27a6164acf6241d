import { db, publicClients } from "ponder:api";
import schema from "ponder:schema";
import { graphql } from "ponder";
import { createApp } from "../../api/app.ts";
import { openIpfs } from "../../api/ipfs/node.ts";
import { answerClientErrorsAsJsonOnNewServers } from "../../api/http/client-errors.ts";
import { SHUTDOWN_DRAIN_MS } from "../../api/payments/core.ts";
import { createPayments } from "../../api/payments/payments.ts";
import { startReconciler } from "../../api/payments/reconcile.ts";
import { openServiceStore, serviceStoreLocation } from "../../api/store/store.ts";
import { resolvePaymentSettings } from "../../config/payments.ts";
import { resolveIndexTarget } from "../../config/target.ts";

// Ponder serves this app; all behaviour lives in api/. Ponder's db is read-only to the API: what
// the API writes (the payment ledger) goes to the service store, opened beside the indexer's data.
const target = resolveIndexTarget();
const store = openServiceStore(serviceStoreLocation(target.database));
store.catch((error) => console.error(`[api] cannot open the service store: ${(error as Error).message}`));
const payments = createPayments(resolvePaymentSettings(target), store.then((s) => s.db));

// Payments whose outcome is unknown (a crash, a receipt that did not come) are settled from the
// chain: once at start, then on a schedule. On SIGTERM, claimed payments finish settling first.
const reconciler = startReconciler(payments);
process.once("SIGTERM", () => {
  reconciler.stop();
  void payments.drain(SHUTDOWN_DRAIN_MS).then(({ drained, inFlight }) => {
    if (!drained) console.warn(`[payments] exiting with ${inFlight} requests still settling; they are reconciled at the next start`);
  });
});

// Ponder creates its HTTP server after loading this module: oversized headers get a JSON 431 there too.
answerClientErrorsAsJsonOnNewServers();

// GraphQL: a read-only view of the indexed tables and views, for data teams.
// The service's own IPFS node (offline): passport documents and statements are pinned here.
const ipfs = openIpfs(target.ipfsDirectory);
ipfs.catch((error) => console.error(`[api] cannot open the IPFS node in ${target.ipfsDirectory}: ${(error as Error).message}`));

const app = createApp({ db, target, chain: publicClients.celo, payments, ipfs, graphql: graphql({ db, schema }) });

export default app;
