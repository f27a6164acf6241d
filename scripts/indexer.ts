import { readEnv } from "../config/env.ts";
import { preflight } from "../config/preflight.ts";
import { resolveIndexTarget } from "../config/target.ts";
import { launch, resetDevnetData, restartInterruptedPgliteBackfill, runPonder } from "./ponder-process.ts";

// The indexer and API alone, against live Celo or an already running devnet (`npm run devnet`).
// A devnet is indexed from scratch each time: it may be a new chain under the same addresses.
await launch(async () => {
  const env = readEnv();
  const target = resolveIndexTarget(env);
  await preflight(target);
  if (target.network === "devnet") await resetDevnetData(target, env.DATABASE_URL);
  else if (await restartInterruptedPgliteBackfill(target)) console.log("The previous backfill was stopped part way: on PGlite it starts over (the RPC cache is kept).");
  return runPonder(target, { port: env.PORT });
});
