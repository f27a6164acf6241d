import { type Placeholder, sql } from "drizzle-orm";
import type { ReadonlyDrizzle } from "ponder";
import type * as schema from "../ponder.schema.ts";
import type { ServiceDb } from "./store/store.ts";

/**
 * The indexer's tables, read-only: Ponder's API `db`, or a drizzle client over the same schema.
 *
 * Query through the drizzle builder (it qualifies tables with their schema), never raw SQL naming
 * a table bare: on PGlite, Ponder's flushes leave TEMP tables named like ours on the one shared
 * connection, and a bare name resolves to that empty temp table.
 */
export type IndexDb = ReadonlyDrizzle<typeof schema>;

/** The client under the drizzle `db`: a node-postgres pool, or the PGlite instance. */
type RawClient = {
  query: (
    query: string | { name: string; text: string; values: unknown[] },
    values?: unknown[],
  ) => Promise<{ rows: unknown[] }>;
};

/**
 * Array parameter `$n` of element `type` in a prepared statement, read through a scalar subquery so
 * that the planner does not see the array: seen (as each custom plan sees it), a short array always
 * looks cheaper than the generic plan's guess, and every call is planned again; unseen, the
 * generic plan is kept after five calls (Postgres's plan cache), as for a scalar parameter.
 */
export const arrayParam = (n: number, type: string) => `(select $${n}::${type}[])::${type}[]`;
/** arrayParam for a statement the builder prepares: `value` (a placeholder) read the same way. */
export const builderArrayParam = (value: Placeholder, type: string) =>
  sql`(select ${value}::${sql.raw(type)}[])::${sql.raw(type)}[]`;

/**
 * Runs raw SQL the builder cannot express (lateral joins, array parameters), prepared once per
 * Postgres connection under `name` so it is parsed once, not on every request (PGlite, in
 * process, plans each call). Name tables with their schema, as above. The index's `db` or the
 * service store's.
 */
export async function queryPrepared<T>(
  db: IndexDb | ServiceDb,
  name: string,
  text: string,
  values: unknown[],
): Promise<T[]> {
  const client = (db as unknown as { $client: RawClient }).$client;
  const result = "waitReady" in client ? await client.query(text, values) : await client.query({ name, text, values });
  return result.rows as T[];
}
