import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { machineMs, processTimes } from "./support/cpu.ts";
import { log } from "./support/figures.ts";

// npm run bench:suite [-- <npm test arguments>]: runs the suite (npm test, its static checks off
// unless STATIC_CHECKS says otherwise) and says where its CPU went, by kind of process: the
// Ponder processes the tests start, vitest's workers (the tests themselves, PGlite in them), the
// devnets (anvil), Postgres, the browser, the scripts run through tsx. On two cores the suite is
// CPU-bound: its time only falls when one of these does (issue 23).
// Every process's CPU is read from /proc every SAMPLE_MS: a process that lives less than that is
// missed, and one that exits loses at most that much; the machine's total (/proc/stat) is exact,
// and the figures say how much of it they account for.

const SAMPLE_MS = 500;

type Seen = { command: string; firstMs: number; lastMs: number; baseMs: number };

/** What a process is, from its command line (a node process's comm is only "node" or "MainThread"). */
function kindOf(comm: string, command: string): string {
  if (comm === "postgres") return "Postgres server";
  // Ponder's and tsx's TypeScript transforms run in an esbuild service process beside each.
  if (comm === "esbuild") return "esbuild (the TypeScript transforms of Ponder and tsx)";
  if (/(^|\/)npm(-cli\.js)?\s/.test(command)) return "npm (npm test, npm run, npm start)";
  if (/\bponder\b.*\bserve\b/.test(command)) return "Ponder replicas (ponder serve)";
  if (/\bponder\b/.test(command)) return "Ponder indexers (ponder start)";
  if (/vitest/.test(command)) return "vitest (its workers run the tests, PGlite in them)";
  if (/\banvil\b/.test(command)) return "anvil (devnets)";
  if (/chromium/.test(command)) return "Chromium (browser tests)";
  if (/\btsx\b/.test(command)) return "tsx scripts (launchers, tools)";
  return "other (shells, the kernel, services)";
}

const commandOf = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim();
  } catch {
    return "";
  }
};

/** One core's speed: 1e9 additions, seconds (the same loop as the notes quote). */
function probe(): number {
  const start = performance.now();
  let sum = 0;
  for (let i = 0; i < 1e9; i++) sum += i;
  if (sum < 0) throw new Error("unreachable");
  return (performance.now() - start) / 1000;
}

const seen = new Map<number, Seen & { comm: string; cpuMs: number }>();
const sample = (initial: boolean) => {
  const now = performance.now();
  for (const p of processTimes()) {
    if (p.pid === process.pid) continue; // this benchmark's own sampling
    const known = seen.get(p.pid);
    if (!known) {
      // Processes already running when the run starts count from there (Postgres, services).
      const command = commandOf(p.pid);
      seen.set(p.pid, { ...p, command, firstMs: now, lastMs: now, baseMs: initial ? p.cpuMs : 0 });
      continue;
    }
    known.lastMs = now;
    known.cpuMs = Math.max(known.cpuMs, p.cpuMs);
    // `sh -c ... && exec node ...`: the command that ran longest is the last one seen.
    if (known.command === "" || known.comm !== p.comm) known.command = commandOf(p.pid) || known.command;
    known.comm = p.comm;
  }
};

const speed = probe();
log(`one core: 1e9 additions in ${speed.toFixed(2)} s`);
const args = process.argv.slice(2);
log(`npm test ${args.join(" ")}`);
sample(true);
const machine0 = machineMs();
const started = performance.now();
const timer = setInterval(() => sample(false), SAMPLE_MS);
const child = spawn("npm", ["test", "--", ...args], {
  stdio: "inherit",
  env: { ...process.env, STATIC_CHECKS: process.env.STATIC_CHECKS ?? "off" },
});
const code: number = await new Promise((resolve) => child.on("exit", (c) => resolve(c ?? 1)));
clearInterval(timer);
sample(false);
const wallS = (performance.now() - started) / 1000;
const machine = machineMs();
const machineS = (machine.busy - machine0.busy) / 1000;
const stolen = (machine.stolen - machine0.stolen) / Math.max(1, machine.all - machine0.all);

const kinds = new Map<string, number[]>();
for (const p of seen.values()) {
  const used = (p.cpuMs - p.baseMs) / 1000;
  if (used <= 0) continue;
  const kind = kindOf(p.comm, p.command);
  kinds.set(kind, [...(kinds.get(kind) ?? []), used]);
}
const attributed = [...kinds.values()].flat().reduce((a, b) => a + b, 0);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

console.log(`
Suite benchmark: npm test ${args.join(" ")} exited ${code}
  wall ${wallS.toFixed(0)} s; the machine's cores busy ${machineS.toFixed(0)} CPU-s (${((100 * machineS) / wallS).toFixed(0)}% of one core; ${(100 * stolen).toFixed(0)}% of their time stolen by the hypervisor); one core ran 1e9 additions in ${speed.toFixed(2)} s
  by kind of process (sampled every ${SAMPLE_MS} ms: ${attributed.toFixed(0)} of the machine's ${machineS.toFixed(0)} CPU-s):`);
for (const [kind, used] of [...kinds].sort((a, b) => sum(b[1]) - sum(a[1]))) {
  const total = sum(used);
  console.log(
    `    ${total.toFixed(0).padStart(6)} CPU-s ${((100 * total) / machineS).toFixed(0).padStart(3)}%  ${String(used.length).padStart(5)} processes  median ${median(used).toFixed(1).padStart(5)} s  max ${Math.max(
      ...used,
    )
      .toFixed(1)
      .padStart(5)} s  ${kind}`,
  );
}
process.exitCode = code;

function sum(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}
