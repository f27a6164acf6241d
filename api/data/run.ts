import { is, TransactionRollbackError } from "drizzle-orm";
import type { PGlite } from "@electric-sql/pglite";
import { drizzle } from "drizzle-orm/node-postgres";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import pg from "pg";
import { ApiError } from "../http/errors.ts";

export type DataQuery = { sql: string; params: unknown[] };
export type DataResult = { rows: Record<string, unknown>[]; fields: { name: string; dataTypeID: number }[] };
export type DataLimits = { timeoutMs: number; maxRows: number };

type Session = { prepareQuery: (query: DataQuery, fields: undefined, name: undefined, arrayMode: false) => { execute: () => Promise<DataResult> } };
type Tx = { _: { session: Session }; rollback: () => never };
/** A drizzle database on one connection: the PGlite instance, or a client of the listener's pool. */
type Connection = { transaction: (fn: (tx: Tx) => Promise<void>, config: { accessMode: "read only" }) => Promise<void> };

export type DataExecutor = {
  dialect: "pglite" | "postgres";
  /** Runs `fn` on a connection, then drops any advisory lock a query took there (they outlive a ROLLBACK). */
  withConnection: <T>(fn: (db: Connection) => Promise<T>) => Promise<T>;
  close: () => Promise<void>;
};

const UNLOCK_ALL = "select pg_advisory_unlock_all()";

/**
 * PGlite: the one session there is, Ponder's. Ponder's own `db.transaction` there runs its callback
 * without a transaction (each statement autocommits; ponder/dist/esm/database/queryBuilder.js), so
 * ours is opened on the PGlite instance, through a drizzle of its own. PGlite's `transaction()`
 * holds PGlite's transaction mutex from BEGIN to ROLLBACK, and every statement of Ponder's waits on
 * that mutex: none runs inside ours, and ours never opens inside one of Ponder's (its only raw
 * BEGIN, in the sync-store migrations, runs before the API module loads). The indexer and the API
 * wait while a data query runs.
 */
export function pgliteExecutor(client: PGlite): DataExecutor {
  const connection = drizzlePglite(client) as unknown as Connection;
  return {
    dialect: "pglite",
    withConnection: async (fn) => {
      try {
        return await fn(connection);
      } finally {
        await client.query(UNLOCK_ALL);
      }
    },
    close: async () => {},
  };
}

/** Connections of the listener's own pool on Postgres: a heavy query never takes the API's or the indexer's. */
export const DATA_POOL_SIZE = 4;

export function postgresExecutor(connectionString: string, size = DATA_POOL_SIZE): DataExecutor {
  const pool = new pg.Pool({ connectionString, max: size, application_name: "data_listener" });
  pool.on("error", (error) => console.warn(`[data] idle connection lost: ${error.message}`));
  return {
    dialect: "postgres",
    withConnection: async (fn) => {
      const client = await pool.connect();
      let broken: Error | undefined;
      try {
        return await fn(drizzle(client) as unknown as Connection);
      } finally {
        await client.query(UNLOCK_ALL).catch((error: Error) => (broken = error));
        client.release(broken); // one that may still hold a lock is closed, not pooled
      }
    },
    close: () => pool.end(),
  };
}

/**
 * PGlite runs a query on the process's one thread and ignores statement_timeout (measured on 0.2.13:
 * a cross join with a 1 s timeout ran 18 s, the event loop blocked throughout), so nothing can cut
 * a query off once it runs. What the planner prices above 10 cost units per ms of the timeout (the
 * slowest rate measured for plain scans, sorts and joins) is refused before it starts. An estimate,
 * not a bound: a correlated subquery the planner prices low can still run long (docs/data.md).
 */
const PGLITE_COST_PER_MS = 10;

/**
 * Runs one data query read-only with the listener's limits: in a READ ONLY transaction that always
 * ends in ROLLBACK, as a cursor (which takes only a SELECT or VALUES: no COPY, SET, second
 * statement or data-modifying CTE), fetching at most one row past `maxRows`, under a statement
 * timeout on Postgres. The guard (api/data/guard.ts) has refused writes already; this is where the
 * database refuses them if a query ever got past it.
 *
 * Unqualified names resolve in `namespace`, the indexer's schema, with `pg_temp` searched last: on
 * PGlite the session is Ponder's, where its indexing store keeps TEMP tables named like the real ones
 * (`transfer`, `flow`: buffers for its batched updates), which Postgres otherwise searches first
 * (Ponder issue #2235). Ponder's own statements need them found first, so only this transaction's
 * search_path changes (SET LOCAL).
 */
export function readOnlyRunner(executor: DataExecutor, options: { namespace: string; limits: DataLimits }) {
  const { timeoutMs, maxRows } = options.limits;
  const searchPath = `"${options.namespace.replace(/"/g, '""')}", pg_temp`;
  return (query: DataQuery): Promise<DataResult> =>
    executor.withConnection(async (db) => {
      let result: DataResult | undefined;
      try {
        await db.transaction(
          async (tx) => {
            const exec = (sql: string, params: unknown[] = []) => tx._.session.prepareQuery({ sql, params }, undefined, undefined, false).execute();
            await exec(`set local search_path = ${searchPath}`);
            if (executor.dialect === "postgres") await exec(`set local statement_timeout = ${timeoutMs}`);
            else await refuseCostly(exec, query, timeoutMs * PGLITE_COST_PER_MS);
            await exec(`declare data_query no scroll cursor for ${query.sql}`, query.params);
            result = await exec(`fetch forward ${maxRows + 1} from data_query`);
            tx.rollback(); // what a function may have set in the transaction (set_config) is undone too
          },
          { accessMode: "read only" },
        );
      } catch (error) {
        if (!is(error, TransactionRollbackError)) throw asDataError(error);
      }
      const { rows, fields } = result!;
      if (rows.length > maxRows) throw new ApiError(413, "too_many_rows", `The query returns more than ${maxRows} rows (DATA_QUERY_MAX_ROWS): add a limit, or page through it.`);
      return { rows, fields: fields.map(({ name, dataTypeID }) => ({ name, dataTypeID })) };
    });
}

type Exec = (sql: string, params?: unknown[]) => Promise<DataResult>;

async function refuseCostly(exec: Exec, query: DataQuery, budget: number): Promise<void> {
  // PGlite 0.2 runs with enable_seqscan off, which prices every sequential scan at 1e10 more:
  // plan (and run) the data query as stock Postgres would.
  await exec("set local enable_seqscan = on");
  const { rows } = await exec(`explain (format json) ${query.sql}`, query.params);
  const cost = (rows[0]!["QUERY PLAN"] as { Plan: { "Total Cost": number } }[])[0]!.Plan["Total Cost"];
  if (cost > budget)
    throw new ApiError(400, "query_too_expensive", `On PGlite a running query cannot be cut off, and the planner prices this one at ${Math.round(cost)}, over ${budget} (10 per ms of DATA_QUERY_TIMEOUT_MS): narrow it (a wallet, a block range, a limit).`);
}

/** A database error as the client's (JSON 4xx) when the query caused it; the database's own trouble stays a 500. */
export function asDataError(error: unknown): unknown {
  if (error instanceof ApiError) return error;
  const { code, message } = error as { code?: unknown; message?: string };
  if (typeof code !== "string" || !/^[0-9A-Z]{5}$/.test(code)) return error;
  const details = { sqlstate: code };
  if (code === "57014") return new ApiError(400, "query_timeout", "The query ran past the statement timeout (DATA_QUERY_TIMEOUT_MS) and was cancelled.", details);
  if (code === "25006") return new ApiError(400, "read_only", `The database refused a write: ${message}.`, details);
  if (code === "42501" || code === "0A000") return new ApiError(400, "query_not_allowed", `${message}.`, details);
  if (/^(08|53|57|58|XX)/.test(code)) return error; // connection, resources, shutdown, system
  return new ApiError(400, "query_error", `${message}.`, details);
}
