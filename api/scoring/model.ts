import { formatWholeUsd, unitsToUsd as usd } from "../money.ts";
import type { WalletFacts } from "./facts.ts";
import { deriveSignals, type Signals } from "./signals.ts";

/** The monthly income the model counts on: verified recurring income when there is any, else all income. */
export const monthlyIncomeEstimateUnits = (
  s: Pick<Signals, "verifiedMonthlyIncomeUnits" | "monthlyIncomeUnits">,
): bigint => (s.verifiedMonthlyIncomeUnits > 0n ? s.verifiedMonthlyIncomeUnits : s.monthlyIncomeUnits);

/** Bumped whenever a rule, weight or threshold changes; every result carries it. */
const MODEL_VERSION = "2026-11-25.1";

type Recommendation = "approve" | "review" | "decline";
type Confidence = "low" | "medium" | "high";
type ReputationCategory = "excellent" | "good" | "fair" | "poor" | "very poor";
export type Factor = { score: "financialHealth" | "reputation"; factor: string; points: number };

export type ScoreResult = {
  modelVersion: string;
  signals: Signals;
  scores: { financialHealth: number; reputation: number; reputationCategory: ReputationCategory };
  thinFile: { thinFile: boolean; reason: string | null };
  recommendation: Recommendation;
  rationale: string;
  loan: { minUnits: bigint; maxUnits: bigint; confidence: Confidence; riskCategory: "low" | "medium" | "high" };
  incomeLabel: string;
  positive: string[];
  concerns: string[];
  topFactors: Factor[];
};

const USD = 1_000_000;
const isoDay = (at: number) => new Date(at * 1000).toISOString().slice(0, 10);
const clamp = (n: number) => Math.max(0, Math.min(100, Math.round(n)));
const fmt = formatWholeUsd;

/** Financial health: income, savings, buffer, spending; drain and cycling cost points. */
export function healthFactors(s: Signals): Factor[] {
  const f = (factor: string, points: number): Factor => ({
    score: "financialHealth",
    factor,
    points: Math.round(points * 10) / 10,
  });
  const spend = usd(s.monthlySpendUnits);
  const balance = usd(s.balanceUnits);
  const income = usd(monthlyIncomeEstimateUnits(s));
  return [
    f("verified recurring income", s.verifiedMonthlyIncomeUnits > 0n ? 30 : 0),
    f(
      "income consistency",
      (s.verifiedMonthlyIncomeUnits > 0n ? 0 : 15) *
        Math.min(1, s.weeklyConsistency) *
        (s.monthlyIncomeUnits > 0n ? 1 : 0),
    ),
    // Measured against spending (which more income does not change), so earning more never costs points.
    f(
      "six-month savings",
      s.sixMonthNetUnits > 0n ? 5 + Math.min(10, (10 * usd(s.sixMonthNetUnits)) / Math.max(spend * 6, 600)) : 0,
    ),
    f("balance buffer", Math.min(15, (5 * balance) / Math.max(spend, 50))),
    f("balance size", balance >= 100 ? Math.min(20, 4 * Math.log10(balance / 10)) : 0),
    f(
      "spending within means",
      Math.max(
        income > 0 ? (spend <= income * 0.9 ? 15 : spend <= income * 1.1 ? 8 : 0) : 0,
        spend * 12 <= balance * 0.2 ? 10 : 0,
      ),
    ),
    f("drain pattern", -45 * s.drainShare),
    f("cycled own money", -45 * s.cycledShare),
  ];
}

/** Reputation: history length, steady activity, real counterparties, recency; abuse costs points. */
export function reputationFactors(s: Signals): Factor[] {
  const f = (factor: string, points: number): Factor => ({
    score: "reputation",
    factor,
    points: Math.round(points * 10) / 10,
  });
  const recent = s.daysSinceLastActivity;
  return [
    f("wallet age", Math.min(25, (25 * s.ageDays) / 365)),
    f("active months (of 12)", (25 * s.activeMonths12) / 12),
    f("counterparty diversity", Math.min(15, 1.5 * s.distinctCounterparties)),
    f("recent activity", recent === null ? 0 : recent <= 30 ? 15 : recent <= 90 ? 8 : 0),
    f("recurring payers", s.verifiedMonthlyIncomeUnits > 0n ? 10 : 0),
    f("drain pattern", -50 * s.drainShare),
    f("cycled own money", -50 * s.cycledShare),
    f("sanctioned counterparties", s.sanctions.exposure.length ? -SANCTIONS_EXPOSURE_POINTS : 0),
  ];
}

/** Points a wallet loses for moving money directly with a listed wallet over the year (any amount). */
const SANCTIONS_EXPOSURE_POINTS = 30;

/** The most each factor can give (penalties give at most 0): what the chat engine measures "room to raise" against. */
export const FACTOR_MAX: Record<Factor["score"], Record<string, number>> = {
  financialHealth: {
    "verified recurring income": 30,
    "income consistency": 15,
    "six-month savings": 15,
    "balance buffer": 15,
    "balance size": 20,
    "spending within means": 15,
    "drain pattern": 0,
    "cycled own money": 0,
  },
  reputation: {
    "wallet age": 25,
    "active months (of 12)": 25,
    "counterparty diversity": 15,
    "recent activity": 15,
    "recurring payers": 10,
    "drain pattern": 0,
    "cycled own money": 0,
    "sanctioned counterparties": 0,
  },
};

function thinFileOf(s: Signals): ScoreResult["thinFile"] {
  // Young, or barely used over the last year: too little to judge either way.
  const reasons = [];
  if (s.ageDays < 90) reasons.push(`first activity ${s.ageDays} days ago (under 90)`);
  if (s.transfersInWindow < 10 && s.activeMonths12 < 3)
    reasons.push(
      `${s.transfersInWindow} transfers in ${s.activeMonths12} active month(s) over the last year (under 10, under 3)`,
    );
  return reasons.length
    ? { thinFile: true, reason: `Too little history to judge: ${reasons.join("; ")}.` }
    : { thinFile: false, reason: null };
}

const category = (score: number): ReputationCategory =>
  score >= 80 ? "excellent" : score >= 65 ? "good" : score >= 50 ? "fair" : score >= 35 ? "poor" : "very poor";

/** The scoring model: a pure function of a wallet's facts (docs/scoring.md). */
export function scoreWallet(facts: WalletFacts): ScoreResult {
  const s = deriveSignals(facts);
  const health = healthFactors(s);
  const reputation = reputationFactors(s);
  const financialHealth = clamp(health.reduce((n, f) => n + f.points, 0));
  const reputationScore = clamp(reputation.reduce((n, f) => n + f.points, 0));
  const thinFile = thinFileOf(s);
  const dormant = s.daysSinceLastActivity !== null && s.daysSinceLastActivity > 90;

  const { sanctions } = s;
  const exposed = sanctions.exposure.length;
  let recommendation: Recommendation;
  let rationale: string;
  // A listing overrides everything: no lender may lend to it, whatever its history.
  if (sanctions.listed)
    [recommendation, rationale] = [
      "decline",
      `Listed on the sanctions oracle (Chainalysis SanctionsList) since block ${sanctions.listed.block} (${isoDay(sanctions.listed.at)}): no lending.`,
    ];
  else if (thinFile.thinFile)
    [recommendation, rationale] = ["decline", `${thinFile.reason} This is not evidence of bad behaviour.`];
  else if (dormant)
    [recommendation, rationale] = [
      "decline",
      `Dormant: no activity for ${s.daysSinceLastActivity} days, so its history says little about today.`,
    ];
  else if (s.drainShare >= 0.5)
    [recommendation, rationale] = [
      "decline",
      `Drain pattern: ${Math.round(s.drainShare * 100)}% of what it received left within 48 hours for fresh addresses.`,
    ];
  else if (s.cycledShare >= 0.5)
    [recommendation, rationale] = [
      "decline",
      `${Math.round(s.cycledShare * 100)}% of its inflow is its own money cycled back through ${s.selfFundedWallets} wallet(s) it funded.`,
    ];
  else if (
    financialHealth >= 65 &&
    reputationScore >= 65 &&
    s.verifiedMonthlyIncomeUnits > 0n &&
    s.drainShare < 0.2 &&
    s.cycledShare < 0.2 &&
    exposed === 0
  )
    [recommendation, rationale] = [
      "approve",
      `Verified recurring income of ${fmt(s.verifiedMonthlyIncomeUnits)}/month, health ${financialHealth} and reputation ${reputationScore} both at least 65, no abuse pattern.`,
    ];
  else if (financialHealth < 35 || reputationScore < 35)
    [recommendation, rationale] = [
      "decline",
      `Health ${financialHealth} or reputation ${reputationScore} is under 35.`,
    ];
  else if (exposed)
    // Money moved with a listed wallet: a person must look, however good the rest is.
    [recommendation, rationale] = [
      "review",
      `Moved money directly with ${exposed} wallet(s) listed on the sanctions oracle over the last year (${fmt(sanctions.exposureUnits)}); a person should look at it.`,
    ];
  else
    [recommendation, rationale] = [
      "review",
      s.verifiedMonthlyIncomeUnits > 0n
        ? `Recurring income is verified but health ${financialHealth} / reputation ${reputationScore} fall short of approval (65).`
        : `No verified recurring income${s.monthlyIncomeUnits > 0n ? ` (irregular income about ${fmt(s.monthlyIncomeUnits)}/month)` : ""}; a person should look at it.`,
    ];

  const confidence: Confidence =
    s.ageDays >= 365 && s.activeMonths12 >= 10 && s.verifiedMonthlyIncomeUnits > 0n
      ? "high"
      : s.ageDays >= 180 && s.activeMonths12 >= 5
        ? "medium"
        : "low";
  const confidenceFactor = { high: 100n, medium: 70n, low: 40n }[confidence];
  // Capacity: a share of verified recurring income and of the surplus it leaves, plus a tenth of
  // the balance, scaled by confidence. Irregular or cycled inflows add nothing.
  const surplus =
    s.verifiedMonthlyIncomeUnits > s.monthlySpendUnits ? s.verifiedMonthlyIncomeUnits - s.monthlySpendUnits : 0n;
  const base = (s.verifiedMonthlyIncomeUnits * 3n) / 10n + surplus + (s.balanceUnits > 0n ? s.balanceUnits / 10n : 0n);
  const maxUnits = recommendation === "decline" ? 0n : roundTo10Usd((base * confidenceFactor) / 100n);
  const minUnits = roundTo10Usd((maxUnits * 7n) / 10n);

  const positive: string[] = [];
  const concerns: string[] = [];
  for (const r of s.recurring)
    positive.push(
      r.cadence === "business"
        ? `business revenue from many customers, about ${fmt(r.monthlyUnits)}/month`
        : `${r.cadence} income from ${r.payer} (${r.payments} payments, median ${fmt(r.medianUnits)})`,
    );
  if (s.sixMonthNetUnits > 0n) positive.push(`saved ${fmt(s.sixMonthNetUnits)} over six months`);
  if (s.ageDays >= 365) positive.push(`wallet active for ${Math.floor(s.ageDays / 30)} months`);
  if (s.weeklyConsistency >= 0.75)
    positive.push(`income in ${Math.round(s.weeklyConsistency * 13)} of the last 13 weeks`);
  if (sanctions.listed)
    concerns.push(
      `listed on the sanctions oracle since block ${sanctions.listed.block} (${isoDay(sanctions.listed.at)})`,
    );
  for (const e of sanctions.exposure)
    concerns.push(
      `${e.transfers} direct transfer(s) totalling ${fmt(e.units)} with ${e.wallet}, listed on the sanctions oracle (latest ${isoDay(e.lastAt)})`,
    );
  if (sanctions.status === "inconclusive")
    concerns.push("sanctions status inconclusive: the sanctions oracle is not indexed from its creation here");
  if (thinFile.reason) concerns.push(thinFile.reason);
  if (dormant) concerns.push(`no activity for ${s.daysSinceLastActivity} days`);
  if (s.drainShare >= 0.2)
    concerns.push(`${Math.round(s.drainShare * 100)}% of inflow drained to fresh addresses within 48 hours`);
  if (s.cycledShare > 0)
    concerns.push(
      `${fmt(s.inflowByKind.cycled)} of inflow is its own money returned via ${s.selfFundedWallets} self-funded wallet(s) (not income)`,
    );
  if (s.dustInflows > 0) concerns.push(`${s.dustInflows} dust inflows under $1 ignored`);
  if (s.inflowByKind.returned > 0n)
    concerns.push(`${fmt(s.inflowByKind.returned)} of inflow returned by wallets it had paid (refunds, not income)`);
  if (s.verifiedMonthlyIncomeUnits === 0n) concerns.push("no verified recurring income");
  if (s.topPayerShare >= 0.8 && s.recurring.length === 0 && s.inflowByKind.income > 0n)
    concerns.push(`${Math.round(s.topPayerShare * 100)}% of income from a single payer`);

  const topFactors = [...health, ...reputation]
    .filter((f) => f.points !== 0)
    .sort((a, b) => Math.abs(b.points) - Math.abs(a.points))
    .slice(0, 6);
  const incomeLabel =
    s.verifiedMonthlyIncomeUnits === 0n
      ? s.monthlyIncomeUnits > 0n
        ? "irregular"
        : "none"
      : s.recurring.some((r) => r.cadence === "business")
        ? "business revenue"
        : `recurring ${s.recurring[0]!.cadence}`;
  return {
    modelVersion: MODEL_VERSION,
    signals: s,
    scores: { financialHealth, reputation: reputationScore, reputationCategory: category(reputationScore) },
    thinFile,
    recommendation,
    rationale,
    loan: {
      minUnits,
      maxUnits,
      confidence,
      riskCategory: recommendation === "approve" ? "low" : recommendation === "review" ? "medium" : "high",
    },
    incomeLabel,
    positive,
    concerns,
    topFactors,
  };
}

function roundTo10Usd(units: bigint): bigint {
  const step = 10n * BigInt(USD);
  return (units / step) * step;
}
