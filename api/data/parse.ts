type ParseResult = { parse_tree: { stmts: { stmt?: Record<string, unknown> }[] }; error: { message: string } | null };
type Parser = { parse: (sql: string) => ParseResult };
let parser: Promise<Parser> | undefined;

/** Postgres's parser, loaded on the first query (its WebAssembly is a start-up cost every process would pay). */
async function loadParser(): Promise<Parser> {
  // @ts-expect-error: no types; Ponder's own SQL parser (libpg_query), a dependency of ponder.
  const { default: Parser } = await import("pg-query-emscripten");
  return (await Parser()) as Parser;
}

/** The statements of `sql` as Postgres's own parser (libpg_query) reads them, or its syntax error. */
export async function parseStatements(sql: string): Promise<{ statements: Record<string, unknown>[]; error?: string }> {
  const { parse } = await (parser ??= loadParser());
  const result = parse(sql);
  if (result.error) return { statements: [], error: result.error.message };
  return { statements: result.parse_tree.stmts.map((s) => s.stmt ?? {}) };
}

export type RelationRef = { relname: string; schemaname?: string };

/**
 * Every table or view a parse tree names, CTE references left out. A WITH clause's names are in
 * scope for the CTEs after each one and for the statement that owns the clause, nowhere else: in
 * `select * from t, (with t as (select 1) select * from t) s` the first `t` is the table, and in a
 * non-recursive `with t as (select * from t)` the inner `t` is the table too. A reference is any
 * object with a `relname` (libpg_query drops the `RangeVar` key on typed fields, e.g. `INTO`).
 */
export function relationRefs(tree: unknown): RelationRef[] {
  const refs: RelationRef[] = [];
  const walk = (node: unknown, ctes: ReadonlySet<string>): void => {
    if (Array.isArray(node)) {
      for (const n of node) walk(n, ctes);
      return;
    }
    if (node === null || typeof node !== "object") return;
    const record = node as Record<string, unknown>;
    if (typeof record.relname === "string") {
      const ref = record as RelationRef;
      if (ref.schemaname || !ctes.has(ref.relname)) refs.push({ relname: ref.relname, schemaname: ref.schemaname });
    }
    let scope = ctes;
    const withClause = record.withClause as
      | { ctes?: { CommonTableExpr: { ctename: string; ctequery: unknown } }[]; recursive?: boolean }
      | undefined;
    if (withClause) {
      const defined = (withClause.ctes ?? []).map((c) => c.CommonTableExpr);
      if (withClause.recursive) scope = new Set([...scope, ...defined.map((c) => c.ctename)]);
      for (const cte of defined) {
        walk(cte.ctequery, scope);
        if (!withClause.recursive) scope = new Set([...scope, cte.ctename]);
      }
    }
    for (const [key, value] of Object.entries(record)) if (key !== "withClause") walk(value, scope);
  };
  walk(tree, new Set());
  return refs;
}

/** The relations (tables, views) a statement reads, CTEs excluded, by Postgres's own parser. */
export async function relationsOf(sql: string): Promise<string[]> {
  const { statements, error } = await parseStatements(sql);
  if (error) throw new Error(`cannot parse: ${error}`);
  return [...new Set(relationRefs(statements).map((r) => r.relname))].sort();
}
