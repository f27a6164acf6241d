import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Anvil, chainIdAt, isListening, PortTakenError, startAnvil } from "../devnet/anvil.ts";
import { freePort } from "../devnet/ports.ts";
import { startTestDevnet, type TestDevnet } from "./support/devnet.ts";
import type { Indexer } from "./support/indexer.ts";
import { startLauncher } from "./support/launcher.ts";

const rpc = async (url: string, method: string, params: unknown[] = []) =>
  (
    (await (
      await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
      })
    ).json()) as { result: string }
  ).result;

// The first two blocks run at once, and so do their tests: each has its own ports and processes, and
// what they wait on (seeding, indexing, a node's start) is most of their time.

// `npm start` with someone else's node on the preferred port: never adopted, never written to.
describe.concurrent("the launcher uses only a node it started itself", () => {
  const cleanup: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const stop of cleanup.reverse()) await stop().catch(() => {});
  });

  it("leaves a foreign anvil (chain 31337) on the preferred port alone and takes a free port", async () => {
    const foreign: Anvil = await startAnvil({ chainId: 31337 });
    cleanup.push(foreign.stop);
    await rpc(foreign.rpcUrl, "evm_mine");
    const blockBefore = await rpc(foreign.rpcUrl, "eth_blockNumber");
    const nonceBefore = await rpc(foreign.rpcUrl, "eth_getTransactionCount", [
      "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
      "latest",
    ]);

    // Two months: what is checked is where the devnet goes, not what it holds.
    const devnet: TestDevnet = await startTestDevnet({ port: foreign.port, wallets: 2, months: 2 });
    cleanup.push(devnet.stop);
    expect(devnet.anvil.port).not.toBe(foreign.port);
    expect(devnet.manifest.chainId).toBe(42220);
    expect(await chainIdAt(devnet.manifest.rpcUrl)).toBe(42220);
    expect(devnet.manifest.rpcUrl).not.toContain(`:${foreign.port}`);

    // The foreign chain: same chain id, same head, nothing deployed or sent from the deployer.
    expect(await chainIdAt(foreign.rpcUrl)).toBe(31337);
    expect(await rpc(foreign.rpcUrl, "eth_blockNumber")).toBe(blockBefore);
    expect(
      await rpc(foreign.rpcUrl, "eth_getTransactionCount", ["0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266", "latest"]),
    ).toBe(nonceBefore);
    expect(await rpc(foreign.rpcUrl, "eth_getCode", [devnet.manifest.tokens.USDT.address, "latest"])).toBe("0x");
  }, 180_000);

  it("does not adopt a leftover devnet (chain 42220) either: the preferred port is refused before anything starts", async () => {
    const leftover = await startAnvil();
    cleanup.push(leftover.stop);
    await expect(startAnvil({ port: leftover.port })).rejects.toBeInstanceOf(PortTakenError);
    expect(await chainIdAt(leftover.rpcUrl)).toBe(42220);
  });
});

type Run = {
  child: ChildProcess;
  output: () => string;
  devnetPort: number;
  apiPort: number;
  exited: Promise<number | null>;
};

/** `npm start` on a small devnet, in its own process group (as a terminal would start it). */
async function npmStart(extraEnv: Record<string, string> = {}): Promise<Run> {
  const dir = mkdtempSync(join(tmpdir(), "start-"));
  const devnetPort = await freePort();
  const apiPort = await freePort();
  const child = spawn("npm", ["start"], {
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      DEVNET_PORT: String(devnetPort),
      PORT: String(apiPort),
      DATA_PORT: String(await freePort()),
      DEVNET_WALLETS: "0",
      DEVNET_MANIFEST: join(dir, "manifest.json"),
      PGLITE_DIR: join(dir, "pglite"),
      DATABASE_URL: "",
      PONDER_RPC_URL_42220: "",
      // info: the launcher's progress lines (JSON, as stdout is not a terminal) are at info.
      LOG_LEVEL: "info",
      ...extraEnv,
      PONDER_LOG_LEVEL: "warn",
    },
  });
  let output = "";
  child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, output: () => output, devnetPort, apiPort, exited };
}

async function until(what: string, check: () => Promise<boolean> | boolean, run: Run, ms: number) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return;
    if (run.child.exitCode !== null) throw new Error(`npm start exited before ${what}:\n${run.output()}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`no ${what} within ${ms} ms:\n${run.output().slice(-3000)}`);
}

/** Processes left in a process group. Zombies are gone but for their exit status, which init collects when it gets to it. */
const groupMembers = (pgid: number) => {
  try {
    const rows = execFileSync("ps", ["-o", "stat=,pid=,args=", "-g", String(pgid)], { encoding: "utf8" })
      .trim()
      .split("\n");
    return rows.filter((row) => !row.startsWith("Z")).join("\n");
  } catch {
    return ""; // ps exits 1 when the group is empty
  }
};

/**
 * How long a test waits for what a launcher stops to be gone. The launcher's promise is 15 s (its
 * own deadline, STOP_WITHIN_MS, kills what is left): a loaded machine can stretch that by a second
 * or two, so the time is not asserted, only that everything goes (a stuck ponder, which no SIGTERM
 * reaches, goes only when that deadline kills it).
 */
const GONE_WAIT_MS = 60_000;

/** Everything is gone: npm, the launcher, ponder (its own group) and anvil (its own group, holding the devnet port). */
async function expectAllGone(run: Run) {
  const started = Date.now();
  await Promise.race([run.exited, new Promise((r) => setTimeout(r, GONE_WAIT_MS))]);
  const pgid = run.child.pid!;
  while (Date.now() - started < GONE_WAIT_MS && (groupMembers(pgid) || (await isListening(run.devnetPort))))
    await new Promise((r) => setTimeout(r, 200));
  expect(run.child.exitCode !== null || run.child.signalCode !== null, "npm exited").toBe(true);
  expect(groupMembers(pgid), "processes left in npm start's group").toBe("");
  expect(await chainIdAt(`http://127.0.0.1:${run.devnetPort}`), "anvil still answers").toBeNull();
  expect(await isListening(run.devnetPort), "devnet port still listened on").toBe(false);
  expect(await isListening(run.apiPort), "API port still listened on").toBe(false);
}

/**
 * Progress off a terminal: JSON lines shaped like the request log, for the seeding (days of
 * history, transfers) and the backfill (blocks, events), each from its first update to a last
 * "done" line, the seeding's before the devnet's summary and the backfill's before "Service ready".
 */
function expectProgressLines(output: string) {
  const lines = output.split("\n");
  const progress = (task: string) =>
    lines.flatMap((line, at) =>
      line.startsWith("{") && line.includes(`"progress":"${task}"`) ? [{ at, ...JSON.parse(line) }] : [],
    );
  for (const [task, unit, before] of [
    ["seeding", "days", "Devnet ready"],
    ["backfill", "blocks", "Service ready on"],
  ] as const) {
    const seen = progress(task);
    expect(seen.length, `${task} lines in:\n${output}`).toBeGreaterThanOrEqual(2);
    expect(seen[0]).toMatchObject({ level: 30, service: "celo-wallet-reputation", unit, finished: false });
    const last = seen.at(-1)!;
    expect(last).toMatchObject({ unit, finished: true, percent: 100, etaSeconds: 0 });
    expect(last.msg).toMatch(new RegExp(`^${task[0]!.toUpperCase()}${task.slice(1)}: done, `));
    expect(last.total).toBeGreaterThan(0);
    expect(last.at).toBeLessThan(lines.findIndex((line) => line.startsWith(before)));
  }
  expect(progress("seeding").at(-1)!.transfers).toBeGreaterThan(0);
  expect(progress("backfill").at(-1)!.events).toBeGreaterThan(0); // Ponder's count, from the data listener's /metrics
}

/** Every process below `pid`, children first seen first (ps over the whole table: ponder and anvil lead groups of their own). */
function descendants(pid: number): number[] {
  const table = execFileSync("ps", ["-e", "-o", "pid=,ppid="], { encoding: "utf8" })
    .trim()
    .split("\n")
    .map((line) => line.trim().split(/\s+/).map(Number) as [number, number]);
  const found: number[] = [];
  for (let frontier = [pid]; frontier.length > 0; ) {
    frontier = table.filter(([, parent]) => frontier.includes(parent)).map(([child]) => child);
    found.push(...frontier);
  }
  return found;
}

describe.concurrent("npm start stops everything it started", () => {
  const runs: Run[] = [];
  // A test that failed before its stop leaves the launcher's tree running: each process and its group are killed.
  afterAll(() => {
    for (const run of runs) {
      const pid = run.child.pid!;
      for (const member of [pid, ...descendants(pid)])
        for (const target of [-member, member]) {
          try {
            process.kill(target, "SIGKILL");
          } catch {
            /* gone, or not a group leader */
          }
        }
    }
  });

  it("SIGINT twice to the process group while the devnet is seeding (an impatient Ctrl-C): no process left, anvil included", async () => {
    const run = await npmStart();
    runs.push(run);
    await until(
      "anvil on the preferred port",
      async () => (await chainIdAt(`http://127.0.0.1:${run.devnetPort}`)) === 42220,
      run,
      60_000,
    );
    process.kill(-run.child.pid!, "SIGINT");
    await new Promise((r) => setTimeout(r, 100));
    // The group may already be gone after the first one (ESRCH): that is the outcome wanted, not an error.
    try {
      process.kill(-run.child.pid!, "SIGINT");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ESRCH") throw error;
    }
    await expectAllGone(run);
  }, 120_000);

  it("SIGTERM to the npm process alone once the service is ready: ponder and anvil stop, the ports are freed", async () => {
    // Two months of history: what is tested is the stop once ready, not the indexing of a long one.
    const run = await npmStart({ DEVNET_MONTHS: "2" });
    runs.push(run);
    await until(
      "the service",
      async () => (await fetch(`http://127.0.0.1:${run.apiPort}/ready`).catch(() => null))?.ok === true,
      run,
      150_000,
    );
    await until("the ready banner", () => run.output().includes("Service ready on"), run, 30_000);
    expectProgressLines(run.output());
    run.child.kill("SIGTERM");
    await expectAllGone(run);
  }, 240_000);
});

/** The pid of the child of `parent` whose command line matches. */
const childOf = (parent: number, command: RegExp) =>
  execFileSync("ps", ["-o", "pid=,args=", "--ppid", String(parent)], { encoding: "utf8" })
    .split("\n")
    .map((line) => /^\s*(\d+)\s+(.*)$/.exec(line))
    .find((m) => m && command.test(m[2]!))?.[1];

// `npm run indexer` with ponder stuck (stopped: no signal handler of its runs, as when its event
// loop is held by a query that does not return). The launcher's promise: 15 s after SIGTERM to it,
// or to its whole process group, nothing it started is left running or listening.
describe("npm run indexer leaves nothing behind when ponder is stuck", () => {
  let devnet: TestDevnet;
  const runs: { npm: number; ponder: number }[] = [];
  // Two months of history (about 1,500 transfers): the launchers only have to get ready before ponder is stopped.
  beforeAll(async () => {
    devnet = await startTestDevnet({ wallets: 2, months: 2 });
  }, 120_000);
  afterAll(async () => {
    for (const { npm, ponder } of runs) {
      for (const group of [npm, ponder]) {
        try {
          process.kill(-group, "SIGKILL");
        } catch {
          /* gone */
        }
      }
    }
    await devnet?.stop();
  });

  /** The launcher serving, its ponder stuck. */
  async function stuckIndexer(): Promise<{ indexer: Indexer; launcher: number; ponder: number; ports: number[] }> {
    const dir = mkdtempSync(join(tmpdir(), "stuck-"));
    const indexer = await startLauncher({
      DEVNET_MANIFEST: devnet.manifestPath,
      PGLITE_DIR: join(dir, "pglite"),
      IPFS_DIR: join(dir, "ipfs"),
      DATABASE_URL: "",
    });
    const deadline = Date.now() + 120_000;
    while ((await fetch(`${indexer.url}/ready`).catch(() => null))?.ok !== true) {
      if (indexer.child.exitCode !== null || Date.now() > deadline)
        throw new Error(`the indexer did not get ready:\n${indexer.output()}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    // npm runs the launcher as its own child (exec), which runs ponder.
    const launcher = Number(childOf(indexer.child.pid!, /scripts\/indexer\.ts/));
    const ponder = Number(childOf(launcher, /ponder start/));
    runs.push({ npm: indexer.child.pid!, ponder });
    process.kill(ponder, "SIGSTOP");
    return {
      indexer,
      launcher,
      ponder,
      ports: [Number(new URL(indexer.url).port), Number(new URL(indexer.dataUrl).port)],
    };
  }

  async function expectNothingLeft(npm: number, ponder: number, ports: number[], signalledAt: number) {
    const left = async () =>
      groupMembers(npm) +
      groupMembers(ponder) +
      (await Promise.all(ports.map(isListening))).map((listened, i) => (listened ? ` port ${ports[i]}` : "")).join("");
    while ((await left()) && Date.now() - signalledAt < GONE_WAIT_MS) await new Promise((r) => setTimeout(r, 200));
    expect(await left(), "left running or listening").toBe("");
  }

  // Both at once: each waits out the launcher's deadline, which is most of their time.
  it("SIGTERM to the process group with the launcher slow to take it, or to npm alone: ponder's group is killed, the ports freed", async () => {
    const [group, alone] = await Promise.all([stuckIndexer(), stuckIndexer()]);
    await Promise.all([
      (async () => {
        // A launcher slow to take the signal (a loaded machine): the tsx CLI's wrapper SIGKILLed it
        // then, before it could kill ponder. The launcher now runs as npm's own child.
        process.kill(group.launcher, "SIGSTOP");
        const signalledAt = Date.now();
        process.kill(-group.indexer.child.pid!, "SIGTERM");
        await new Promise((r) => setTimeout(r, 200));
        process.kill(group.launcher, "SIGCONT");
        await expectNothingLeft(group.indexer.child.pid!, group.ponder, group.ports, signalledAt);
      })(),
      (async () => {
        const signalledAt = Date.now();
        alone.indexer.child.kill("SIGTERM");
        await expectNothingLeft(alone.indexer.child.pid!, alone.ponder, alone.ports, signalledAt);
      })(),
    ]);
  }, 180_000);
});
