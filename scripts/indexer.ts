import { readEnv } from "../config/env.ts";
import { resolveIndexTarget } from "../config/target.ts";
import { launch, runPonder } from "./ponder-process.ts";

// The indexer and API alone, against live Celo or an already running devnet (`npm run devnet`).
await launch(async () => {
  const env = readEnv();
  return runPonder(resolveIndexTarget(env), { port: env.PORT });
});
