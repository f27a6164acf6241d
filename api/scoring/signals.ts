import { zeroAddress } from "viem";
import type { Address } from "../../config/addresses.ts";
import { monthOf } from "../../shared/month.ts";
import { type BlockMoment, DAY, type SanctionsFacts, type WalletFacts, type WalletTransfer } from "./facts.ts";
import { DUST_FLOOR_UNITS, drainCandidates, isDrain, isSelfFunded } from "./rules.ts";

type InflowKind = "income" | "dust" | "cycled" | "returned" | "self";

type RecurringPayer = {
  payer: Address;
  cadence: "weekly" | "biweekly" | "monthly" | "business";
  payments: number;
  medianUnits: bigint;
  monthlyUnits: bigint;
};

/** Everything the scores are computed from, each a plain fact that docs/scoring.md defines. */
export type Signals = {
  ageDays: number;
  daysSinceLastActivity: number | null;
  activeMonths12: number;
  transfersInWindow: number;
  distinctCounterparties: number;
  balanceUnits: bigint;
  /** Inflow split by kind over the window. */
  inflowByKind: Record<InflowKind, bigint>;
  dustInflows: number;
  incomeByMonth: { month: string; units: bigint }[];
  monthlyIncomeUnits: bigint;
  weeklyConsistency: number;
  recurring: RecurringPayer[];
  verifiedMonthlyIncomeUnits: bigint;
  threeMonth: { inflow: bigint; outflow: bigint; net: bigint };
  /** Average monthly spending over 3 months, not counting money sent to wallets it funds itself. */
  monthlySpendUnits: bigint;
  sixMonthNetUnits: bigint;
  /** Share of income (or of all inflow) taken by the largest payer. */
  topPayerShare: number;
  /** Share of the window's inflow that left within 48 h for a one-time fresh address. */
  drainShare: number;
  /** What left that way over the window, in token units: grows exactly when a new drain is seen. */
  drainedUnits: bigint;
  /** Share of the window's non-dust inflow that was its own money coming back. */
  cycledShare: number;
  selfFundedWallets: number;
  sanctions: SanctionsSignal;
};

/**
 * The wallet on the sanctions oracle: listed, not listed, or inconclusive when the index cannot
 * tell (the oracle is not indexed from its creation). Never "not listed" on an unknown.
 */
type SanctionsSignal = {
  status: "listed" | "not_listed" | "inconclusive";
  listed: BlockMoment | null;
  delisted: BlockMoment | null;
  exposure: SanctionsFacts["exposure"];
  exposureUnits: bigint;
};

function sanctionsSignal(facts: SanctionsFacts | undefined): SanctionsSignal {
  const exposure = facts?.exposure ?? [];
  return {
    status: facts?.listed ? "listed" : facts?.complete ? "not_listed" : "inconclusive",
    listed: facts?.listed ?? null,
    delisted: facts?.delisted ?? null,
    exposure,
    exposureUnits: sum(exposure.map((e) => e.units)),
  };
}

/** "YYYY-MM" of a time, memoised per day: a merchant's few hundred transfers share a few hundred days. */
const monthsOfDays = new Map<number, string>();
const monthKey = (at: number) => {
  const day = Math.floor(at / DAY);
  let month = monthsOfDays.get(day);
  if (month === undefined) {
    month = monthOf(day * DAY);
    if (monthsOfDays.size > 10_000) monthsOfDays.clear();
    monthsOfDays.set(day, month);
  }
  return month;
};
const median = (values: number[]) => {
  const s = [...values].sort((a, b) => a - b);
  return s.length ? (s[Math.floor((s.length - 1) / 2)]! + s[Math.ceil((s.length - 1) / 2)]!) / 2 : 0;
};
const medianBig = (values: bigint[]) => {
  const s = [...values].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return s.length ? s[Math.floor((s.length - 1) / 2)]! : 0n;
};
const sum = (values: bigint[]) => values.reduce((a, b) => a + b, 0n);

/** Adds to a list in a map in place (a hub has tens of thousands of entries: no copying). */
function append<K, V>(map: Map<K, V[]>, key: K, value: V) {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/**
 * Wallets funded (mostly) by this one: a wallet is self-funded when more than half of everything
 * it received came from this wallet or from wallets already self-funded. Grown to a fixed point.
 */
function selfFundedWallets(facts: WalletFacts): Set<Address> {
  const funders = new Map<Address, WalletFacts["funding"]>();
  for (const f of facts.funding) if (f.wallet !== facts.address) append(funders, f.wallet, f);
  const own = new Set<Address>([facts.address]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [wallet, received] of funders) {
      if (own.has(wallet)) continue;
      const total = sum(received.map((f) => f.total));
      const ownFunding = sum(received.filter((f) => f.funder !== null && own.has(f.funder)).map((f) => f.total));
      if (isSelfFunded(ownFunding, total)) {
        own.add(wallet);
        grew = true;
      }
    }
  }
  own.delete(facts.address);
  return own;
}

/** Classifies each inflow: what counts as income, and why the rest does not. */
function classifyInflows(
  facts: WalletFacts,
  selfFunded: Set<Address>,
): { t: WalletTransfer; kind: InflowKind; income: bigint }[] {
  const sentTo = new Map<Address, bigint>();
  const out: { t: WalletTransfer; kind: InflowKind; income: bigint }[] = [];
  for (const t of [...facts.transfers].sort((a, b) => a.at - b.at)) {
    if (t.direction === "out") {
      sentTo.set(t.counterparty, (sentTo.get(t.counterparty) ?? 0n) + t.value);
      continue;
    }
    if (t.counterparty === facts.address) out.push({ t, kind: "self", income: 0n });
    else if (t.value < DUST_FLOOR_UNITS) out.push({ t, kind: "dust", income: 0n });
    else if (selfFunded.has(t.counterparty)) out.push({ t, kind: "cycled", income: 0n });
    else {
      // Money coming back from someone it paid (a refund, a return) is not earned.
      const owed = sentTo.get(t.counterparty) ?? 0n;
      const returned = owed < t.value ? owed : t.value;
      sentTo.set(t.counterparty, owed - returned);
      out.push({ t, kind: returned === t.value ? "returned" : "income", income: t.value - returned });
    }
  }
  return out;
}

/** A payer's cadence: regular gaps and amounts within a band, still paying. */
function cadenceOf(payments: { at: number; value: bigint }[], asOf: number): RecurringPayer["cadence"] | null {
  if (payments.length < 3) return null;
  const gaps = payments.slice(1).map((p, i) => (p.at - payments[i]!.at) / DAY);
  const gap = median(gaps);
  const cadence =
    gap >= 25 && gap <= 35 ? "monthly" : gap >= 12 && gap <= 16 ? "biweekly" : gap >= 5 && gap <= 9 ? "weekly" : null;
  if (!cadence) return null;
  const regularGaps = gaps.filter((g) => Math.abs(g - gap) <= gap * 0.4).length / gaps.length;
  const mid = Number(medianBig(payments.map((p) => p.value)));
  const inBand = payments.filter((p) => Math.abs(Number(p.value) - mid) <= mid * 0.25).length / payments.length;
  const stillPaying = asOf - payments.at(-1)!.at <= gap * 1.6 * DAY;
  return regularGaps >= 0.7 && inBand >= 0.75 && stillPaying ? cadence : null;
}

export function deriveSignals(facts: WalletFacts): Signals {
  const { asOf } = facts;
  const selfFunded = selfFundedWallets(facts);
  const inflows = classifyInflows(facts, selfFunded);
  const outflows = facts.transfers.filter((t) => t.direction === "out");
  const within = (days: number) => (t: { at: number }) => t.at > asOf - days * DAY;

  const inflowByKind: Record<InflowKind, bigint> = { income: 0n, dust: 0n, cycled: 0n, returned: 0n, self: 0n };
  for (const i of inflows) {
    inflowByKind[i.kind] += i.kind === "income" ? i.income : i.t.value;
    if (i.kind === "income") inflowByKind.returned += i.t.value - i.income;
  }

  // Income per calendar month over the last 12 complete months plus the current one.
  const incomeMonths = new Map<string, bigint>();
  for (let k = 12; k >= 0; k--) {
    const d = new Date(asOf * 1000);
    incomeMonths.set(monthOf(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - k, 1) / 1000), 0n);
  }
  for (const i of inflows)
    if (i.income > 0n && incomeMonths.has(monthKey(i.t.at)))
      incomeMonths.set(monthKey(i.t.at), incomeMonths.get(monthKey(i.t.at))! + i.income);
  const incomeByMonth = [...incomeMonths].map(([month, units]) => ({ month, units }));
  const lastThreeComplete = incomeByMonth.slice(-4, -1);
  const monthlyIncomeUnits = sum(lastThreeComplete.map((m) => m.units)) / 3n;

  // Weekly consistency: share of the last 13 full weeks with an income inflow.
  const weeks = new Set(
    inflows.filter((i) => i.income > 0n && within(91)(i.t)).map((i) => Math.floor((asOf - i.t.at) / (7 * DAY))),
  );
  const weeklyConsistency = [...weeks].filter((w) => w < 13).length / 13;

  // Recurring income: regular payers, or a business paid by many customers every month.
  const byPayer = new Map<Address, { at: number; value: bigint }[]>();
  for (const i of inflows)
    if (i.income > 0n && within(200)(i.t)) append(byPayer, i.t.counterparty, { at: i.t.at, value: i.income });
  const recurring: RecurringPayer[] = [];
  for (const [payer, payments] of byPayer) {
    if (payer === zeroAddress) continue;
    const cadence = cadenceOf(payments, asOf);
    if (!cadence) continue;
    const mid = medianBig(payments.map((p) => p.value));
    const perMonth = cadence === "monthly" ? 1n : cadence === "biweekly" ? 2n : 4n;
    recurring.push({ payer, cadence, payments: payments.length, medianUnits: mid, monthlyUnits: mid * perMonth });
  }
  const sixComplete = incomeByMonth.slice(-7, -1);
  const incomeIn = new Map<string, typeof inflows>();
  for (const i of inflows) if (i.income > 0n) append(incomeIn, monthKey(i.t.at), i);
  const payersPerMonth = sixComplete.map(
    (m) => new Set((incomeIn.get(m.month) ?? []).map((i) => i.t.counterparty)).size,
  );
  if (payersPerMonth.filter((n) => n >= 20).length >= 5 && weeklyConsistency >= 0.75) {
    const recurringPayers = new Set(recurring.map((r) => r.payer));
    const otherByMonth = sixComplete.map((m) =>
      (incomeIn.get(m.month) ?? []).filter((i) => !recurringPayers.has(i.t.counterparty)),
    );
    const monthly = medianBig(otherByMonth.map((other) => sum(other.map((i) => i.income))));
    recurring.push({
      payer: zeroAddress,
      cadence: "business",
      payments: otherByMonth.flat().length,
      medianUnits: monthly,
      monthlyUnits: monthly,
    });
  }
  const verifiedMonthlyIncomeUnits = sum(recurring.map((r) => r.monthlyUnits));

  const inflow90 = sum(inflows.filter((i) => within(90)(i.t)).map((i) => i.t.value));
  const outflow90 = sum(outflows.filter(within(90)).map((t) => t.value));
  const spend90 = sum(
    outflows
      .filter((t) => within(90)(t) && !selfFunded.has(t.counterparty) && t.counterparty !== facts.address)
      .map((t) => t.value),
  );
  const net180 =
    sum(inflows.filter((i) => within(180)(i.t)).map((i) => i.t.value)) -
    sum(outflows.filter(within(180)).map((t) => t.value));

  const incomeTotal = inflowByKind.income;
  const payerTotals = new Map<Address, bigint>();
  for (const i of inflows)
    if (i.income > 0n) payerTotals.set(i.t.counterparty, (payerTotals.get(i.t.counterparty) ?? 0n) + i.income);
  const topPayer = [...payerTotals.values()].reduce((a, b) => (a > b ? a : b), 0n);

  // Drain: inflow that leaves within 48 h for an address that appeared with this payment and
  // never received from it again (rules.ts).
  const firstSeen = new Map(facts.firstSeen.map((f) => [f.address, f.firstAt]));
  const drained = sum(
    drainCandidates(facts.address, facts.transfers)
      .filter((t) => isDrain(t, firstSeen.get(t.counterparty)))
      .map((t) => t.value),
  );
  const nonDustInflow = sum(inflows.filter((i) => i.kind !== "dust" && i.kind !== "self").map((i) => i.t.value));

  // History that counts: no dust, no transfers with itself or with wallets it funded itself.
  const genuine = facts.transfers.filter(
    (t) => t.value >= DUST_FLOOR_UNITS && t.counterparty !== facts.address && !selfFunded.has(t.counterparty),
  );
  const activeMonths = new Set(genuine.map((t) => monthKey(t.at)));
  const counterpartiesInWindow = new Set(
    genuine.filter((t) => t.counterparty !== zeroAddress).map((t) => t.counterparty),
  );
  const ratio = (a: bigint, b: bigint) => (b > 0n ? Number((a * 10_000n) / b) / 10_000 : 0);

  return {
    ageDays: facts.account ? Math.floor((asOf - facts.account.firstAt) / DAY) : 0,
    daysSinceLastActivity: facts.account ? Math.floor((asOf - facts.account.lastAt) / DAY) : null,
    activeMonths12: [...activeMonths].filter((m) => incomeByMonth.slice(-12).some((x) => x.month === m)).length,
    transfersInWindow: genuine.length,
    distinctCounterparties: counterpartiesInWindow.size,
    balanceUnits: sum(facts.balances.map((b) => b.balance)),
    inflowByKind,
    dustInflows: inflows.filter((i) => i.kind === "dust").length,
    incomeByMonth,
    monthlyIncomeUnits,
    weeklyConsistency,
    recurring,
    verifiedMonthlyIncomeUnits,
    threeMonth: { inflow: inflow90, outflow: outflow90, net: inflow90 - outflow90 },
    monthlySpendUnits: spend90 / 3n,
    sixMonthNetUnits: net180,
    topPayerShare: ratio(topPayer, incomeTotal),
    drainShare: Math.min(1, ratio(drained, nonDustInflow)),
    drainedUnits: drained,
    cycledShare: ratio(inflowByKind.cycled, nonDustInflow),
    selfFundedWallets: selfFunded.size,
    sanctions: sanctionsSignal(facts.sanctions),
  };
}
