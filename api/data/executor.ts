import type { PGlite } from "@electric-sql/pglite";
import pg from "pg";

export type DataResult = { rows: Record<string, unknown>[]; fields: { name: string; dataTypeID: number }[] };

/**
 * Runs one statement of a data query's transaction. One only: both drivers send it by the extended
 * protocol, which refuses a second (a `select 1; commit; update …` would otherwise end the READ ONLY
 * transaction and write after it).
 */
export type Exec = (sql: string, params?: unknown[]) => Promise<DataResult>;

export type DataExecutor = {
  dialect: "pglite" | "postgres";
  /**
   * Runs `fn` in a READ ONLY transaction that always ends in ROLLBACK (what a function may have set
   * in it is undone too), then releases the advisory locks its queries took (those outlive a ROLLBACK).
   */
  readOnly: <T>(fn: (exec: Exec) => Promise<T>) => Promise<T>;
  close: () => Promise<void>;
};

const UNLOCK_ALL = "select pg_advisory_unlock_all()";

/** Dates, times, intervals and numeric[] as the text Postgres writes, as drizzle (and so Ponder's own SQL over HTTP) reads them. */
const TEXT_TYPES = [1082, 1114, 1184, 1186, 1231, 1115, 1185, 1187, 1182];

/**
 * PGlite: the one session there is, Ponder's. Ponder opens no transactions on PGlite (its
 * `db.transaction` there runs each statement on its own: ponder/dist/esm/database/queryBuilder.js).
 * PGlite's `transaction()` holds its transaction mutex from BEGIN to ROLLBACK and each of Ponder's
 * statements waits on that mutex, so none runs inside ours, and ours never opens inside one of
 * Ponder's (its one raw BEGIN, in the sync-store migrations, runs before the API module loads). The
 * indexer and the API wait while a data query runs.
 */
export function pgliteExecutor(client: PGlite): DataExecutor {
  const options = {
    rowMode: "object" as const,
    parsers: Object.fromEntries(TEXT_TYPES.map((oid) => [oid, (value: string) => value])),
  };
  return {
    dialect: "pglite",
    readOnly: async (fn) => {
      try {
        // PGlite types the result `T | undefined`; this callback always returns one.
        return (await client.transaction(async (tx) => {
          await tx.query("set transaction read only");
          const result = await fn(async (sql, params = []) => {
            const { rows, fields } = await tx.query<Record<string, unknown>>(sql, params, options);
            return { rows, fields };
          });
          await tx.rollback();
          return result;
        }))!;
      } finally {
        await client.query(UNLOCK_ALL);
      }
    },
    close: async () => {},
  };
}

/** Connections of the listener's own pool on Postgres: a heavy query never takes the API's or the indexer's. */
const DATA_POOL_SIZE = 4;

export function postgresExecutor(connectionString: string, size = DATA_POOL_SIZE): DataExecutor {
  const pool = new pg.Pool({ connectionString, max: size, application_name: "data_listener" });
  pool.on("error", (error) => console.warn(`[data] idle connection lost: ${error.message}`));
  const text = new Set(TEXT_TYPES);
  const types = {
    getTypeParser: (oid: number, format?: "text" | "binary") =>
      text.has(oid) ? (value: string) => value : pg.types.getTypeParser(oid, format),
  };
  return {
    dialect: "postgres",
    readOnly: async (fn) => {
      const client = await pool.connect();
      let broken: Error | undefined;
      const end = async (sql: string) =>
        void (broken ?? (await client.query(sql).catch((error: Error) => (broken = error))));
      try {
        await client.query("begin read only");
        return await fn(async (sql, values = []) => {
          const { rows, fields } = await client.query({
            text: sql,
            values,
            types,
            queryMode: "extended",
          } as pg.QueryConfig);
          return { rows, fields: fields.map(({ name, dataTypeID }) => ({ name, dataTypeID })) };
        });
      } finally {
        await end("rollback");
        await end(UNLOCK_ALL);
        client.release(broken); // a connection that could not end its transaction or drop its locks is closed, not pooled
      }
    },
    close: () => pool.end(),
  };
}
