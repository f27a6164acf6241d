import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { machineMs, processTimes } from "./support/cpu.ts";
import { log } from "./support/figures.ts";
import type { Span } from "./support/timeline-reporter.ts";

// npm run bench:suite [-- <npm test arguments>]: runs the suite (npm test, its static checks off
// unless STATIC_CHECKS says otherwise) and says where its CPU went, by kind of process: the
// Ponder processes the tests start, vitest's workers (the tests themselves, PGlite in them), the
// devnets (anvil), Postgres, the browser, the scripts run through tsx. On two cores the suite is
// CPU-bound: its time only falls when one of these does (issue 23).
// Every process's CPU is read from /proc every SAMPLE_MS: a process that lives less than that is
// missed, and one that exits loses at most that much; the machine's total (/proc/stat) is exact,
// and the figures say how much of it they account for.

const SAMPLE_MS = 500;

/**
 * A process seen during the run: its command line, its CPU (ms) when the run started and at its last
 * sample, and when it was first and last seen (seconds into the run): the idle costs of a kind of
 * process (timers, polling) scale with how long its processes live.
 */
type Seen = { comm: string; command: string; baseMs: number; cpuMs: number; firstS: number; lastS: number };

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
  let total = 0;
  for (let i = 0; i < 1e9; i++) total += i;
  if (total < 0) throw new Error("unreachable");
  return (performance.now() - start) / 1000;
}

/** How busy the machine's cores were in each WINDOW_S of the run: where a CPU-bound run still idles. */
const WINDOW_S = 30;
const windows: { busy: number; all: number }[] = [];
let lastMachine = machineMs();
const seen = new Map<number, Seen>();
const sample = (initial: boolean) => {
  const now = machineMs();
  if (!initial) {
    const window = (windows[Math.floor((performance.now() - started) / 1000 / WINDOW_S)] ??= { busy: 0, all: 0 });
    window.busy += now.busy - lastMachine.busy;
    window.all += now.all - lastMachine.all;
  }
  lastMachine = now;
  for (const p of processTimes()) {
    if (p.pid === process.pid) continue; // this benchmark's own sampling
    const known = seen.get(p.pid);
    if (!known) {
      // Processes already running when the run starts count from there (Postgres, services).
      const at = initial ? 0 : (performance.now() - started) / 1000;
      seen.set(p.pid, {
        comm: p.comm,
        command: commandOf(p.pid),
        baseMs: initial ? p.cpuMs : 0,
        cpuMs: p.cpuMs,
        firstS: at,
        lastS: at,
      });
      continue;
    }
    known.cpuMs = Math.max(known.cpuMs, p.cpuMs);
    known.lastS = (performance.now() - started) / 1000;
    // A process that exec'd (`sh -c "... && exec node ..."`) is counted as what it became; an
    // exited one (a zombie: no command line any more) keeps the one it had.
    if (known.command === "" || known.comm !== p.comm) known.command = commandOf(p.pid) || known.command;
    known.comm = p.comm;
  }
};

const speed = probe();
log(`one core: 1e9 additions in ${speed.toFixed(2)} s`);
const args = process.argv.slice(2);
log(`npm test ${args.join(" ")}`);
const started = performance.now();
const startedAt = Date.now();
sample(true);
const machine0 = machineMs();
const timer = setInterval(() => sample(false), SAMPLE_MS);
// Beside vitest's own report, when each file was queued and finished (bench/support/timeline-reporter.ts,
// read back below).
const reporters = ["--reporter=default", "--reporter=./bench/support/timeline-reporter.ts"];
const timelineFile = join(mkdtempSync(join(tmpdir(), "suite-")), "timeline.json");
const child = spawn("npm", ["test", "--", ...reporters, ...args], {
  stdio: "inherit",
  env: { ...process.env, STATIC_CHECKS: process.env.STATIC_CHECKS ?? "off", SUITE_TIMELINE_FILE: timelineFile },
});
const code: number = await new Promise((resolve) => child.on("exit", (c) => resolve(c ?? 1)));
clearInterval(timer);
sample(false);
const wallS = (performance.now() - started) / 1000;
const machine = machineMs();
const machineS = (machine.busy - machine0.busy) / 1000;
const stolen = (machine.stolen - machine0.stolen) / Math.max(1, machine.all - machine0.all);

const kinds = new Map<string, number[]>();
const lives = new Map<string, number>();
for (const p of seen.values()) {
  const used = (p.cpuMs - p.baseMs) / 1000;
  if (used <= 0) continue;
  const kind = kindOf(p.comm, p.command);
  kinds.set(kind, [...(kinds.get(kind) ?? []), used]);
  lives.set(kind, (lives.get(kind) ?? 0) + p.lastS - p.firstS);
}
const attributed = sum([...kinds.values()].flat());
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

console.log(`
Suite benchmark: npm test ${args.join(" ")} exited ${code}
  wall ${wallS.toFixed(0)} s; the machine's cores busy ${machineS.toFixed(0)} CPU-s (${((100 * machineS) / wallS).toFixed(0)}% of one core; ${(100 * stolen).toFixed(0)}% of their time stolen by the hypervisor); one core ran 1e9 additions in ${speed.toFixed(2)} s
  by kind of process (sampled every ${SAMPLE_MS} ms: ${attributed.toFixed(0)} of the machine's ${machineS.toFixed(0)} CPU-s):`);
for (const [kind, used] of [...kinds].sort((a, b) => sum(b[1]) - sum(a[1]))) {
  const total = sum(used);
  const share = `${((100 * total) / machineS).toFixed(0)}%`;
  const [mid, max] = [median(used), Math.max(...used)].map((s) => s.toFixed(1).padStart(5));
  const each = `median ${mid} s  max ${max} s  alive ${(lives.get(kind) ?? 0).toFixed(0)} s in all`;
  console.log(
    `    ${total.toFixed(0).padStart(6)} CPU-s ${share.padStart(4)}  ${String(used.length).padStart(5)} processes  ${each}  ${kind}`,
  );
}
const busyShare = (w: { busy: number; all: number } | undefined) => (w?.all ? w.busy / w.all : 1);
console.log(
  `  the cores busy in each ${WINDOW_S} s of the run: ${windows.map((w) => `${(100 * busyShare(w)).toFixed(0)}%`).join(" ")}`,
);
// Each test file from queued to finished, in seconds from the start of this run (as the windows).
const spans = (existsSync(timelineFile) ? (JSON.parse(readFileSync(timelineFile, "utf8")) as Span[]) : []).map((s) => ({
  file: s.file,
  queued: (s.queued - startedAt) / 1000,
  ended: (s.ended - startedAt) / 1000,
}));
rmSync(dirname(timelineFile), { recursive: true, force: true });
// The files running in each window whose cores were less than IDLE_BELOW busy: what they wait on is
// what a reordering or a shorter wait would give the CPU-bound run back.
const IDLE_BELOW = 0.85;
windows.forEach((w, i) => {
  if (busyShare(w) >= IDLE_BELOW) return;
  const [from, to] = [i * WINDOW_S, (i + 1) * WINDOW_S];
  const running = spans.filter((s) => s.queued < to && s.ended > from).map((s) => s.file);
  console.log(`    ${from}-${to} s (${(100 * busyShare(w)).toFixed(0)}% busy): ${running.join(", ")}`);
});
const TAIL_FILES = 8;
console.log(`  the last ${TAIL_FILES} files to finish (queued at -> finished at, seconds from the start):`);
for (const s of spans.sort((a, b) => b.ended - a.ended).slice(0, TAIL_FILES))
  console.log(`    ${s.queued.toFixed(0).padStart(5)} -> ${s.ended.toFixed(0).padStart(5)}  ${s.file}`);
process.exitCode = code;

function sum(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}
