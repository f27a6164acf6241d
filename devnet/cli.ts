import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { seedingProgress } from "../scripts/launch-progress.ts";
import { describeDevnet, startDevnet } from "./devnet.ts";

// npm run devnet -- [--wallets 300] [--transfers N] [--months 15] [--seed 42] [--port 8545] [--manifest .devnet/manifest.json]
const { values } = parseArgs({
  options: {
    wallets: { type: "string", default: "300" },
    transfers: { type: "string" },
    months: { type: "string", default: "15" },
    seed: { type: "string", default: "42" },
    port: { type: "string", default: "8545" },
    manifest: { type: "string", default: process.env.DEVNET_MANIFEST ?? ".devnet/manifest.json" },
    "api-url": { type: "string", default: `http://127.0.0.1:${process.env.PORT ?? 42069}` },
  },
});

const int = (name: string, value: string | undefined) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) {
    console.error(`--${name} must be a whole number, got "${value}"`);
    process.exit(2);
  }
  return n;
};

const manifestPath = resolve(values.manifest);
const seeding = seedingProgress();
const devnet = await startDevnet({
  wallets: int("wallets", values.wallets),
  transfers: values.transfers === undefined ? undefined : int("transfers", values.transfers),
  months: int("months", values.months),
  seed: int("seed", values.seed),
  port: int("port", values.port),
  apiUrl: values["api-url"],
  manifestPath,
  log: seeding.log,
  onSeeding: seeding.onSeeding,
}).catch((error: Error) => {
  console.error(`Devnet failed to start: ${error.message}`);
  process.exit(1);
});

seeding.finish();
console.log(describeDevnet(devnet.manifest, manifestPath));
console.log("Press Ctrl-C to stop the devnet.");
const stop = async () => {
  await devnet.stop();
  process.exit(0);
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
