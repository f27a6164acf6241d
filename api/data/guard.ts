import { ApiError } from "../../shared/errors.ts";
import { parseStatements, relationRefs } from "./parse.ts";

/** The longest data query accepted, as Ponder's own guard. */
const MAX_QUERY_LENGTH = 5_000;

/** The functions a data query may call: Ponder 0.17.7's own list (utils/sql-parse.js), none with side effects. */
const FUNCTIONS = new Set(
  (
    "count sum avg min max lower upper length trim replace substring cast concat now current_timestamp current_date current_time " +
    "coalesce json_agg json_object json_array json_object_agg json_array_agg json_build_array row_number rank dense_rank " +
    "percent_rank cume_dist ntile lag lead first_value last_value nth_value abs cbrt ceil ceiling degrees div exp floor ln log " +
    "mod pi power radians random round sign sqrt width_bucket acos asin atan atan2 cos cot sin tan"
  ).split(" "),
);

const refuse = (message: string): never => {
  throw new ApiError(400, "query_not_allowed", message);
};

/**
 * Refuses what a data query may not be, from Postgres's own parse of the exact text, on every
 * request (no cache: Ponder's guard caches its verdict under 40 bits of a hash, and a write with
 * the same 40 bits as an accepted read ran). One SELECT; no write inside it (data-modifying CTE,
 * SELECT INTO, FOR UPDATE); no recursive CTE; only the indexed tables and views, unqualified (so
 * neither Ponder's internal tables, nor the service store, nor the catalogs); only the functions
 * above. This is the first line: the database refuses writes again (api/data/run.ts).
 */
export async function checkDataQuery(sql: string, relations: ReadonlySet<string>): Promise<void> {
  if (sql.length > MAX_QUERY_LENGTH)
    refuse(`The query is ${sql.length} characters long; the most is ${MAX_QUERY_LENGTH}.`);
  const { statements, error } = await parseStatements(sql);
  if (error) throw new ApiError(400, "invalid_query", `The query does not parse: ${error}.`);
  if (statements.length === 0) throw new ApiError(400, "invalid_query", "The query is empty.");
  if (statements.length > 1) refuse(`One statement per query (this one has ${statements.length}).`);
  const kind = Object.keys(statements[0]!)[0] ?? "";
  if (kind !== "SelectStmt") refuse(`Only SELECT queries are served here, not ${kind.replace(/Stmt$/, "")}.`);
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) return void node.forEach(walk);
    if (node === null || typeof node !== "object") return;
    for (const [key, value] of Object.entries(node)) {
      if (key.endsWith("Stmt") && key !== "SelectStmt")
        refuse(`A ${key.replace(/Stmt$/, "").toUpperCase()} inside the query is a write.`);
      if (key === "intoClause") refuse("SELECT INTO writes a table.");
      if (key === "lockingClause") refuse("FOR UPDATE / FOR SHARE lock rows.");
      if (key === "withClause" && (value as { recursive?: boolean }).recursive)
        refuse("Recursive CTEs are not allowed.");
      if (key === "FuncCall")
        checkFunction(
          (value as { funcname: { String?: { sval: string } }[] }).funcname.map((n) => n.String?.sval ?? ""),
        );
      walk(value);
    }
  };
  walk(statements[0]);
  for (const ref of relationRefs(statements)) {
    if (ref.schemaname)
      refuse(`"${ref.schemaname}.${ref.relname}": name the indexed tables and views without a schema.`);
    if (!relations.has(ref.relname))
      refuse(
        `"${ref.relname}" is not readable here; the data listener serves the indexed tables and views: ${[...relations].sort().join(", ")}.`,
      );
  }
}

/** `count`, or `pg_catalog.count` as the parser writes some SQL syntax (`substring(x from 1)`). */
function checkFunction(names: string[]): void {
  const name = names.length === 2 && names[0] === "pg_catalog" ? names[1]! : names.length === 1 ? names[0]! : "";
  if (!FUNCTIONS.has(name))
    refuse(`The function ${names.join(".")}() is not allowed; allowed: ${[...FUNCTIONS].join(", ")}.`);
}
