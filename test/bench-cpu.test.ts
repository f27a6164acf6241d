import { existsSync } from "node:fs";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { postgresCpuMs, processTimes } from "../bench/support/cpu.ts";
import { POSTGRES_URL, waitFor } from "../harness/indexer.ts";

// bench:payments prints Postgres's CPU per call from these figures: a backend that exits during a
// run (a pool closing an idle connection) must not take its time with it. The server's processes
// are read from this machine's /proc: the default test server's, not one TEST_POSTGRES_URL names.
describe.runIf(existsSync("/proc/self/stat") && !process.env.TEST_POSTGRES_URL)("bench CPU accounting", () => {
  it("keeps the CPU time of a Postgres backend that exited", async () => {
    const before = postgresCpuMs();
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    let backend: number;
    let used: number;
    try {
      const { rows } = await client.query<{ pid: number }>("select pg_backend_pid() as pid");
      backend = rows[0]!.pid;
      await client.query("select count(*) from generate_series(1, 3000000)");
      used = processTimes().find((p) => p.pid === backend)!.cpuMs;
    } finally {
      await client.end();
    }
    expect(used).toBeGreaterThan(0);
    // Until the postmaster has reaped it: its time moves from the backend to the postmaster's children.
    await waitFor(
      "the backend's exit",
      async () => (existsSync(`/proc/${backend}`) ? undefined : true),
      undefined,
      5_000,
    );
    expect(existsSync(`/proc/${backend}`)).toBe(false);
    expect(postgresCpuMs() - before).toBeGreaterThanOrEqual(used);
  });
});
