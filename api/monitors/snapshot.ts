import { usdRoundedToCents as usd } from "../money.ts";
import { monthlyIncomeEstimateUnits } from "../scoring/model.ts";
import type { Assessment } from "../wallet/assess.ts";
import { attestedStatus, type ValidReport } from "../wallet/queries.ts";

/**
 * What a monitor compares from one screen of its wallet to the next: the values its events are
 * about (api/monitors/events.ts). Stored with the monitor (`monitor.snapshot`), in plain JSON.
 */
export type Snapshot = {
  recommendation: "approve" | "review" | "decline";
  reputation: number;
  financialHealth: number;
  /** What left for fresh one-time addresses within 48 h of an inflow, over the last year. */
  drainedUsd: number;
  monthlyIncomeUsd: number;
  sanctions: "listed" | "not_listed" | "inconclusive";
  /** Listed wallets it moved money with directly over the last year, sorted. */
  listedCounterparties: string[];
  /** Its latest passport and that passport's standing. */
  passport: { reportId: string; status: ReturnType<typeof attestedStatus> } | null;
};

/** The snapshot of an assessment, with the wallet's passports newest first (api/wallet/queries.ts recentReportsOf). */
export function snapshotOf(a: Assessment, reports: ValidReport[]): Snapshot {
  const { result } = a;
  const s = result.signals;
  const latest = reports[0];
  return {
    recommendation: result.recommendation,
    reputation: result.scores.reputation,
    financialHealth: result.scores.financialHealth,
    drainedUsd: usd(s.drainedUnits),
    monthlyIncomeUsd: usd(monthlyIncomeEstimateUnits(s)),
    sanctions: s.sanctions.status,
    listedCounterparties: s.sanctions.exposure.map((e) => e.wallet).sort(),
    passport: latest ? { reportId: latest.reportId, status: attestedStatus(latest, a.asOf.timestamp) } : null,
  };
}
