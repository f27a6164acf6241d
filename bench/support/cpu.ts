import { readdirSync, readFileSync } from "node:fs";

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ: 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** CPU time (ms) used so far by this machine's Postgres server processes, from /proc (Linux; 0 elsewhere). */
function postgresCpuMs(): number {
  let ticks = 0;
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return 0;
  }
  for (const pid of pids) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      continue; // it exited meanwhile
    }
    if (!stat.includes("(postgres)")) continue;
    // After "pid (comm) ", utime and stime are the 12th and 13th fields.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    ticks += Number(fields[11]) + Number(fields[12]);
  }
  return (ticks * 1000) / TICKS_PER_SECOND;
}

/** Where the CPU of `calls` calls went: this process (client and app) and the Postgres server, ms per call. */
export async function cpuPerCall<T>(
  calls: number,
  run: () => Promise<T>,
): Promise<{ result: T; processMs: number; postgresMs: number }> {
  const process0 = process.cpuUsage();
  const postgres0 = postgresCpuMs();
  const result = await run();
  const used = process.cpuUsage(process0);
  return {
    result,
    processMs: (used.user + used.system) / 1000 / calls,
    postgresMs: (postgresCpuMs() - postgres0) / calls,
  };
}
