import type { CreditSpendStatus } from "../store/schema.ts";
import { ABANDONED_AFTER_MS, ABSENT } from "./lifecycle.ts";

/**
 * A call paid from prepaid credit, in one place (pure, like lifecycle.ts for payments): its price
 * is taken from the balance when the call is claimed (`held`), and either stays taken once its
 * answer is stored (`spent`) or goes back to the lots it came from (the row is deleted). A call
 * without a Payment-Identifier is paid from a lease instead (core/credit-leases.ts): its price is
 * taken in memory and its row written once, `spent`, when answered (`recorded`). No chain step:
 * the money moved when the credit was bought. The memory ledger checks its writes against
 * SPEND_TRANSITIONS; the SQL ledger's guards are generated from it (ledger/sql/credit.ts).
 */

export type SpendPlace = CreditSpendStatus | typeof ABSENT;

type SpendTransition = {
  from: readonly SpendPlace[];
  to: SpendPlace;
  /** Only when the hold is older than ABANDONED_AFTER_MS: its request died. */
  abandoned?: true;
  /** Only while the hold is younger than ABANDONED_AFTER_MS: past it, the sweep may be undoing what the call did. */
  fresh?: true;
  means: string;
};

const SPEND_TRANSITIONS = {
  held: { from: [ABSENT], to: "held", means: "the call's price is taken from the balance as the call is claimed" },
  referenced: {
    from: ["held"],
    to: "held",
    fresh: true,
    means:
      "what the call makes outside the ledger that must not stand unpaid is named before it exists (a passport's report id): an abandoned hold hands it to the sweep, which undoes it before the price goes back",
  },
  spent: {
    from: ["held"],
    to: "spent",
    fresh: true,
    means: "its answer is stored: the price stays taken (not once abandoned: the sweep may be undoing the call)",
  },
  recorded: {
    from: [ABSENT],
    to: "spent",
    means: "a call paid from a lease (no Payment-Identifier) is recorded once answered, before its answer leaves",
  },
  voided: {
    from: ["spent"],
    to: ABSENT,
    means:
      "a call paid from a lease whose recording landed but could not be confirmed before its answer was refused (the store down): the price goes back to the lease",
  },
  released: {
    from: ["held"],
    to: ABSENT,
    means: "the call failed before its answer left (bad input, 404, 5xx, refused settlement): the price goes back",
  },
  abandoned: {
    from: ["held"],
    to: ABSENT,
    abandoned: true,
    means: "its request died holding it (a crashed replica): the price goes back",
  },
} as const satisfies Record<string, SpendTransition>;

export type SpendEvent = keyof typeof SPEND_TRANSITIONS;

/** Whether `event` may happen to a spend in `place`, last written at `updatedAt`. */
export function spendAllows(place: SpendPlace, event: SpendEvent, updatedAt?: Date, now = Date.now()): boolean {
  if (!(SPEND_TRANSITIONS[event].from as readonly SpendPlace[]).includes(place)) return false;
  const age = spendAge(event);
  if (!age) return true;
  if (updatedAt === undefined) return false;
  const abandoned = now - updatedAt.getTime() > ABANDONED_AFTER_MS;
  return age === "abandoned" ? abandoned : !abandoned;
}

/** The age condition of `event`, if any: the hold older than ABANDONED_AFTER_MS, or not. */
export function spendAge(event: SpendEvent): "abandoned" | "fresh" | undefined {
  const t: SpendTransition = SPEND_TRANSITIONS[event];
  return t.abandoned ? "abandoned" : t.fresh ? "fresh" : undefined;
}

/** The statuses `event` leaves (ABSENT excluded: an insert has no WHERE). */
export const spendFrom = (event: SpendEvent): CreditSpendStatus[] =>
  (SPEND_TRANSITIONS[event].from as readonly SpendPlace[]).filter((p): p is CreditSpendStatus => p !== ABSENT);

/** The status `event` writes (an event to ABSENT deletes the row: it writes none). */
export function spendTarget(event: SpendEvent): CreditSpendStatus {
  const to: SpendPlace = SPEND_TRANSITIONS[event].to;
  if (to === ABSENT) throw new Error(`${event} writes no status`);
  return to;
}

/** Credit lasts this long after its purchase; unused credit is not refunded (docs/credit.md). */
export const CREDIT_LIFETIME_MS = 365 * 86_400_000;
