import type { MonitorEventType } from "./schema.ts";
import type { Snapshot } from "./snapshot.ts";

// The one place where a monitor's events are decided: a pure function from the last screen's
// snapshot and this one's to the changes the monitor watches. docs/monitoring.md lists the rules.

/** What a monitor was told to watch (the monitor row's settings). */
export type Watch = {
  events: readonly string[];
  /** score.threshold_crossed: the reputation score going below this (or back to it). */
  scoreBelow: number | null;
  /** screen.recommendation_changed only when the new recommendation is worse than this. */
  worseThan: "approve" | "review" | null;
};

export type Change = { type: MonitorEventType; before: unknown; after: unknown };

const RANK = { approve: 0, review: 1, decline: 2 } as const;
/** Income is "dropped" when the monthly estimate falls to this share of what it was, or lower. */
const INCOME_DROP_SHARE = 0.5;

/** Every change between two snapshots, each as an event type; the watch filters them (`changesFor`). */
function changes(before: Snapshot, after: Snapshot, watch: Watch): Change[] {
  const out: Change[] = [];
  const add = (type: MonitorEventType, b: unknown, a: unknown) => out.push({ type, before: b, after: a });
  if (
    before.recommendation !== after.recommendation &&
    (watch.worseThan === null || RANK[after.recommendation] > RANK[watch.worseThan])
  )
    add("screen.recommendation_changed", before.recommendation, after.recommendation);
  if (watch.scoreBelow !== null && before.reputation >= watch.scoreBelow !== after.reputation >= watch.scoreBelow)
    add(
      "score.threshold_crossed",
      { reputation: before.reputation },
      {
        reputation: after.reputation,
        threshold: watch.scoreBelow,
        direction: after.reputation < watch.scoreBelow ? "below" : "above",
      },
    );
  if (after.drainedUsd > before.drainedUsd)
    add("drain.detected", { drainedUsd: before.drainedUsd }, { drainedUsd: after.drainedUsd });
  if (before.monthlyIncomeUsd > 0 && after.monthlyIncomeUsd <= before.monthlyIncomeUsd * INCOME_DROP_SHARE)
    add("income.dropped", { monthlyIncomeUsd: before.monthlyIncomeUsd }, { monthlyIncomeUsd: after.monthlyIncomeUsd });
  for (const status of ["revoked", "expired"] as const) {
    const now = after.passport?.status === status;
    const already = before.passport?.reportId === after.passport?.reportId && before.passport?.status === status;
    if (now && !already) add(`passport.${status}`, before.passport, after.passport);
  }
  if (after.sanctions === "listed" && before.sanctions !== "listed")
    add("sanctions.listed", { sanctions: before.sanctions }, { sanctions: after.sanctions });
  if (before.sanctions === "listed" && after.sanctions !== "listed")
    add("sanctions.delisted", { sanctions: before.sanctions }, { sanctions: after.sanctions });
  const known = new Set(before.listedCounterparties);
  const newly = after.listedCounterparties.filter((w) => !known.has(w));
  if (newly.length)
    add(
      "counterparty.sanctioned",
      { listedCounterparties: before.listedCounterparties },
      { listedCounterparties: after.listedCounterparties, newly },
    );
  return out;
}

/** The events a monitor emits for this screen: none on its first screen (nothing to compare with). */
export function changesFor(before: Snapshot | null, after: Snapshot, watch: Watch): Change[] {
  if (!before) return [];
  const wanted = new Set<string>(watch.events);
  return changes(before, after, watch).filter((c) => wanted.has(c.type));
}
