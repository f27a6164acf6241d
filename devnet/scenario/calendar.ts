import { monthOf } from "../../shared/month.ts";

export const DAY = 86_400;
export const HOUR = 3_600;

export type Month = { index: number; key: string; start: number; end: number };

/**
 * The UTC calendar months of the seeded history: `months` of them, the last one being the current
 * month, which ends at `now` (history ends at the present, never in the future).
 */
export function historyMonths(now: number, months: number): Month[] {
  const today = new Date(now * 1000);
  const result: Month[] = [];
  for (let i = 0; i < months; i++) {
    const back = months - 1 - i;
    const start = Date.UTC(today.getUTCFullYear(), today.getUTCMonth() - back, 1) / 1000;
    const next = Date.UTC(today.getUTCFullYear(), today.getUTCMonth() - back + 1, 1) / 1000;
    result.push({
      index: i,
      key: monthOf(start),
      start,
      end: Math.min(next, now),
    });
  }
  return result;
}

/** Day `day` (1-based) of the month at `hour`, or null when that moment is not in the month's window. */
export function dayOf(month: Month, day: number, hour = 9): number | null {
  const at = month.start + (day - 1) * DAY + hour * HOUR;
  return at >= month.start && at < month.end ? at : null;
}

/** A uniformly random moment inside the month's window. */
export function randomMoment(month: Month, next: () => number): number {
  return Math.floor(month.start + next() * (month.end - month.start - 1));
}
