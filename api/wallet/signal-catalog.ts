import { unitsToUsd, usdRoundedToCents as usd } from "../money.ts";
import { sanctionsView } from "../sanctions/view.ts";
import type { Assessment } from "./assess.ts";

type Value = number | boolean | string | null | Record<string, unknown>[] | Record<string, unknown>;

/** What a signal may read besides the assessment, from the service store (the handler loads it). */
export type SignalContext = { latestStatement?: Record<string, unknown> | null };

/** Every named reputation signal, read from one cached assessment (docs/scoring.md defines each). */
export const SIGNALS = {
  financialHealth: { description: "Financial-health score, 0-100", read: (a) => a.result.scores.financialHealth },
  reputation: { description: "Reputation score, 0-100", read: (a) => a.result.scores.reputation },
  recommendation: { description: "approve, review or decline", read: (a) => a.result.recommendation },
  thinFile: { description: "Too little history to judge (not bad behaviour)", read: (a) => a.result.thinFile.thinFile },
  walletAgeDays: { description: "Days since the first indexed transfer", read: (a) => a.result.signals.ageDays },
  daysSinceLastActivity: {
    description: "Days since the last indexed transfer",
    read: (a) => a.result.signals.daysSinceLastActivity,
  },
  activeMonths: {
    description: "Months of the last 12 with a genuine transfer",
    read: (a) => a.result.signals.activeMonths12,
  },
  distinctCounterparties: {
    description: "Genuine counterparties over the last year",
    read: (a) => a.result.signals.distinctCounterparties,
  },
  stablecoinBalanceUsd: { description: "USDT + USDC balance", read: (a) => usd(a.result.signals.balanceUnits) },
  monthlyIncomeUsd: {
    description: "Income (excluding dust, returned and cycled money), average of the last 3 complete months",
    read: (a) => usd(a.result.signals.monthlyIncomeUnits),
  },
  verifiedMonthlyIncomeUsd: {
    description: "Income from recurring payers or steady business revenue, per month",
    read: (a) => usd(a.result.signals.verifiedMonthlyIncomeUnits),
  },
  recurringPayers: {
    description: "Payers with a regular cadence and amount",
    read: (a) =>
      a.result.signals.recurring.map((r) => ({ payer: r.payer, cadence: r.cadence, monthlyUsd: usd(r.monthlyUnits) })),
  },
  weeklyConsistencyPct: {
    description: "Share of the last 13 weeks with income",
    read: (a) => Math.round(a.result.signals.weeklyConsistency * 100),
  },
  threeMonthNetFlowUsd: {
    description: "Inflow less outflow over the last 90 days",
    read: (a) => usd(a.result.signals.threeMonth.net),
  },
  monthlySpendUsd: {
    description: "Average monthly spending over 3 months",
    read: (a) => usd(a.result.signals.monthlySpendUnits),
  },
  topPayerSharePct: {
    description: "Share of income from the largest payer",
    read: (a) => Math.round(a.result.signals.topPayerShare * 100),
  },
  drainSharePct: {
    description: "Share of inflow sent on to fresh one-time addresses within 48 hours",
    read: (a) => Math.round(a.result.signals.drainShare * 100),
  },
  cycledSharePct: {
    description: "Share of inflow that is its own money returned through wallets it funded",
    read: (a) => Math.round(a.result.signals.cycledShare * 100),
  },
  dustInflows: { description: "Inflows under $1 ignored as dust", read: (a) => a.result.signals.dustInflows },
  sanctioned: {
    description:
      "On the Chainalysis sanctions oracle: listed, not_listed or inconclusive (when the index cannot tell), since which block, direct exposure to listed wallets over 12 months, the source, and the indexed block it is as of",
    read: (a) => sanctionsView(a),
  },
  loanCapacity: {
    description: "Suggested loan range in USD with its confidence",
    read: (a) => ({
      minUsd: unitsToUsd(a.result.loan.minUnits),
      maxUsd: unitsToUsd(a.result.loan.maxUnits),
      confidence: a.result.loan.confidence,
      currency: "USD",
    }),
  },
  assessment: {
    description: "Scores, verdict, income label and loan range together",
    read: (a) => ({
      financialHealth: a.result.scores.financialHealth,
      reputation: a.result.scores.reputation,
      reputationCategory: a.result.scores.reputationCategory,
      recommendation: a.result.recommendation,
      rationale: a.result.rationale,
      incomeLabel: a.result.incomeLabel,
      loan: {
        minUsd: unitsToUsd(a.result.loan.minUnits),
        maxUsd: unitsToUsd(a.result.loan.maxUnits),
        confidence: a.result.loan.confidence,
      },
    }),
  },
  latestStatement: {
    description:
      "The wallet's latest statement (POST /api/agent/statement): CIDs of its PDF and CSV, period, and when it was made; null when none was made",
    read: (_a: Assessment, ctx?: SignalContext) => ctx?.latestStatement ?? null,
  },
} satisfies Record<string, { description: string; read: (a: Assessment, ctx?: SignalContext) => Value }>;

export type SignalName = keyof typeof SIGNALS;
export const SIGNAL_NAMES = Object.keys(SIGNALS) as SignalName[];

/** The original service's signal names, which its users call: each reads one of ours. */
export const SIGNAL_ALIASES = {
  "monthly-income": "monthlyIncomeUsd",
  "financial-health": "financialHealth",
  "reputation-score": "reputation",
  "loan-capacity": "loanCapacity",
  assessment: "assessment",
  statement: "latestStatement",
} as const satisfies Record<string, SignalName>;

/** Every name a signal read accepts: ours, then the aliases. */
export const SIGNAL_READ_NAMES = [...new Set([...SIGNAL_NAMES, ...Object.keys(SIGNAL_ALIASES)])] as [
  string,
  ...string[],
];

export const resolveSignal = (name: string): SignalName =>
  (SIGNAL_ALIASES as Record<string, SignalName>)[name] ?? (name as SignalName);
