import pg from "pg";

/** Ponder 0.17 and the service store need this Postgres major version or newer. */
export const MIN_POSTGRES_MAJOR = 14;

/**
 * The server at `connectionString`: its version (e.g. { major: 15, version: "15.8 (Debian
 * 15.8-0+deb12u1)" }) and whether autovacuum runs, or why it cannot be reached.
 */
export async function probePostgres(
  connectionString: string,
  timeoutMs: number,
): Promise<{ major: number; version: string; autovacuum: boolean } | { failure: string }> {
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  // A connection lost after connect() emits "error" on the client: without a listener it would crash the process.
  client.on("error", () => {});
  try {
    await client.connect();
    const { rows } = await client.query<{ num: string; version: string; autovacuum: string }>(
      "select current_setting('server_version_num') as num, current_setting('server_version') as version, current_setting('autovacuum') as autovacuum",
    );
    const [row] = rows;
    return {
      major: Math.floor(Number(row!.num) / 10_000),
      version: row!.version,
      autovacuum: row!.autovacuum === "on",
    };
  } catch (error) {
    const { code, message } = error as { code?: string; message?: string };
    return { failure: message || code || String(error) };
  } finally {
    await client.end().catch(() => {});
  }
}
