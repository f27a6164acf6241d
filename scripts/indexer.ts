import { preflight } from "../config/preflight.ts";
import { prepareDevnetData } from "./devnet-data.ts";
import { backfillProgress } from "./launch-progress.ts";
import { prepareLiveData } from "./live-data.ts";
import { launch, runPonder } from "./ponder-process.ts";

// The indexer and API alone, against live Celo or an already running devnet (`npm run devnet`).
// A devnet is indexed from scratch each time (it may be a new chain under the same addresses); its
// payment ledger is kept while the chain is the same one.
await launch(async () => {
  const { env, target } = await preflight();
  if (target.network === "devnet") {
    if ((await prepareDevnetData(target, env.DATABASE_URL)) === "same chain")
      console.log("Same devnet chain as the last run: the payment ledger is kept, the index is rebuilt.");
  } else await prepareLiveData(target);
  const { finish, ...backfill } = backfillProgress(env);
  return runPonder(target, { port: env.PORT, ...backfill, onReady: finish });
});
