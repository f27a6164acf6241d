import type { IndexTarget } from "../../config/target.ts";
import { isoFromSeconds as iso, formatUsdCents as money, usdRoundedToCents as usd } from "../money.ts";
import { sanctionsView } from "../sanctions/view.ts";
import { monthlyIncomeEstimateUnits } from "../scoring/model.ts";
import type { Assessment } from "../wallet/assess.ts";
import type { ValidReport } from "../wallet/queries.ts";
import type { LenderScreenResult } from "./schema.ts";

export type ScreenContext = {
  target: Pick<IndexTarget, "tokens" | "reporters">;
  baseUrl: string;
  report: ValidReport | null;
  billing: LenderScreenResult["x402Billing"];
};

/** Shapes an assessment into the LenderScreenResult of the service interface. */
export function toLenderScreenResult(a: Assessment, ctx: ScreenContext): LenderScreenResult {
  const { result: r, facts } = a;
  const s = r.signals;
  const ageDays = s.ageDays;
  const recurring = s.recurring.filter((p) => p.cadence !== "business");
  const business = s.recurring.find((p) => p.cadence === "business");
  return {
    status: "completed",
    walletAddress: facts.address,
    screenedAt: new Date().toISOString(),
    trust: { isTrustworthy: r.recommendation === "approve" },
    recommendation: r.recommendation,
    recommendationRationale: r.rationale,
    scores: r.scores,
    income: {
      label: r.incomeLabel,
      monthlyEstimateUsd: usd(monthlyIncomeEstimateUnits(s)),
      verifiedMonthlyUsd: usd(s.verifiedMonthlyIncomeUnits),
      weeklyConsistencyPct: Math.round(s.weeklyConsistency * 100),
      recurringIncome: s.verifiedMonthlyIncomeUnits > 0n,
      recurringPayers: s.recurring.map((p) => ({
        payer: p.payer,
        cadence: p.cadence,
        payments: p.payments,
        medianUsd: usd(p.medianUnits),
      })),
      threeMonthInflowUsd: usd(s.threeMonth.inflow),
      threeMonthOutflowUsd: usd(s.threeMonth.outflow),
      threeMonthNetFlowUsd: usd(s.threeMonth.net),
      excludedInflowUsd: {
        dust: usd(s.inflowByKind.dust),
        cycled: usd(s.inflowByKind.cycled),
        returned: usd(s.inflowByKind.returned),
        self: usd(s.inflowByKind.self),
      },
    },
    lending: {
      recommendedMinUsd: usd(r.loan.minUnits),
      recommendedMaxUsd: usd(r.loan.maxUnits),
      confidence: r.loan.confidence,
      riskCategory: r.loan.riskCategory,
      stablecoinBalanceUsd: usd(s.balanceUnits),
      walletAgeMonths: Math.floor(ageDays / 30),
    },
    signals: { positive: r.positive, concerns: r.concerns },
    sanctions: sanctionsView(a),
    whatLendersAlreadySee: {
      balances: ctx.target.tokens.map((t) => ({
        token: t.address,
        symbol: t.symbol,
        balanceUsd: usd(facts.balances.find((b) => b.token === t.address)?.balance ?? 0n),
      })),
      stablecoinBalanceUsd: usd(s.balanceUnits),
      transactionCount: facts.account ? facts.account.transfersIn + facts.account.transfersOut : 0,
      walletAgeDays: ageDays,
      firstActiveAt: facts.account && iso(facts.account.firstAt),
      lastActiveAt: facts.account && iso(facts.account.lastAt),
    },
    whatServiceAdds: {
      incomeProof: recurring.length
        ? recurring
            .map(
              (p) =>
                `${p.cadence} payments of about ${money(p.medianUnits)} from ${p.payer} (${p.payments} in 6 months)`,
            )
            .join("; ")
        : business
          ? `business revenue of about ${money(business.monthlyUnits)}/month from many customers`
          : "no recurring income found",
      stability: `income in ${Math.round(s.weeklyConsistency * 13)} of the last 13 weeks; active ${s.activeMonths12} of the last 12 months`,
      spendingDiscipline: `spends about ${money(s.monthlySpendUnits)}/month; net ${money(s.sixMonthNetUnits)} over six months`,
      counterpartyDiversity: `${s.distinctCounterparties} real counterparties in the last year; top payer ${Math.round(s.topPayerShare * 100)}% of income`,
      loanCapacity: `${money(r.loan.minUnits)} to ${money(r.loan.maxUnits)} (${r.loan.confidence} confidence)`,
    },
    verification: {
      hasOnchainPassport: ctx.report !== null,
      reportId: ctx.report?.reportId ?? null,
      verifyUrl: ctx.report ? `${ctx.baseUrl}/api/agent/verify/${ctx.report.reportId}` : null,
      onchainReporterContract: ctx.report?.reporter ?? ctx.target.reporters.at(-1)!,
    },
    cached: a.cached,
    x402Billing: ctx.billing,
    modelVersion: r.modelVersion,
    dataAsOf: { block: a.asOf.block, time: iso(a.asOf.timestamp) },
    thinFile: r.thinFile,
    topFactors: r.topFactors,
  };
}
