import { preflight } from "../config/preflight.ts";
import { backfillProgress } from "./launch-progress.ts";
import { launch, runPonder } from "./ponder-process.ts";

// The indexer and API alone, against live Celo or an already running devnet (`npm run devnet`).
// A devnet is indexed from scratch each time (it may be a new chain under the same addresses); its
// payment ledger is kept while the chain is the same one.
await launch(async () => {
  const { env, target } = await preflight();
  // Loaded once the configuration passed: a refused start stops without loading the service store
  // (drizzle, PGlite), about 3 s of CPU.
  if (target.network === "devnet") {
    const { prepareDevnetData } = await import("./devnet-data.ts");
    if ((await prepareDevnetData(target, env.DATABASE_URL)) === "same chain")
      console.log("Same devnet chain as the last run: the payment ledger is kept, the index is rebuilt.");
  } else await (await import("./live-data.ts")).prepareLiveData(target);
  const { finish, ...backfill } = backfillProgress(env);
  return runPonder(target, { port: env.PORT, ...backfill, onReady: finish });
});
