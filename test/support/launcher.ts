import { spawn } from "node:child_process";
import { freePort } from "../../devnet/ports.ts";
import { type Indexer, serving } from "./indexer.ts";

/**
 * `npm run indexer`, the launcher (the devnet's data prepared, then `ponder start`), in a process
 * group of its own as a terminal starts it; stop() sends that group SIGTERM, as Ctrl-C would.
 */
export async function startLauncher(env: Record<string, string>): Promise<Indexer> {
  const port = await freePort();
  const dataPort = await freePort();
  const child = spawn("npm", ["run", "indexer"], {
    env: {
      ...process.env,
      PONDER_RPC_URL_42220: "",
      POLLING_INTERVAL_MS: "200",
      LOG_LEVEL: "warn",
      PONDER_LOG_LEVEL: "warn",
      DATA_HOST: "127.0.0.1",
      ...env,
      PORT: String(port),
      DATA_PORT: String(dataPort),
    },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  return serving(child, port, dataPort);
}
