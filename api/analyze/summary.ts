import { formatWholeUsd as money } from "../money.ts";
import type { ScoreResult } from "../scoring/model.ts";


/** A paragraph written from the facts (a template: nothing in it that the numbers do not say). */
export function summaryOf(address: string, r: ScoreResult): string {
  const s = r.signals;
  const parts = [
    s.ageDays > 0 ? `${address} has moved stablecoins for ${Math.max(1, Math.round(s.ageDays / 30))} month(s), active in ${s.activeMonths12} of the last 12.` : `${address} has no indexed stablecoin history.`,
  ];
  if (s.recurring.length) {
    parts.push(`It has verified recurring income of about ${money(s.verifiedMonthlyIncomeUnits)} a month (${s.recurring.map((p) => (p.cadence === "business" ? "business revenue" : `${p.cadence} from ${p.payer}`)).join("; ")}).`);
  } else if (s.monthlyIncomeUnits > 0n) {
    parts.push(`Its income is irregular, about ${money(s.monthlyIncomeUnits)} a month over the last three months.`);
  } else {
    parts.push("It shows no income over the last three months.");
  }
  parts.push(`Over 90 days it received ${money(s.threeMonth.inflow)} and sent ${money(s.threeMonth.outflow)}; it holds ${money(s.balanceUnits)} in USDT and USDC.`);
  if (r.concerns.length) parts.push(`Concerns: ${r.concerns.join("; ")}.`);
  parts.push(`Financial health ${r.scores.financialHealth}/100, reputation ${r.scores.reputation}/100 (${r.scores.reputationCategory}). Recommendation: ${r.recommendation}. ${r.rationale}`);
  return parts.join(" ");
}
