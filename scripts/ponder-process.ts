import { type ChildProcess, spawn } from "node:child_process";
import { ponderProcessEnv } from "../api/host/ponder-process.ts";
import { StartupError } from "../config/errors.ts";
import type { IndexTarget } from "../config/target.ts";
import { killOnExit, signalChildGroups } from "../devnet/anvil.ts";
import { sleep } from "../shared/async.ts";
import { ponderArgs } from "./ponder-command.ts";

/** The `ponder start` child of this launcher while it runs: launch() signals its process group. */
let ponder: ChildProcess | undefined;

/**
 * Runs `ponder start` (indexer + API), forwarding SIGINT/SIGTERM (through launch()), and resolves with its exit code.
 * Call `preflight()` first: Ponder itself retries a dead RPC forever instead of saying so.
 */
export async function runPonder(
  target: IndexTarget,
  options: {
    port: number;
    env?: NodeJS.ProcessEnv;
    onReady?: () => void;
    /** Each answer of the service's /ready (where indexing stands) until it is 200, every 500 ms. */
    onStatus?: (status: unknown) => void;
    /** Ponder's stdout goes here instead of to this process's (a progress bar is drawn between its lines). */
    stdout?: (chunk: Buffer) => void;
  },
): Promise<number> {
  const env = ponderProcessEnv({ ...process.env, ...options.env });
  // A process group of its own, signalled by this launcher alone and killed whole, with whatever
  // ponder started. No stdin: ponder resets a terminal's mode as it exits, and a process outside
  // the terminal's foreground group that tries is stopped (SIGTTOU).
  const child = spawn("ponder", ponderArgs("start", target.schema, options.port, env), {
    detached: true,
    stdio: ["ignore", options.stdout ? "pipe" : "inherit", "inherit"],
    // Piped to a terminal in the end: Ponder keeps its colours.
    env: options.stdout ? { FORCE_COLOR: "1", ...env } : env,
  });
  if (options.stdout) child.stdout!.on("data", options.stdout);
  // Killed with its group if this process ends first; signalChildGroups() reaches it.
  killOnExit(child);
  ponder = child;
  child.once("exit", () => {
    if (ponder === child) ponder = undefined;
    signalGroup(child, "SIGKILL"); // whatever it started and left behind
  });
  if (options.onReady || options.onStatus)
    void waitReady(options.port, child, env.HOST?.trim(), options.onStatus).then(
      (ready) => ready && options.onReady?.(),
    );
  return new Promise((resolve, reject) => {
    child.on("error", (error) =>
      reject(new StartupError(`Could not start ponder: ${error.message}. Run \`npm install\` first.`)),
    );
    child.on("exit", (code, signal) => resolve(code ?? (signal ? 0 : 1)));
  });
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    /* the group is gone */
  }
}

/** A bind address as this machine reaches it: an unspecified one (every interface) on loopback. */
export const reachableHost = (host?: string) =>
  !host || host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;

async function waitReady(
  port: number,
  child: { exitCode: number | null },
  host?: string,
  onStatus?: (status: unknown) => void,
): Promise<boolean> {
  while (child.exitCode === null) {
    try {
      const res = await fetch(`http://${reachableHost(host)}:${port}/ready`);
      onStatus?.(await res.json().catch(() => undefined));
      if (res.ok) return true;
    } catch {
      /* not listening yet */
    }
    await sleep(500);
  }
  return false;
}

/** After the first SIGINT/SIGTERM, everything is gone within this long (Ponder drains paid requests for up to 15 s; the budget is 15 s in all). */
export const STOP_WITHIN_MS = 13_000;
/** After a second signal (an impatient Ctrl-C), this long. */
export const STOP_AGAIN_WITHIN_MS = 3_000;
/** A signal this soon after the first is the same one: a signal to npm's process group reaches this process from the terminal and again from npm. */
const SAME_SIGNAL_MS = 1_000;

/**
 * Stops cleanly on SIGINT/SIGTERM, whether they come to this process alone (`npm start`'s npm
 * forwards them) or to its whole process group (Ctrl-C). While Ponder runs, the signal goes to its
 * group (only this process signals it): it finishes the requests in flight and exits, then the
 * launcher stops the devnet and exits. Before that (the devnet is starting or seeding), the
 * launcher's children are stopped at once. Whatever is still running STOP_WITHIN_MS after the
 * first signal, or STOP_AGAIN_WITHIN_MS after a second one, is killed with its process group
 * (ponder and anvil run in their own) before this process exits. Run it as npm's own child
 * (`node --import tsx`): the tsx CLI's wrapper SIGKILLs a child slow to report a signal, which
 * left ponder running.
 */
function stopOnSignals(): void {
  let deadline: NodeJS.Timeout | undefined;
  let firstAt = 0;
  const killEverything = (code: number) => {
    signalChildGroups("SIGKILL");
    process.exit(code);
  };
  const onSignal = (signal: NodeJS.Signals) => {
    const code = 128 + (signal === "SIGINT" ? 2 : 15);
    if (!ponder) {
      console.log(`${signal}: stopping the devnet`);
      signalChildGroups("SIGTERM");
      setTimeout(() => killEverything(code), 500).unref();
      return;
    }
    if (!deadline) firstAt = Date.now();
    else if (Date.now() - firstAt < SAME_SIGNAL_MS) return;
    signalGroup(ponder, signal);
    const within = deadline ? STOP_AGAIN_WITHIN_MS : STOP_WITHIN_MS;
    clearTimeout(deadline);
    deadline = setTimeout(() => killEverything(code), within);
    deadline.unref();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  process.on("SIGHUP", onSignal);
  // Whatever way this process ends, its children's groups go with it.
  process.once("exit", () => signalChildGroups("SIGKILL"));
}

/** Runs a launcher: a StartupError prints as one line and exits 1; anything else is a real crash. */
export async function launch(main: () => Promise<number>): Promise<never> {
  stopOnSignals();
  try {
    process.exit(await main());
  } catch (error) {
    if (error instanceof StartupError) {
      console.error(`Cannot start: ${error.message}`);
      process.exit(error.exitCode);
    }
    throw error;
  }
}
