import { getTableName, getViewName, isTable, isView, sql as drizzleSql } from "drizzle-orm";
import { getViewConfig, type PgView, pgView } from "drizzle-orm/pg-core";
import type { MiddlewareHandler } from "hono";
import { client } from "ponder";
// @ts-expect-error: no types; Ponder's own SQL parser (libpg_query), a dependency of ponder.
import Parser from "pg-query-emscripten";

type ParseResult = { parse_tree: { stmts: unknown[] }; error: unknown };
let parser: Promise<{ parse: (sql: string) => ParseResult }> | undefined;

/**
 * Qualifies every reference to one of `relations` with `schema`: `from "transfer"` becomes
 * `from "devnet"."transfer"`. References to a CTE of the same name, and already qualified ones,
 * are left alone. Positions come from Postgres's own parser (byte offsets into the UTF-8 text).
 */
export async function qualifyRelations(sql: string, schema: string, relations: ReadonlySet<string>): Promise<string> {
  const { parse } = await (parser ??= Parser() as Promise<{ parse: (sql: string) => ParseResult }>);
  const result = parse(sql);
  if (result.error) return sql; // not SQL Postgres parses: let it fail as it would
  const ctes = new Set<string>();
  const refs: { relname: string; location: number }[] = [];
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) return void node.forEach(walk);
    if (node === null || typeof node !== "object") return;
    for (const [key, value] of Object.entries(node)) {
      if (key === "CommonTableExpr") ctes.add((value as { ctename: string }).ctename);
      if (key === "RangeVar") {
        const v = value as { relname?: string; schemaname?: string; location?: number };
        if (v.relname && !v.schemaname && typeof v.location === "number") refs.push({ relname: v.relname, location: v.location });
      }
      walk(value);
    }
  };
  walk(result.parse_tree);
  const targets = refs.filter((r) => relations.has(r.relname) && !ctes.has(r.relname)).sort((a, b) => b.location - a.location);
  if (targets.length === 0) return sql;
  let bytes = Buffer.from(sql, "utf8");
  const prefix = Buffer.from(`"${schema.replace(/"/g, '""')}".`, "utf8");
  for (const { location } of targets) bytes = Buffer.concat([bytes.subarray(0, location), prefix, bytes.subarray(location)]);
  return bytes.toString("utf8");
}

type Session = { dialect: unknown; prepareQuery: (query: { sql: string; params: unknown[] }, ...rest: unknown[]) => { execute: () => Promise<unknown> } };
type Db = { _: { session: Session } };

/**
 * Ponder's `@ponder/client` middleware (`/sql/db`, `/sql/live`), with its read-only guard, over
 * the indexed tables and views of `schema`.
 *
 * PGlite (Ponder issue #2235): there the middleware runs the client's SQL on the indexer's own
 * PGlite session, where Ponder's indexing store keeps TEMP tables named like the real ones (its
 * update buffers, `CREATE TEMP TABLE IF NOT EXISTS "transfer" ... WITH NO DATA`). Postgres looks in
 * `pg_temp` before the search_path, so unqualified names read those empty tables. The session's
 * search_path cannot be changed (Ponder's own `UPDATE ... FROM "<table>"` relies on reaching the
 * TEMP table unqualified), so the SQL is qualified instead, after the middleware's guard (which
 * refuses schema-qualified names from clients) and just before it runs. On Postgres the middleware
 * runs the query on a read-only connection of its own; qualifying changes nothing there.
 */
export function sqlOverHttp({ db, schema, namespace }: { db: unknown; schema: Record<string, unknown>; namespace: string }): MiddlewareHandler {
  const relations = new Set<string>([
    ...Object.values(schema).filter(isTable).map((t) => getTableName(t as never)),
    ...Object.values(schema).filter(isView).map((v) => getViewName(v as never)),
  ]);
  const real = (db as Db)._.session;
  const session: Session = Object.assign(Object.create(real) as Session, {
    prepareQuery: (query: { sql: string; params: unknown[] }, ...rest: unknown[]) => ({
      execute: async () => real.prepareQuery({ ...query, sql: await qualifyRelations(query.sql, namespace, relations) }, ...rest).execute(),
    }),
  });
  const middleware = withParseableViews(schema, real.dialect as Dialect).then((parseable) => client({ db: { _: { session } } as never, schema: parseable }));
  middleware.catch((error) => console.error(`[data] SQL over HTTP is unavailable: ${(error as Error).message}`));
  return async (c, next) => (await middleware)(c, next);
}

type Dialect = { sqlToQuery: (sql: unknown) => { sql: string } };

/** The relations (tables, views) a statement reads, CTEs excluded, by Postgres's own parser. */
export async function relationsOf(sql: string): Promise<string[]> {
  const { parse } = await (parser ??= Parser() as Promise<{ parse: (sql: string) => ParseResult }>);
  const result = parse(sql);
  if (result.error) throw new Error(`cannot parse: ${String(result.error)}`);
  const ctes = new Set<string>();
  const names = new Set<string>();
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) return void node.forEach(walk);
    if (node === null || typeof node !== "object") return;
    for (const [key, value] of Object.entries(node)) {
      if (key === "CommonTableExpr") ctes.add((value as { ctename: string }).ctename);
      if (key === "RangeVar" && (value as { relname?: string }).relname) names.add((value as { relname: string }).relname);
      walk(value);
    }
  };
  walk(result.parse_tree);
  return [...names].filter((n) => !ctes.has(n)).sort();
}

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
