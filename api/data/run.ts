import { ApiError } from "../../shared/errors.ts";
import type { DataExecutor, DataResult, Exec } from "./executor.ts";

export type DataQuery = { sql: string; params: unknown[] };
export type DataLimits = { timeoutMs: number; maxRows: number };

/**
 * PGlite runs a query on the process's one thread and ignores statement_timeout (measured on 0.2.13:
 * a cross join with a 1 s timeout ran 18 s, the event loop blocked throughout), so nothing can cut
 * a query off once it runs. What the planner prices above 10 cost units per ms of the timeout (the
 * slowest rate measured for plain scans, sorts and joins) is refused before it starts. An estimate,
 * not a bound: a correlated subquery the planner prices low can still run long (docs/data.md).
 */
const PGLITE_COST_PER_MS = 10;

/**
 * Runs one data query read-only with the listener's limits: in the executor's READ ONLY transaction
 * (api/data/executor.ts), as a cursor (a cursor takes a SELECT only: no data-modifying CTE, no
 * SELECT INTO), fetching at most one row past `maxRows`, under a statement timeout on Postgres. The
 * guard (api/data/guard.ts) has refused writes already; this is where the database refuses them if
 * a query ever got past it.
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
  return async (query: DataQuery): Promise<DataResult> => {
    try {
      const result = await executor.readOnly(async (exec) => {
        await exec(`set local search_path = ${searchPath}`);
        if (executor.dialect === "postgres") await exec(`set local statement_timeout = ${timeoutMs}`);
        else await refuseCostly(exec, query, timeoutMs * PGLITE_COST_PER_MS);
        await exec(`declare data_query no scroll cursor for ${query.sql}`, query.params);
        return exec(`fetch forward ${maxRows + 1} from data_query`);
      });
      if (result.rows.length > maxRows)
        throw new ApiError(
          413,
          "too_many_rows",
          `The query returns more than ${maxRows} rows (DATA_QUERY_MAX_ROWS): add a limit, or page through it.`,
        );
      return result;
    } catch (error) {
      throw asDataError(error);
    }
  };
}

async function refuseCostly(exec: Exec, query: DataQuery, budget: number): Promise<void> {
  // PGlite 0.2 runs with enable_seqscan off, which prices every sequential scan at 1e10 more:
  // plan (and run) the data query as stock Postgres would.
  await exec("set local enable_seqscan = on");
  const { rows } = await exec(`explain (format json) ${query.sql}`, query.params);
  const cost = (rows[0]!["QUERY PLAN"] as { Plan: { "Total Cost": number } }[])[0]!.Plan["Total Cost"];
  if (cost > budget)
    throw new ApiError(
      400,
      "query_too_expensive",
      `On PGlite a running query cannot be cut off, and the planner prices this one at ${Math.round(cost)}, over ${budget} (10 per ms of DATA_QUERY_TIMEOUT_MS): narrow it (a wallet, a block range, a limit).`,
    );
}

/** A database error as the client's (JSON 4xx) when the query caused it; the database's own trouble stays a 500. */
export function asDataError(error: unknown): unknown {
  if (error instanceof ApiError) return error;
  const { code, message } = error as { code?: unknown; message?: string };
  if (typeof code !== "string" || !/^[0-9A-Z]{5}$/.test(code)) return error;
  const details = { sqlstate: code };
  if (code === "57014")
    return new ApiError(
      400,
      "query_timeout",
      "The query ran past the statement timeout (DATA_QUERY_TIMEOUT_MS) and was cancelled.",
      details,
    );
  if (code === "25006") return new ApiError(400, "read_only", `The database refused a write: ${message}.`, details);
  if (code === "42501" || code === "0A000") return new ApiError(400, "query_not_allowed", `${message}.`, details);
  if (/^(08|53|57|58|XX)/.test(code)) return error; // connection, resources, shutdown, system
  return new ApiError(400, "query_error", `${message}.`, details);
}
