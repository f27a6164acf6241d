import { spawn, type ChildProcess } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { freePort } from "./ports.ts";

/** Celo mainnet's chain id: the devnet uses it so EIP-712 payment domains match Celo's. */
export const DEVNET_CHAIN_ID = 42220;

export type Anvil = {
  rpcUrl: string;
  port: number;
  pid: number;
  stop: () => Promise<void>;
};

export type AnvilOptions = {
  port?: number;
  /** Genesis timestamp (unix seconds); history is seeded forward from here. */
  genesisTimestamp?: number;
  /** Gas limit per block; seeding packs many transfers into one block. */
  gasLimit?: bigint;
};

/**
 * Path of the anvil binary shipped by `@foundry-rs/anvil-<platform>`. Spawning it directly (not the
 * npm `bin.mjs` wrapper) means killing our child kills the node itself.
 */
export function anvilBinary(): string {
  const require = createRequire(import.meta.url);
  const arch = process.arch === "x64" ? "amd64" : process.arch;
  const pkg = require.resolve(`@foundry-rs/anvil-${process.platform}-${arch}/package.json`);
  return join(dirname(pkg), "bin", "anvil");
}

/** Starts anvil on 127.0.0.1 in its own process group and waits until it answers JSON-RPC. */
export async function startAnvil(options: AnvilOptions = {}): Promise<Anvil> {
  const port = options.port ?? (await freePort());
  const args = [
    "--host", "127.0.0.1",
    "--port", String(port),
    "--chain-id", String(DEVNET_CHAIN_ID),
    "--gas-limit", String(options.gasLimit ?? 1_000_000_000n),
    "--accounts", "10",
    "--balance", "1000000",
    "--silent",
  ];
  if (options.genesisTimestamp !== undefined) args.push("--timestamp", String(options.genesisTimestamp));

  const child = spawn(anvilBinary(), args, { detached: true, stdio: ["ignore", "ignore", "pipe"] });
  killOnExit(child);
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const rpcUrl = `http://127.0.0.1:${port}`;
  const stop = () => stopProcessGroup(child);

  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`anvil exited at start: ${stderr.trim() || `code ${child.exitCode}`}`);
    if (await answers(rpcUrl)) return { rpcUrl, port, pid: child.pid!, stop };
    await new Promise((r) => setTimeout(r, 50));
  }
  await stop();
  throw new Error(`anvil did not answer on ${rpcUrl} within 15 s`);
}

async function answers(rpcUrl: string): Promise<boolean> {
  try {
    const res = await fetch(rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
    });
    return res.ok;
  } catch {
    return false;
  }
}

/**
 * A child started in its own process group does not die with us: make sure it does, even when we
 * exit on an uncaught error (SIGKILL of this process is the one case nothing can cover).
 */
export function killOnExit(child: ChildProcess): void {
  const kill = () => {
    try {
      if (child.exitCode === null && child.signalCode === null && child.pid) process.kill(-child.pid, "SIGKILL");
    } catch {
      /* already gone */
    }
  };
  process.once("exit", kill);
  child.once("exit", () => process.removeListener("exit", kill));
}

/** SIGTERM the child's process group, then SIGKILL if it lingers. Resolves once it has exited. */
export async function stopProcessGroup(child: ChildProcess, graceMs = 5_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const signal = (sig: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, sig);
    } catch {
      /* already gone */
    }
  };
  signal("SIGTERM");
  const timer = setTimeout(() => signal("SIGKILL"), graceMs);
  await exited;
  clearTimeout(timer);
}
