import { readdirSync, readFileSync } from "node:fs";

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ: 100 on Linux). */
const TICKS_PER_SECOND = 100;

/**
 * A process as /proc shows it: its pid, its parent's, its command name, the CPU time (ms) it has
 * used so far, and that of its children that exited and were waited for (reapedMs).
 */
export type ProcessTimes = { pid: number; ppid: number; comm: string; cpuMs: number; reapedMs: number };

/** Every process of this machine with its CPU time so far, from /proc (Linux; none elsewhere). */
export function processTimes(): ProcessTimes[] {
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  const all: ProcessTimes[] = [];
  for (const pid of pids) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      continue; // it exited meanwhile
    }
    // After "pid (comm) ": ppid is the 2nd field; utime, stime, cutime and cstime the 12th to 15th.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ms = (a: number, b: number) => ((Number(fields[a]) + Number(fields[b])) * 1000) / TICKS_PER_SECOND;
    all.push({
      pid: Number(pid),
      ppid: Number(fields[1]),
      comm: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")),
      cpuMs: ms(11, 12),
      reapedMs: ms(13, 14),
    });
  }
  return all;
}

/**
 * CPU time (ms) used so far by this machine's Postgres server processes, those that exited
 * included: a backend whose connection closed during a run (a pool's idle one) leaves the live
 * sum, and its time goes to its postmaster's children's (without it, a run's figure could come
 * out below zero).
 */
export function postgresCpuMs(): number {
  const postgres = processTimes().filter((p) => p.comm === "postgres");
  const pids = new Set(postgres.map((p) => p.pid));
  return postgres.reduce((sum, p) => sum + p.cpuMs + (pids.has(p.ppid) ? 0 : p.reapedMs), 0);
}

/**
 * CPU time (ms) all of this machine's cores have been busy so far, from /proc/stat (Linux; 0
 * elsewhere): besides this process and Postgres, the chain (anvil), the indexer and the kernel.
 * And the time the hypervisor ran others on them (steal): on a shared VM, what makes two runs of
 * the same code differ.
 */
export function machineMs(): { busy: number; stolen: number; all: number } {
  try {
    // user nice system idle iowait irq softirq steal guest guest_nice: the busy ones, without the
    // guest times (already in user and nice) and steal (the hypervisor's, not this machine's work).
    const times = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = times;
    const ms = (ticks: number) => (ticks * 1000) / TICKS_PER_SECOND;
    return {
      busy: ms(user + nice + system + irq + softirq),
      stolen: ms(steal),
      all: ms(user + nice + system + idle + iowait + irq + softirq + steal),
    };
  } catch {
    return { busy: 0, stolen: 0, all: 0 };
  }
}

/**
 * Where the CPU of `calls` calls went: this process (client and app), the Postgres server and the
 * whole machine, ms per call; and the share of the cores' time stolen by the hypervisor meanwhile.
 */
export async function cpuPerCall<T>(
  calls: number,
  run: () => Promise<T>,
): Promise<{
  result: T;
  processMs: number;
  /** Of processMs, the kernel's share (system calls: sockets, files): the rest is JavaScript and the engine. */
  processSystemMs: number;
  postgresMs: number;
  machineMs: number;
  stolen: number;
}> {
  const process0 = process.cpuUsage();
  const postgres0 = postgresCpuMs();
  const machine0 = machineMs();
  const result = await run();
  const used = process.cpuUsage(process0);
  const machine = machineMs();
  return {
    result,
    processMs: (used.user + used.system) / 1000 / calls,
    processSystemMs: used.system / 1000 / calls,
    postgresMs: (postgresCpuMs() - postgres0) / calls,
    machineMs: (machine.busy - machine0.busy) / calls,
    stolen: (machine.stolen - machine0.stolen) / Math.max(1, machine.all - machine0.all),
  };
}
