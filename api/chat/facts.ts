import { z } from "zod";
import type { Address } from "../../config/addresses.ts";
import type { IndexTarget } from "../../config/target.ts";
import { monthOf } from "../../shared/month.ts";
import type { IndexDb } from "../db.ts";
import { isoFromSeconds as iso, unitsToUsd, usdRoundedToCents as usd } from "../money.ts";
import { DAY, WINDOW_DAYS } from "../scoring/facts.ts";
import { FACTOR_MAX, healthFactors, reputationFactors } from "../scoring/model.ts";
import { indexedHead } from "../stats/queries.ts";
import type { Assessment, WalletAssessor } from "../wallet/assess.ts";
import { attestationOf, attestationSchema } from "../wallet/attestation.ts";
import { recentReports, validReport } from "../wallet/queries.ts";
import { walletMonthly, walletTopCounterparties } from "../wallet/wallet-data.ts";
import type { Period } from "./language.ts";

/**
 * The read-only query functions chat answers from, and the only ones the model may call (as
 * tools). Each reads through what the routes use (WalletAssessor.assess -> the scoring result,
 * walletData, the passport queries) and returns plain facts, USD rounded to cents as the routes
 * round them. None of them writes anything, and none sees configuration.
 */

export type ChatDeps = { db: IndexDb; target: Pick<IndexTarget, "tokens" | "schema">; assessor: WalletAssessor };

/** Where a fact came from: the indexed aggregates, and the route that answers the same figure. */
export const sourceSchema = z.object({
  name: z.string(),
  aggregates: z.array(z.string()),
  route: z.string().nullable(),
});
export type Source = z.infer<typeof sourceSchema>;

const SOURCES = {
  scores: {
    name: "scores and recommendation",
    aggregates: ["transfer", "balance", "flow", "received"],
    route: "GET /api/wallet/{address}/signals (assessment)",
  },
  income: {
    name: "walletData.income",
    aggregates: ["transfer", "flow", "received"],
    route: "GET /api/wallet/{address}/analysis (walletData.income)",
  },
  loan: {
    name: "loan capacity",
    aggregates: ["transfer", "balance", "flow", "received"],
    route: "GET /api/wallet/{address}/signals/loanCapacity",
  },
  balances: {
    name: "walletData.balances",
    aggregates: ["balance"],
    route: "GET /api/wallet/{address}/analysis (walletData.balances)",
  },
  monthly: {
    name: "walletData.monthly",
    aggregates: ["account_month"],
    route: "GET /api/wallet/{address}/analysis (walletData.monthly)",
  },
  window: { name: "the scoring window's transfers (last 365 days)", aggregates: ["transfer"], route: null },
  counterparties: {
    name: "walletData.topCounterparties",
    aggregates: ["counterparty"],
    route: "GET /api/wallet/{address}/analysis (walletData.topCounterparties)",
  },
  passport: { name: "passport", aggregates: ["report"], route: "POST /api/agent/analyze (attestation)" },
  factors: {
    name: "score factors",
    aggregates: ["transfer", "balance", "flow", "received"],
    route: "POST /api/lender/screen (topFactors)",
  },
} satisfies Record<string, Source>;

/** One request's reads: each wallet is assessed once, its walletData read once. */
export class WalletReader {
  private readonly assessments = new Map<Address, Promise<Assessment>>();
  private readonly months = new Map<Address, ReturnType<typeof walletMonthly>>();
  private readonly top = new Map<Address, ReturnType<typeof walletTopCounterparties>>();
  private head?: Promise<number>;

  constructor(readonly deps: ChatDeps) {}

  assess(address: Address): Promise<Assessment> {
    let a = this.assessments.get(address);
    if (!a) this.assessments.set(address, (a = this.deps.assessor.assess(address)));
    return a;
  }

  /** walletData.monthly, as the analysis route reads it. */
  monthly(address: Address): ReturnType<typeof walletMonthly> {
    let d = this.months.get(address);
    if (!d)
      this.months.set(
        address,
        (d = this.assess(address).then((a) => walletMonthly(this.deps.db, this.deps.target, a))),
      );
    return d;
  }

  /** walletData.topCounterparties, as the analysis route reads it. */
  topCounterparties(address: Address): ReturnType<typeof walletTopCounterparties> {
    let d = this.top.get(address);
    if (!d) this.top.set(address, (d = this.assess(address).then((a) => walletTopCounterparties(this.deps.db, a))));
    return d;
  }

  /** The indexed head's time: "now" for periods, from an assessment when there is one. */
  asOf(address?: Address): Promise<number> {
    if (address) return this.assess(address).then((a) => a.asOf.timestamp);
    return (this.head ??= indexedHead(this.deps.db, this.deps.target.schema).then((h) =>
      h ? Number(h.timestamp) : Math.floor(Date.now() / 1000),
    ));
  }

  /** The latest assessment read by this request (for modelVersion and dataAsOf), if any. */
  async latest(): Promise<Assessment | undefined> {
    const all = await Promise.all(this.assessments.values());
    return all.sort((a, b) => b.asOf.block - a.asOf.block)[0];
  }
}

const cents = (n: number) => Math.round(n * 100) / 100;

// --- the facts ---------------------------------------------------------------------------------

const scoresFactSchema = z.object({
  financialHealth: z.number(),
  reputation: z.number(),
  reputationCategory: z.string(),
  recommendation: z.enum(["approve", "review", "decline"]),
  isTrustworthy: z.boolean(),
  rationale: z.string(),
  thinFile: z.boolean(),
  positive: z.array(z.string()),
  concerns: z.array(z.string()),
});
export async function scoresFact(reader: WalletReader, address: Address) {
  const { result: r } = await reader.assess(address);
  return {
    fact: scoresFactSchema.parse({
      financialHealth: r.scores.financialHealth,
      reputation: r.scores.reputation,
      reputationCategory: r.scores.reputationCategory,
      recommendation: r.recommendation,
      isTrustworthy: r.recommendation === "approve",
      rationale: r.rationale,
      thinFile: r.thinFile.thinFile,
      positive: r.positive,
      concerns: r.concerns,
    }),
    sources: [SOURCES.scores],
  };
}

const incomeFactSchema = z.object({
  incomeLabel: z.string(),
  recurring: z.boolean(),
  verifiedMonthlyUsd: z.number(),
  monthlyEstimateUsd: z.number(),
  weeklyConsistencyPct: z.number(),
  recurringPayers: z.array(
    z.object({
      payer: z.string(),
      cadence: z.string(),
      payments: z.number(),
      medianUsd: z.number(),
      monthlyUsd: z.number(),
    }),
  ),
  excludedInflowUsd: z.object({ dust: z.number(), cycled: z.number(), returned: z.number(), self: z.number() }),
  incomeUsdOverYear: z.number(),
});
export async function incomeFact(reader: WalletReader, address: Address) {
  const { result: r } = await reader.assess(address);
  const s = r.signals;
  return {
    fact: incomeFactSchema.parse({
      incomeLabel: r.incomeLabel,
      recurring: s.verifiedMonthlyIncomeUnits > 0n,
      verifiedMonthlyUsd: usd(s.verifiedMonthlyIncomeUnits),
      monthlyEstimateUsd: usd(s.monthlyIncomeUnits),
      weeklyConsistencyPct: Math.round(s.weeklyConsistency * 100),
      recurringPayers: s.recurring.map((p) => ({
        payer: p.payer,
        cadence: p.cadence,
        payments: p.payments,
        medianUsd: usd(p.medianUnits),
        monthlyUsd: usd(p.monthlyUnits),
      })),
      excludedInflowUsd: {
        dust: usd(s.inflowByKind.dust),
        cycled: usd(s.inflowByKind.cycled),
        returned: usd(s.inflowByKind.returned),
        self: usd(s.inflowByKind.self),
      },
      incomeUsdOverYear: usd(s.inflowByKind.income),
    }),
    sources: [SOURCES.income],
  };
}

const loanFactSchema = z.object({
  minUsd: z.number(),
  maxUsd: z.number(),
  confidence: z.enum(["low", "medium", "high"]),
  currency: z.literal("USD"),
  recommendation: z.enum(["approve", "review", "decline"]),
  basis: z.object({
    verifiedMonthlyIncomeUsd: z.number(),
    monthlySpendUsd: z.number(),
    balanceUsd: z.number(),
    ageDays: z.number(),
    activeMonths: z.number(),
  }),
});
export async function loanFact(reader: WalletReader, address: Address) {
  const { result: r } = await reader.assess(address);
  const s = r.signals;
  return {
    fact: loanFactSchema.parse({
      minUsd: unitsToUsd(r.loan.minUnits),
      maxUsd: unitsToUsd(r.loan.maxUnits),
      confidence: r.loan.confidence,
      currency: "USD",
      recommendation: r.recommendation,
      basis: {
        verifiedMonthlyIncomeUsd: usd(s.verifiedMonthlyIncomeUnits),
        monthlySpendUsd: usd(s.monthlySpendUnits),
        balanceUsd: usd(s.balanceUnits),
        ageDays: s.ageDays,
        activeMonths: s.activeMonths12,
      },
    }),
    sources: [SOURCES.loan],
  };
}

const balancesFactSchema = z.object({
  balances: z.array(z.object({ symbol: z.string(), token: z.string(), balanceUsd: z.number() })),
  totalUsd: z.number(),
});
export async function balancesFact(reader: WalletReader, address: Address) {
  const { result: r, facts } = await reader.assess(address);
  // walletData.balances, without its reads of the monthly and counterparty tables.
  const balances = reader.deps.target.tokens.map((t) => ({
    symbol: t.symbol,
    token: t.address,
    balanceUsd: usd(facts.balances.find((b) => b.token === t.address)?.balance ?? 0n),
  }));
  return {
    fact: balancesFactSchema.parse({ balances, totalUsd: usd(r.signals.balanceUnits) }),
    sources: [SOURCES.balances],
  };
}

export const periodSchema = z.union([
  z.object({ kind: z.literal("months"), from: z.string(), to: z.string(), label: z.string() }),
  z.object({ kind: z.literal("days"), days: z.number(), label: z.string() }),
]);
const flowTotals = z.object({
  inflowUsd: z.number(),
  outflowUsd: z.number(),
  netUsd: z.number(),
  transfersIn: z.number(),
  transfersOut: z.number(),
});
const activityFactSchema = z.object({
  period: periodSchema,
  totals: flowTotals,
  months: z.array(flowTotals.extend({ month: z.string() })).optional(),
  note: z.string().nullable(),
});
export async function activityFact(reader: WalletReader, address: Address, period: Period) {
  if (period.kind === "days") {
    const a = await reader.assess(address);
    const days = Math.min(period.days, WINDOW_DAYS);
    const since = a.asOf.timestamp - days * DAY;
    const within = a.facts.transfers.filter((t) => t.at > since);
    const sum = (dir: "in" | "out") => within.filter((t) => t.direction === dir).reduce((n, t) => n + t.value, 0n);
    const [inflow, outflow] = [sum("in"), sum("out")];
    return {
      fact: activityFactSchema.parse({
        period,
        totals: {
          inflowUsd: usd(inflow),
          outflowUsd: usd(outflow),
          netUsd: usd(inflow - outflow),
          transfersIn: within.filter((t) => t.direction === "in").length,
          transfersOut: within.filter((t) => t.direction === "out").length,
        },
        note: days < period.days ? `Transfers are read over the last ${WINDOW_DAYS} days only.` : null,
      }),
      sources: [SOURCES.window],
    };
  }
  const monthly = await reader.monthly(address);
  const byMonth = new Map<string, z.infer<typeof flowTotals>>();
  for (const m of monthly) {
    if (m.month < period.from || m.month > period.to) continue;
    const row = byMonth.get(m.month) ?? { inflowUsd: 0, outflowUsd: 0, netUsd: 0, transfersIn: 0, transfersOut: 0 };
    row.inflowUsd = cents(row.inflowUsd + m.inflowUsd);
    row.outflowUsd = cents(row.outflowUsd + m.outflowUsd);
    row.netUsd = cents(row.inflowUsd - row.outflowUsd);
    row.transfersIn += m.transfersIn;
    row.transfersOut += m.transfersOut;
    byMonth.set(m.month, row);
  }
  const months = [...byMonth].map(([month, row]) => ({ month, ...row })).sort((a, b) => a.month.localeCompare(b.month));
  const total = (k: "inflowUsd" | "outflowUsd" | "transfersIn" | "transfersOut") =>
    months.reduce((n, m) => n + m[k], 0);
  const firstKept = monthOf((await reader.asOf(address)) - 550 * DAY); // walletMonthly's 18 months
  const totals = {
    inflowUsd: cents(total("inflowUsd")),
    outflowUsd: cents(total("outflowUsd")),
    netUsd: cents(total("inflowUsd") - total("outflowUsd")),
    transfersIn: total("transfersIn"),
    transfersOut: total("transfersOut"),
  };
  return {
    fact: activityFactSchema.parse({
      period,
      totals,
      months,
      note: period.from < firstKept ? `Monthly figures go back 18 months (to ${firstKept}).` : null,
    }),
    sources: [SOURCES.monthly],
  };
}

const transfersFactSchema = z.object({
  direction: z.enum(["in", "out", "both"]),
  windowDays: z.number(),
  transfers: z.array(
    z.object({
      direction: z.enum(["in", "out"]),
      counterparty: z.string(),
      symbol: z.string(),
      amountUsd: z.number(),
      at: z.iso.datetime(),
    }),
  ),
});
export async function largestTransfersFact(
  reader: WalletReader,
  address: Address,
  options: { direction?: "in" | "out" | "both"; limit?: number; period?: Period | null } = {},
) {
  const a = await reader.assess(address);
  const direction = options.direction ?? "both";
  const limit = Math.max(1, Math.min(options.limit ?? 5, 20));
  const days = options.period?.kind === "days" ? Math.min(options.period.days, WINDOW_DAYS) : WINDOW_DAYS;
  const months = options.period?.kind === "months" ? options.period : null;
  const symbol = (token: string) => reader.deps.target.tokens.find((t) => t.address === token)?.symbol ?? token;
  const picked = a.facts.transfers
    .filter((t) => (direction === "both" || t.direction === direction) && t.at > a.asOf.timestamp - days * DAY)
    .filter((t) => !months || (monthOf(t.at) >= months.from && monthOf(t.at) <= months.to))
    .sort((x, y) => (y.value > x.value ? 1 : y.value < x.value ? -1 : y.at - x.at))
    .slice(0, limit);
  return {
    fact: transfersFactSchema.parse({
      direction,
      windowDays: days,
      transfers: picked.map((t) => ({
        direction: t.direction,
        counterparty: t.counterparty,
        symbol: symbol(t.token),
        amountUsd: usd(t.value),
        at: iso(t.at),
      })),
    }),
    sources: [SOURCES.window],
  };
}

const counterpartiesFactSchema = z.object({
  counterparties: z.array(
    z.object({
      counterparty: z.string(),
      receivedUsd: z.number(),
      sentUsd: z.number(),
      transfersIn: z.number(),
      transfersOut: z.number(),
      lastAt: z.iso.datetime(),
    }),
  ),
});
export async function counterpartiesFact(reader: WalletReader, address: Address, options: { limit?: number } = {}) {
  const top = await reader.topCounterparties(address);
  const limit = Math.max(1, Math.min(options.limit ?? 5, 20));
  return {
    fact: counterpartiesFactSchema.parse({
      counterparties: top.slice(0, limit).map((c) => ({
        counterparty: c.counterparty,
        receivedUsd: c.receivedUsd,
        sentUsd: c.sentUsd,
        transfersIn: c.transfersIn,
        transfersOut: c.transfersOut,
        lastAt: c.lastAt,
      })),
    }),
    sources: [SOURCES.counterparties],
  };
}

const passportFactSchema = z.object({
  passport: attestationSchema.nullable(),
  reportsFound: z.number(),
});
export async function passportFact(reader: WalletReader, address: Address) {
  const [reports, asOf] = await Promise.all([recentReports(reader.deps.db, address), reader.asOf(address)]);
  const report = validReport(reports, asOf);
  return {
    fact: passportFactSchema.parse({
      passport: report && attestationOf(report),
      reportsFound: reports.length,
    }),
    sources: [SOURCES.passport],
  };
}

const factorsFactSchema = z.object({
  financialHealth: z.number(),
  reputation: z.number(),
  factors: z.array(
    z.object({
      score: z.enum(["financialHealth", "reputation"]),
      factor: z.string(),
      points: z.number(),
      max: z.number(),
      room: z.number(),
    }),
  ),
  topFactors: z.array(z.object({ score: z.string(), factor: z.string(), points: z.number() })),
  signals: z.object({
    verifiedMonthlyIncomeUsd: z.number(),
    monthlySpendUsd: z.number(),
    balanceUsd: z.number(),
    sixMonthNetUsd: z.number(),
    weeklyConsistencyPct: z.number(),
    ageDays: z.number(),
    activeMonths: z.number(),
    distinctCounterparties: z.number(),
    daysSinceLastActivity: z.number().nullable(),
    drainSharePct: z.number(),
    cycledSharePct: z.number(),
  }),
});
export async function factorsFact(reader: WalletReader, address: Address) {
  const { result: r } = await reader.assess(address);
  const s = r.signals;
  const all = [...healthFactors(s), ...reputationFactors(s)].map((f) => {
    const max = FACTOR_MAX[f.score][f.factor] ?? 0;
    return { ...f, max, room: Math.max(0, Math.round((max - f.points) * 10) / 10) };
  });
  return {
    fact: factorsFactSchema.parse({
      financialHealth: r.scores.financialHealth,
      reputation: r.scores.reputation,
      factors: all,
      topFactors: r.topFactors,
      signals: {
        verifiedMonthlyIncomeUsd: usd(s.verifiedMonthlyIncomeUnits),
        monthlySpendUsd: usd(s.monthlySpendUnits),
        balanceUsd: usd(s.balanceUnits),
        sixMonthNetUsd: usd(s.sixMonthNetUnits),
        weeklyConsistencyPct: Math.round(s.weeklyConsistency * 100),
        ageDays: s.ageDays,
        activeMonths: s.activeMonths12,
        distinctCounterparties: s.distinctCounterparties,
        daysSinceLastActivity: s.daysSinceLastActivity,
        drainSharePct: Math.round(s.drainShare * 100),
        cycledSharePct: Math.round(s.cycledShare * 100),
      },
    }),
    sources: [SOURCES.factors],
  };
}

export const FACT_SCHEMAS = {
  scores: scoresFactSchema,
  income: incomeFactSchema,
  loan: loanFactSchema,
  balances: balancesFactSchema,
  activity: activityFactSchema,
  largestTransfers: transfersFactSchema,
  counterparties: counterpartiesFactSchema,
  passport: passportFactSchema,
  factors: factorsFactSchema,
};
export type FactKind = keyof typeof FACT_SCHEMAS;
export type Facts = { [K in FactKind]?: z.infer<(typeof FACT_SCHEMAS)[K]> };
