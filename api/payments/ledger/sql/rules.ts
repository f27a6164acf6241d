import { and, eq, isNull, lt, or, type SQL, sql } from "drizzle-orm";
import type { Address } from "../../../../config/addresses.ts";
import {
  OPEN_DEFERRED_ROWS,
  OPEN_STATUSES,
  type PaymentStatus,
  payment,
  paymentExposure,
} from "../../../store/schema.ts";
import {
  ABANDONED_AFTER_MS,
  type Condition,
  fromStatuses,
  type PaymentEvent,
  RERUN_LEASE_MS,
  RERUN_MARK,
  TRANSITIONS,
  type Transition,
  UNSETTLED,
} from "../../lifecycle.ts";
import type { OpenAmounts, TransactionRead } from "../ledger.ts";
import { byValues, filterOnly } from "./statements.ts";

/** Statuses as SQL literals: the planner matches them against the partial indexes' lists, and a prepared statement takes no parameter for them. */
export const literals = (statuses: readonly PaymentStatus[]) => statuses.map((s) => `'${s}'`).join(", ");

export const statusIn = (statuses: readonly PaymentStatus[]) =>
  sql`${payment.status} in (${sql.raw(literals(statuses))})`;

/** The lifecycle's conditions (lifecycle.ts CONDITIONS) as WHERE clauses, at time `now` (ms). */
export const CONDITION_SQL: Record<Condition, (now: number) => SQL> = {
  abandoned: (now) => lt(payment.updatedAt, new Date(now - ABANDONED_AFTER_MS)),
  deferred: () => sql`${payment.deferred}`,
  queueable: () => sql`${payment.deferred} and ${payment.responseBody} is not null`,
  unanswered: () => isNull(payment.responseBody),
  rerunFree: (now) =>
    and(
      isNull(payment.responseBody),
      or(isNull(payment.responseStatus), lt(payment.updatedAt, new Date(now - RERUN_LEASE_MS))),
    )!,
  rerunHeld: () => and(isNull(payment.responseBody), eq(payment.responseStatus, RERUN_MARK))!,
  debt: () => sql`${payment.deferred} and ${payment.repaidBy} is null and ${payment.responseBody} is not null`,
};

/**
 * The WHERE guard of `event`'s write, generated from the lifecycle table: the statuses it leaves
 * and its condition. Without parameters for the conditions a prepared statement uses (deferred,
 * queueable, debt); the time conditions take `now`.
 */
export function guard(event: PaymentEvent, now = Date.now()): SQL {
  const t: Transition = TRANSITIONS[event];
  const status = statusIn(fromStatuses(event));
  return t.when ? sql`(${status} and ${CONDITION_SQL[t.when](now)})` : status;
}

/** The rows of a batch `v` (byValues) that `event` may write, looked up by their primary key (filterOnly). */
export const batchRows = (event: PaymentEvent): SQL => sql`${byValues} and ${filterOnly(guard(event))}`;

/** The status `event` writes (the table's `to`): an event that keeps the status writes none. */
export function target(event: PaymentEvent): PaymentStatus {
  const to = TRANSITIONS[event].to;
  if (to === "stay" || to === "absent") throw new Error(`${event} writes no status`);
  return to;
}

/** Rows answered before settlement whose money has not arrived yet: the service's exposure. */
const OPEN_DEFERRED = sql`${payment.deferred} and ${payment.repaidBy} is null and ${statusIn(UNSETTLED)}`;
/**
 * A debt: an answer given before settlement whose settlement failed by the payer's doing (the
 * transfer failed, or the authorization was cancelled), not yet paid again: what `repaid` leaves.
 */
export const DEBT = guard("repaid");
/**
 * What the deferred caps bound: open deferred rows and debts. Written as the predicate of the
 * partial index payment_open_deferred, then which of its rows count: a payer's sum scans that index
 * alone. (An OR of the two is a bitmap scan, which never learns that an index entry is dead: with
 * each payment's four non-HOT updates, a sum would read every dead entry. The OR can only be
 * planned over an index that holds every open status, which is why payment_status_updated holds
 * two: test/db/service-store.test.ts.) The total over all payers is not summed: payment_exposure
 * keeps it (schema.ts), by a trigger whose predicate a test holds equal to this one.
 */
export const OPEN_EXPOSURE = sql`${sql.raw(OPEN_DEFERRED_ROWS)} and ((${OPEN_DEFERRED}) or (${DEBT}))`;
/** The amounts of OPEN_EXPOSURE's rows in all, as payment_exposure keeps them (a subquery: its slots summed). */
export const EXPOSURE_TOTAL = sql`(select sum(${paymentExposure.amount}) from ${paymentExposure})`;

/** A payer's open rows (the partial index payment_open_payer: the literal status list, see OPEN_STATUSES). */
export const openRowsOf = (payer: Address | SQL) =>
  and(eq(payment.payer, payer), sql.raw(`status in (${OPEN_STATUSES})`));
/** Over a payer's open rows: what is claimed in `token` and not settled, and what it owes. */
export const openSums = (token: Address | SQL) => ({
  unsettled:
    sql<string>`coalesce(sum(${payment.amount}) filter (where ${payment.token} = ${token} and ${statusIn(UNSETTLED)}), 0)::text`.as(
      "unsettled",
    ),
  owed: sql<string>`coalesce(sum(${payment.amount}) filter (where ${DEBT}), 0)::text`.as("owed"),
});
/** `o.unsettled` and `o.owed` (openSums) for each (token, payer) row of `keys`: a lateral join. */
export const openSumsOf = (keys: SQL) => {
  const { unsettled, owed } = openSums(sql`${keys}.token`);
  return sql`cross join lateral (select ${unsettled.getSQL()} as unsettled, ${owed.getSQL()} as owed from ${payment} where ${openRowsOf(sql`${keys}.payer`)}) as o`;
};
export const openAmounts = (row: { unsettled: string | null; owed: string | null } | undefined): OpenAmounts => ({
  unsettled: BigInt(row?.unsettled ?? "0"),
  owed: BigInt(row?.owed ?? "0"),
});

/** The row's transaction is still the one `read` (no condition without one). */
export const stillRead = (read: TransactionRead | undefined) =>
  read === undefined
    ? undefined
    : read.transaction === null
      ? isNull(payment.transaction)
      : eq(payment.transaction, read.transaction);
