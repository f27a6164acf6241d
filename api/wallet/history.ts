import type { IndexTarget } from "../../config/target.ts";
import { monthOf } from "../../shared/month.ts";
import type { IndexDb } from "../db.ts";
import { isoFromSeconds as iso } from "../money.ts";
import { DAY, WINDOW_DAYS } from "../scoring/facts.ts";
import { scoreWallet } from "../scoring/model.ts";
import { factsAt } from "../scoring/point-in-time.ts";
import type { Assessment } from "./assess.ts";
import { loadWalletFacts } from "./queries.ts";

export type HistoryPoint = {
  monthEnd: string;
  month: string;
  financialHealth: number;
  reputation: number;
  recommendation: "approve" | "review" | "decline";
  thinFile: boolean;
};

/**
 * The wallet's scores at each of the last 12 month ends, computed point in time: each month end is
 * scored on the year of transfers before it. Shared by GET /api/wallet/{address}/history and the
 * passport page's chart.
 */
export async function scoreHistory(
  db: IndexDb,
  target: Pick<IndexTarget, "schema">,
  current: Assessment,
): Promise<HistoryPoint[]> {
  // Two years of transfers: each month end is scored on the year before it.
  const { facts } = await loadWalletFacts(db, target.schema, current.facts.address, { windowDays: 2 * WINDOW_DAYS });
  const now = new Date(current.asOf.timestamp * 1000);
  const months = Array.from(
    { length: 12 },
    (_, k) => Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 11 + k, 1) / 1000 - 1,
  );
  return months.map((t) => {
    const r = scoreWallet(factsAt(facts, t));
    return {
      monthEnd: iso(t),
      month: monthOf(t - DAY),
      financialHealth: r.scores.financialHealth,
      reputation: r.scores.reputation,
      recommendation: r.recommendation,
      thinFile: r.thinFile.thinFile,
    };
  });
}
