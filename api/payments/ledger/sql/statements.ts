import { and, eq, getTableColumns, type SQL, sql, type Table } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { arrayParam } from "../../../db.ts";
import { type PaymentRow, payment } from "../../../store/schema.ts";
import type { ServiceDb } from "../../../store/store.ts";
import type { PaymentKey } from "../ledger.ts";

/** The store as the ledger takes it: a promise (the API module loads synchronously, the store opens later) or the store. */
export type Store = Promise<ServiceDb> | ServiceDb;

const dialect = new PgDialect();
/**
 * The text of a prepared statement (queryPrepared) written with the ledger's rules (DEBT,
 * openSums…) as drizzle SQL: rendered once. Its parameters are written `$n` in the text, so that
 * one text, and one plan, serves any number of rows (arrays, unnest).
 */
export const statement = (query: SQL): string => {
  const rendered = dialect.sqlToQuery(query);
  if (rendered.params.length > 0) throw new Error("a prepared ledger statement takes its parameters as $n");
  return rendered.sql;
};

/** One column of a batch: its name (in `v`, and the table's where it is one), its SQL type, and how to read it from an item. */
type BatchColumn<T> = { name: string; type: string; of: (item: T) => unknown };

/** The key columns of a batch, read from each item's key. */
export const keyColumns = <T>(key: (item: T) => PaymentKey): BatchColumn<T>[] => [
  { name: "token", type: "text", of: (item) => key(item).token },
  { name: "payer", type: "text", of: (item) => key(item).payer },
  { name: "nonce", type: "text", of: (item) => key(item).nonce },
];

/**
 * A batch of rows as one array parameter per column (arrayParam): `from` is `unnest($1, …) as
 * v(name, …)` (with `ordinal`, `v.i` numbers them from 1), `values` the arrays in that same order,
 * `param(n)` the $ of the n-th parameter after them, `array(n, type)` the same as an array. Both
 * come from one column list, so they cannot diverge.
 */
export function batch<T>(columns: readonly BatchColumn<T>[], ordinal = false) {
  const names = columns.map((c) => c.name);
  const arrays = columns.map((c, i) => arrayParam(i + 1, c.type));
  return {
    names: names.join(", "),
    from: sql.raw(
      `unnest(${arrays.join(", ")})${ordinal ? " with ordinality" : ""} as v(${names.join(", ")}${ordinal ? ", i" : ""})`,
    ),
    param: (n: number) => sql.raw(`$${columns.length + n}`),
    array: (n: number, type: string) => sql.raw(arrayParam(columns.length + n, type)),
    values: (items: readonly T[]): unknown[][] => columns.map((c) => items.map(c.of)),
    /** The columns' names, in order. */
    columnNames: names as readonly string[],
    /** One row's column `name` as a scalar parameter, for a statement that writes one row (`row` gives its values, in the same order). */
    one: (name: string) => {
      const i = names.indexOf(name);
      if (i < 0) throw new Error(`no batch column ${name}`);
      return sql.raw(`$${i + 1}::${columns[i]!.type}`);
    },
    row: (item: T): unknown[] => columns.map((c) => c.of(item)),
  };
}

/**
 * `condition` as a filter only: the same test written `is true`, from which the planner proves no
 * partial index's predicate and makes no index condition. For a statement that names its rows
 * otherwise (by key): a generic plan made while few rows matched (stale statistics) would scan a
 * partial index over the statuses instead, every entry that non-HOT rewrites left in it, dead or
 * alive (in a probe, 2,460 buffers to write one row against 2; in bench:payments, 300 rows read
 * for one).
 */
export const filterOnly = (condition: SQL): SQL => sql`(${condition}) is true`;

/** The row of each (token, payer, nonce) of a batch `v`: the statements that write many rows at once. */
export const byValues = sql`${payment.token} = v.token and ${payment.payer} = v.payer and ${payment.nonce} = v.nonce`;

export const byKey = (k: PaymentKey) =>
  and(eq(payment.token, k.token), eq(payment.payer, k.payer), eq(payment.nonce, k.nonce));

/** The rows of a raw statement (db.execute): node-postgres wraps them in a result, PGlite's drizzle driver too, others may not. */
export const rowsOf = <T>(result: unknown): T[] => (result as { rows?: T[] }).rows ?? (result as T[]);

/** A row of `table` as a raw statement returns it (column names, driver values), as drizzle's select would map it. */
export function rowMapper<T extends Table>(table: T): (raw: Record<string, unknown>) => T["$inferSelect"] {
  const columns = Object.entries(getTableColumns(table));
  return (raw) =>
    Object.fromEntries(
      columns.map(([key, column]) => [
        key,
        raw[column.name] == null ? null : column.mapFromDriverValue(raw[column.name]),
      ]),
    ) as T["$inferSelect"];
}

export const paymentRowOf: (raw: Record<string, unknown>) => PaymentRow = rowMapper(payment);
