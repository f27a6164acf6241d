import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { sleep } from "../shared/async.ts";
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
  /** Chain id (default 42220). Only tests use another, to play someone else's node. */
  chainId?: number;
  /** A state file to start from (devnet/snapshot.ts): blocks, logs and accounts as they were dumped. */
  loadState?: string;
};

/** The preferred port is taken by a process that is not ours: the caller picks another one. */
export class PortTakenError extends Error {}

/**
 * Path of the anvil binary shipped by `@foundry-rs/anvil-<platform>`. Spawning it directly (not the
 * npm `bin.mjs` wrapper) means killing our child kills the node itself.
 */
function anvilBinary(): string {
  const require = createRequire(import.meta.url);
  const arch = process.arch === "x64" ? "amd64" : process.arch;
  const pkg = require.resolve(`@foundry-rs/anvil-${process.platform}-${arch}/package.json`);
  return join(dirname(pkg), "bin", "anvil");
}

/**
 * Starts anvil on 127.0.0.1 in its own process group and waits until it answers JSON-RPC. Only a
 * node this call started is ever used: a preferred port that something else holds (another
 * developer's anvil or Hardhat node, a leftover devnet) is a PortTakenError before anything is
 * spawned, and readiness means our child is alive, holds the listening socket (Linux: its own file
 * descriptors) and serves the chain id it was asked for.
 */
export async function startAnvil(options: AnvilOptions = {}): Promise<Anvil> {
  const chainId = options.chainId ?? DEVNET_CHAIN_ID;
  if (options.port !== undefined && options.port !== 0 && !(await portIsFree(options.port)))
    throw new PortTakenError(`port ${options.port} is taken by another process`);
  const port = options.port || (await freePort());
  const args = [
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
    "--chain-id",
    String(chainId),
    "--gas-limit",
    String(options.gasLimit ?? 1_000_000_000n),
    "--accounts",
    "10",
    "--balance",
    "1000000",
    "--silent",
  ];
  if (options.genesisTimestamp !== undefined) args.push("--timestamp", String(options.genesisTimestamp));
  if (options.loadState !== undefined) args.push("--load-state", options.loadState);

  const child = spawn(anvilBinary(), args, { detached: true, stdio: ["ignore", "ignore", "pipe"] });
  killOnExit(child);
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const rpcUrl = `http://127.0.0.1:${port}`;
  const stop = () => stopProcessGroup(child);

  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      const taken = /address already in use|AddrInUse/i.test(stderr);
      throw new (taken ? PortTakenError : Error)(`anvil exited at start: ${stderr.trim() || `code ${child.exitCode}`}`);
    }
    if (
      (await chainIdAt(rpcUrl)) === chainId &&
      child.exitCode === null &&
      ownsListeningPort(child.pid!, port) !== false
    )
      return { rpcUrl, port, pid: child.pid!, stop };
    await sleep(50);
  }
  await stop();
  throw new Error(`anvil did not answer on ${rpcUrl} within 15 s`);
}

/** The chain id the node at `rpcUrl` serves, or null when nothing answers. */
export async function chainIdAt(rpcUrl: string): Promise<number | null> {
  try {
    const res = await fetch(rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
      signal: AbortSignal.timeout(2_000),
    });
    if (!res.ok) return null;
    const body = (await res.json()) as { result?: string };
    return body.result ? Number(BigInt(body.result)) : null;
  } catch {
    return null;
  }
}

/** Whether nothing listens on 127.0.0.1:`port` (we can bind it ourselves). */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once("error", () => resolve(false));
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/**
 * The inodes of the sockets listening on `port` (Linux: /proc/net/tcp{,6}, state LISTEN, any
 * address). Undefined where /proc cannot tell.
 */
function listeningInodes(port: number): Set<string> | undefined {
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  const inodes = new Set<string>();
  let readable = false;
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(table, "utf8");
      readable = true;
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 9 && f[1]!.endsWith(`:${hexPort}`) && f[3] === "0A") inodes.add(f[9]!);
    }
  }
  return readable ? inodes : undefined;
}

/**
 * Whether a socket listens on `port`. Unlike portIsFree, not fooled by another process's outgoing
 * connection that the kernel gave the port as its own local end once the listener had gone (a
 * parallel test suite's long-lived connections: the port then stays unbindable). Where /proc
 * cannot tell, whether the port cannot be bound.
 */
export async function isListening(port: number): Promise<boolean> {
  const inodes = listeningInodes(port);
  return inodes ? inodes.size > 0 : !(await portIsFree(port));
}

/**
 * Whether process `pid` holds the socket listening on `port` (the listening socket's inode among
 * the process's file descriptors). Undefined where /proc cannot tell.
 */
function ownsListeningPort(pid: number, port: number): boolean | undefined {
  try {
    const inodes = listeningInodes(port);
    if (inodes === undefined) return undefined; // no /proc (macOS): the port check before spawning and the chain id decide
    if (inodes.size === 0) return false;
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m && inodes.has(m[1]!)) return true;
      } catch {
        /* closed meanwhile */
      }
    }
    return false;
  } catch {
    return undefined;
  }
}

/**
 * A child started in its own process group does not die with us: make sure it does, even when we
 * exit on an uncaught error (SIGKILL of this process is the one case nothing can cover).
 */
export function killOnExit(child: ChildProcess): void {
  children.add(child);
  child.once("exit", () => children.delete(child));
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

/** Children started in their own process group by this process (anvil, the harness's indexers) that are still running. */
const children = new Set<ChildProcess>();

/** Sends `signal` to the process group of every child registered with killOnExit that is still running. */
export function signalChildGroups(signal: NodeJS.Signals): number {
  let n = 0;
  for (const child of children) {
    if (child.exitCode !== null || child.signalCode !== null || !child.pid) continue;
    try {
      process.kill(-child.pid, signal);
      n++;
    } catch {
      /* already gone */
    }
  }
  return n;
}
