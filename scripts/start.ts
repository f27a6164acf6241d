import { resolve } from "node:path";
import { launchEnvironment, preflight } from "../config/preflight.ts";
import { type Devnet, describeDevnet, startDevnet } from "../devnet/devnet.ts";
import { prepareDevnetData } from "./devnet-data.ts";
import { backfillProgress, seedingProgress } from "./launch-progress.ts";
import { prepareLiveData } from "./live-data.ts";
import { launch, runPonder } from "./ponder-process.ts";

// The whole service: on live Celo when PONDER_RPC_URL_42220 is set; otherwise a fresh local devnet
// with seeded history, indexed into PGlite (or DATABASE_URL), the API on localhost.
await launch(async () => {
  const env = launchEnvironment();
  let devnet: Devnet | undefined;
  if (!env.PONDER_RPC_URL_42220) {
    const manifestPath = resolve(env.DEVNET_MANIFEST);
    console.log("Starting the local devnet (anvil, chain 42220) and seeding its history…");
    const seeding = seedingProgress();
    devnet = await startDevnet({
      wallets: env.DEVNET_WALLETS,
      months: env.DEVNET_MONTHS,
      port: env.DEVNET_PORT,
      apiUrl: `http://127.0.0.1:${env.PORT}`,
      manifestPath,
      onSeeding: seeding.onSeeding,
    });
    seeding.finish();
    console.log(describeDevnet(devnet.manifest, manifestPath));
  }
  try {
    const { target } = await preflight();
    if (devnet) await prepareDevnetData(target, env.DATABASE_URL);
    else await prepareLiveData(target);
    const { finish: backfillDone, ...backfill } = backfillProgress(env);
    return await runPonder(target, {
      port: env.PORT,
      ...backfill,
      onReady: async () => {
        await backfillDone();
        console.log(
          [
            "",
            `Service ready on http://127.0.0.1:${env.PORT}`,
            `  stats      http://127.0.0.1:${env.PORT}/api/stats`,
            `  GraphQL    http://${env.DATA_HOST}:${env.DATA_PORT}/graphql (data listener; SQL over HTTP at /sql, docs/data.md)`,
            devnet ? `  manifest   ${resolve(env.DEVNET_MANIFEST)} (persona wallets, lender keys)` : "",
          ].join("\n"),
        );
      },
    });
  } finally {
    await devnet?.stop();
  }
});
