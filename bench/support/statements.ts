import pg from "pg";

type StatementRow = { calls: string; ms: string; hits: string; wal: string; query: string };

/**
 * Where Postgres's time went during one run, statement by statement (pg_stat_statements): what
 * the whole-server CPU figure cannot say. For the statements run in the database of
 * `connectionString` only, read from its server's `postgres` database; needs the server to preload
 * the module (shared_preload_libraries = 'pg_stat_statements', then a restart), and says so without it.
 */
export async function statementsOf(connectionString: string) {
  const url = new URL(connectionString);
  const database = decodeURIComponent(url.pathname.slice(1));
  url.pathname = "/postgres";
  const client = new pg.Client({ connectionString: url.toString() });
  try {
    await client.connect();
    await client.query("create extension if not exists pg_stat_statements");
    await client.query("select pg_stat_statements_reset()");
  } catch (error) {
    await client.end().catch(() => {});
    const why = String((error as Error).message ?? error).split("\n")[0];
    return { report: async () => `Postgres statements: not measured (${why}; preload pg_stat_statements to see them)` };
  }
  return {
    /** The run's statements by their share of its time, per call of the run (`calls` of them). */
    async report(title: string, calls: number, top = 12): Promise<string> {
      try {
        const { rows } = await client.query<StatementRow>(
          `select calls::text, total_exec_time::text as ms, (shared_blks_hit + shared_blks_read)::text as hits,
                  wal_bytes::text as wal, regexp_replace(query, '\\s+', ' ', 'g') as query
           from pg_stat_statements where dbid = (select oid from pg_database where datname = $1)
           order by total_exec_time desc`,
          [database],
        );
        const total = rows.reduce((sum, r) => sum + Number(r.ms), 0);
        const lines = rows.slice(0, top).map((r) => {
          const runs = Number(r.calls);
          const perCall = (1000 * Number(r.ms)) / calls;
          return `  ${((100 * Number(r.ms)) / total).toFixed(1).padStart(5)}%  ${perCall.toFixed(0).padStart(5)} us/call  ${(runs / calls).toFixed(2).padStart(5)} runs/call  ${(Number(r.hits) / runs).toFixed(0).padStart(5)} buffers/run  ${(Number(r.wal) / calls / 1024).toFixed(1)} kB log/call  ${r.query.slice(0, 110)}`;
        });
        return [
          `Postgres statements of ${title} (pg_stat_statements; time includes waits for locks), ${((1000 * total) / calls).toFixed(0)} us per call in all:`,
          ...lines,
        ].join("\n");
      } finally {
        await client.end();
      }
    },
  };
}
