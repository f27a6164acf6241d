import type { PGlite } from "@electric-sql/pglite";
import { sql as drizzleSql, getTableName, getViewName, isTable, isView } from "drizzle-orm";
import { getViewConfig, type PgView, pgView } from "drizzle-orm/pg-core";
import type { Context, MiddlewareHandler } from "hono";
import { client } from "ponder";
// superjson: how @ponder/client encodes a query (a dependency of ponder, as the client is).
import superjson from "superjson";
import type { IndexTarget } from "../../config/target.ts";
import { ApiError, errorBody } from "../../shared/errors.ts";
import { pgliteExecutor, postgresExecutor } from "./executor.ts";
import { checkDataQuery } from "./guard.ts";
import { relationsOf } from "./parse.ts";
import { asDataError, type DataLimits, type DataQuery, readOnlyRunner } from "./run.ts";

type Session = { dialect: unknown };
type Db = { _: { session: Session } };

/**
 * `@ponder/client`'s SQL over HTTP over the indexed tables and views of `schema`: `/sql/db` answers
 * a query, `/sql/live` streams its result again whenever the index changes.
 *
 * Every query is checked by our guard (api/data/guard.ts), then run read-only with the listener's
 * limits (api/data/run.ts): on Ponder's one session on PGlite, on a pool of the listener's own on
 * Postgres. `/sql/live` is Ponder's middleware, for its change notifications: its query is checked
 * and run once here first; Ponder then re-runs it on each change, the same way on PGlite, and on its
 * own READ ONLY connections (30 s timeout, no row limit) on Postgres.
 */
export function sqlOverHttp(options: {
  db: unknown;
  schema: Record<string, unknown>;
  namespace: string;
  database: IndexTarget["database"];
  limits: DataLimits;
}): MiddlewareHandler {
  const { schema, database } = options;
  const relations = new Set<string>([
    ...Object.values(schema)
      .filter(isTable)
      .map((t) => getTableName(t as never)),
    ...Object.values(schema)
      .filter(isView)
      .map((v) => getViewName(v as never)),
  ]);
  const executor =
    database.kind === "postgres"
      ? postgresExecutor(database.connectionString)
      : pgliteExecutor((options.db as { $client: PGlite }).$client);
  const run = readOnlyRunner(executor, { namespace: options.namespace, limits: options.limits });
  // Ponder's middleware runs queries through this session on PGlite (`prepareQuery(...).execute()`).
  const real = (options.db as Db)._.session;
  const session = Object.assign(Object.create(real) as Session, {
    prepareQuery: (query: DataQuery) => ({ execute: () => run(query) }),
  });
  const live = withParseableViews(schema, real.dialect as Dialect).then((parseable) =>
    client({ db: { _: { session } } as never, schema: parseable }),
  );
  live.catch((error) => console.error(`[data] live queries are unavailable: ${(error as Error).message}`));

  return async (c, next) => {
    if (c.req.path === "/sql/db") return c.json(await run(await clientQuery(c, relations)));
    if (c.req.path !== "/sql/live") return next();
    await run(await clientQuery(c, relations));
    try {
      return asJsonError(await (await live)(c, next));
    } catch (error) {
      throw asDataError(error);
    }
  };
}

/** The query `@ponder/client` sends (`?sql=` superjson of `{ sql, params }`), once our guard accepts it. */
async function clientQuery(c: Context, relations: ReadonlySet<string>): Promise<DataQuery> {
  const text = c.req.query("sql");
  if (text === undefined)
    throw new ApiError(
      400,
      "invalid_query",
      'Missing the "sql" query parameter: a superjson-encoded { sql, params }, as @ponder/client sends.',
    );
  let query: Partial<DataQuery>;
  try {
    query = superjson.parse(text) ?? {};
  } catch {
    throw new ApiError(400, "invalid_query", 'The "sql" query parameter is not superjson.');
  }
  if (typeof query.sql !== "string" || !Array.isArray(query.params ?? []))
    throw new ApiError(400, "invalid_query", 'The "sql" query parameter must encode { sql: string, params: [] }.');
  await checkDataQuery(query.sql, relations);
  return { sql: query.sql, params: query.params ?? [] };
}

/** Ponder's middleware refuses in text/plain (a 500 for its guard's refusals): the project's JSON instead. */
async function asJsonError(res: Response | void): Promise<Response | void> {
  if (!res || res.status < 400 || !res.headers.get("content-type")?.startsWith("text/plain")) return res;
  const message = await res.text();
  if (res.status === 503) return Response.json(errorBody("live_unavailable", message), { status: 503 });
  return Response.json(errorBody("query_not_allowed", message), { status: 400 });
}

type Dialect = { sqlToQuery: (sql: unknown) => { sql: string } };

/**
 * The middleware parses each view's SQL with its own, narrower parser to learn which tables a
 * query over the view depends on (its live-query cache is invalidated when they change). It does
 * not know subqueries in expressions (`SubLink`), which our views use, and then fails with an
 * unhandled rejection that stops the process. It only needs the relations a view reads, so it is
 * given each view as `select 1 from <those relations>`, found by Postgres's full parser. The
 * views themselves, in the database, are untouched; nothing runs these stand-ins.
 */
async function withParseableViews(schema: Record<string, unknown>, dialect: Dialect): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (!isView(value)) {
      out[key] = value;
      continue;
    }
    const view = value as unknown as PgView;
    const query = getViewConfig(view).query;
    const reads = query ? await relationsOf(dialect.sqlToQuery(query).sql) : [];
    const from = reads.length ? ` from ${reads.map((r) => `"${r.replace(/"/g, '""')}"`).join(", ")}` : "";
    out[key] = pgView(getViewName(view), {}).as(drizzleSql.raw(`select 1${from}`));
  }
  return out;
}
