import type { Address } from "../../config/addresses.ts";
import { formatWholeUsd as money } from "../money.ts";
import type { ScoreResult } from "../scoring/model.ts";
import type { Facts } from "./facts.ts";
import { CAPABILITIES, type Intent } from "./language.ts";

/**
 * The deterministic engine's sentences: templates filled from facts, so every figure in an answer
 * is a figure of the facts behind it. Analyze's `summary` is `walletSummary`.
 */

/** "$3,400" or "$12.35": a USD figure of the facts, as it is written in answers. */
export const usdText = (n: number) =>
  `${n < 0 ? "-" : ""}$${Math.abs(n).toLocaleString("en-US", { maximumFractionDigits: 2 })}`;
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
const short = (address: string) => `${address.slice(0, 6)}…${address.slice(-4)}`;

/** A paragraph about a wallet from its score result (analyze's `summary`, chat's overview). */
export function walletSummary(address: string, r: ScoreResult): string {
  const s = r.signals;
  const parts = [
    s.ageDays > 0
      ? `${address} has moved stablecoins for ${Math.max(1, Math.round(s.ageDays / 30))} month(s), active in ${s.activeMonths12} of the last 12.`
      : `${address} has no indexed stablecoin history.`,
  ];
  if (s.recurring.length) {
    parts.push(
      `It has verified recurring income of about ${money(s.verifiedMonthlyIncomeUnits)} a month (${s.recurring.map((p) => (p.cadence === "business" ? "business revenue" : `${p.cadence} from ${p.payer}`)).join("; ")}).`,
    );
  } else if (s.monthlyIncomeUnits > 0n) {
    parts.push(`Its income is irregular, about ${money(s.monthlyIncomeUnits)} a month over the last three months.`);
  } else {
    parts.push("It shows no income over the last three months.");
  }
  parts.push(
    `Over 90 days it received ${money(s.threeMonth.inflow)} and sent ${money(s.threeMonth.outflow)}; it holds ${money(s.balanceUnits)} in USDT and USDC.`,
  );
  if (r.concerns.length) parts.push(`Concerns: ${r.concerns.join("; ")}.`);
  parts.push(
    `Financial health ${r.scores.financialHealth}/100, reputation ${r.scores.reputation}/100 (${r.scores.reputationCategory}). Recommendation: ${r.recommendation}. ${r.rationale}`,
  );
  return parts.join(" ");
}

export const capabilityList = () =>
  Object.entries(CAPABILITIES)
    .filter(([k]) => k !== "help")
    .map(([, v]) => v);

export function helpText(): string {
  return `I answer from the indexed Celo USDT/USDC transfers only. For a wallet (name it as 0x… in the message, or pass walletAddress), ask about: ${capabilityList().join("; ")}. Follow-ups in the same conversation keep the wallet.`;
}

export function unknownText(): string {
  return `I can't answer that from the indexed data. I can tell you, for a wallet: ${capabilityList().join("; ")}.`;
}

export function needWalletText(intent: Intent): string {
  if (intent === "compare")
    return 'Name two wallets to compare (0x followed by 40 hex characters), e.g. "compare 0x… and 0x…".';
  return "Which wallet? Name it in the message (0x followed by 40 hex characters) or pass walletAddress.";
}

export function scoresText(address: Address, f: Facts): string {
  const s = f.scores!;
  const verdict = s.isTrustworthy
    ? "Yes, it is trustworthy by this model: recommendation approve."
    : `Not as trustworthy by this model: recommendation ${s.recommendation}.`;
  return `${short(address)}: financial health ${s.financialHealth}/100, reputation ${s.reputation}/100 (${s.reputationCategory}). ${verdict} Rationale: ${s.rationale}${s.concerns.length ? ` Concerns: ${s.concerns.join("; ")}.` : ""}`;
}

export function incomeText(address: Address, f: Facts): string {
  const i = f.income!;
  const head = `${short(address)}: income ${i.incomeLabel}.`;
  if (i.recurring) {
    const payers = i.recurringPayers.map((p) =>
      p.cadence === "business"
        ? `business revenue from many customers, about ${usdText(p.monthlyUsd)} a month (median month)`
        : `${p.cadence} from ${p.payer} (${plural(p.payments, "payment")}, median ${usdText(p.medianUsd)}, ${usdText(p.monthlyUsd)} a month)`,
    );
    return `${head} It is recurring: verified ${usdText(i.verifiedMonthlyUsd)} a month from ${payers.join("; ")}. Income in ${i.weeklyConsistencyPct}% of the last 13 weeks.`;
  }
  const excluded = Object.entries(i.excludedInflowUsd)
    .filter(([, v]) => v > 0)
    .map(([k, v]) => `${k} ${usdText(v)}`);
  const tail = excluded.length ? ` Not counted as income over the year: ${excluded.join(", ")}.` : "";
  if (i.monthlyEstimateUsd > 0)
    return `${head} It is not recurring: no payer with a steady cadence. It averaged ${usdText(i.monthlyEstimateUsd)} a month over the last three complete months, with income in ${i.weeklyConsistencyPct}% of the last 13 weeks.${tail}`;
  return `${head} No income over the last three complete months${i.incomeUsdOverYear > 0 ? ` (${usdText(i.incomeUsdOverYear)} over the year)` : ""}.${tail}`;
}

export function loanText(address: Address, f: Facts): string {
  const l = f.loan!;
  const b = l.basis;
  const basis = `based on verified income ${usdText(b.verifiedMonthlyIncomeUsd)} a month, spending ${usdText(b.monthlySpendUsd)} a month, a balance of ${usdText(b.balanceUsd)}, ${plural(b.ageDays, "day")} of history and ${b.activeMonths} active months of 12`;
  if (l.maxUsd === 0)
    return `${short(address)}: no loan capacity (recommendation ${l.recommendation}); confidence ${l.confidence}, ${basis}.`;
  return `${short(address)}: loan capacity ${usdText(l.minUsd)} to ${usdText(l.maxUsd)}, confidence ${l.confidence}, ${basis}.`;
}

export function balancesText(address: Address, f: Facts): string {
  const b = f.balances!;
  return `${short(address)} holds ${usdText(b.totalUsd)}: ${b.balances.map((x) => `${usdText(x.balanceUsd)} ${x.symbol}`).join(", ")}.`;
}

export function activityText(address: Address, f: Facts, defaulted: boolean): string {
  const a = f.activity!;
  const t = a.totals;
  const months =
    a.months && a.months.length > 1
      ? ` By month: ${a.months.map((m) => `${m.month} in ${usdText(m.inflowUsd)} / out ${usdText(m.outflowUsd)}`).join("; ")}.`
      : "";
  const none = t.transfersIn + t.transfersOut === 0 ? " No transfers in that period." : "";
  return `${short(address)} over ${a.period.label}${defaulted ? " (no period named)" : ""}: received ${usdText(t.inflowUsd)} in ${plural(t.transfersIn, "transfer")}, sent ${usdText(t.outflowUsd)} in ${plural(t.transfersOut, "transfer")}, net ${usdText(t.netUsd)}.${none}${months}${a.note ? ` ${a.note}` : ""}`;
}

export function largestTransfersText(address: Address, f: Facts): string {
  const t = f.largestTransfers!;
  const which = t.direction === "in" ? "received" : t.direction === "out" ? "sent" : "";
  if (!t.transfers.length)
    return `${short(address)} has no ${which ? `${which} ` : ""}transfers in the last ${t.windowDays} days.`;
  const rows = t.transfers.map(
    (x, i) =>
      `${i + 1}. ${usdText(x.amountUsd)} ${x.symbol} ${x.direction === "in" ? "from" : "to"} ${x.counterparty} on ${x.at.slice(0, 10)}`,
  );
  return `${short(address)}'s largest ${which ? `${which} ` : ""}transfers over the last ${t.windowDays} days: ${rows.join("; ")}.`;
}

export function counterpartiesText(address: Address, f: Facts): string {
  const c = f.counterparties!.counterparties;
  if (!c.length) return `${short(address)} has no counterparties indexed.`;
  const rows = c.map(
    (x, i) =>
      `${i + 1}. ${x.counterparty}: received ${usdText(x.receivedUsd)} (${plural(x.transfersIn, "transfer")}), sent ${usdText(x.sentUsd)} (${plural(x.transfersOut, "transfer")})`,
  );
  return `${short(address)}'s top counterparties by volume: ${rows.join("; ")}.`;
}

export function passportText(address: Address, f: Facts): string {
  const p = f.passport!;
  if (!p.passport)
    return `${short(address)} has no passport: no valid attestation is published for it${p.reportsFound ? ` (${plural(p.reportsFound, "earlier report")} revoked, expired or superseded)` : ""}.`;
  const x = p.passport;
  return `${short(address)} has a valid passport ${x.reportId}, published ${x.publishedAt.slice(0, 10)}${x.expiresAt ? `, expiring ${x.expiresAt.slice(0, 10)}` : ", with no expiry"}: reputation ${x.reputationScore}, financial health ${x.financialHealthScore}, loan capacity ${x.loanCapacity}, reporter ${x.reporterContract}.`;
}

/** Why a score is where it is, and the changes that would move it (factors with points). */
export function factorsText(address: Address, f: Facts): string {
  const x = f.factors!;
  const s = x.signals;
  const label = (score: string) => (score === "financialHealth" ? "health" : "reputation");
  const lost = (k: { room: number; points: number }) => k.room + Math.max(0, -k.points);
  const weakest = x.factors.filter((k) => lost(k) > 0).sort((a, b) => lost(b) - lost(a));
  const why = weakest
    .slice(0, 5)
    .map((k) =>
      k.points < 0
        ? `${k.factor} costs ${usdlessPoints(-k.points)} ${label(k.score)} points`
        : `${k.factor} gives ${usdlessPoints(k.points)} of ${k.max} ${label(k.score)} points`,
    )
    .join("; ");
  const advice: string[] = [];
  const has = (name: string) => weakest.find((k) => k.factor === name);
  if (has("verified recurring income"))
    advice.push(
      "a payer paying at a steady weekly, biweekly or monthly cadence (3 or more similar payments) would add 30 health and 10 reputation points",
    );
  if (has("income consistency"))
    advice.push(`income in more of the last 13 weeks (now ${s.weeklyConsistencyPct}%) raises income consistency`);
  if (has("six-month savings"))
    advice.push(
      `receiving more than it spends over six months (six-month net now ${usdText(s.sixMonthNetUsd)}) earns up to 15 points`,
    );
  if (has("balance buffer"))
    advice.push(
      `a balance of three months' spending (spending ${usdText(s.monthlySpendUsd)} a month; balance ${usdText(s.balanceUsd)}) fills the balance buffer`,
    );
  if (has("spending within means"))
    advice.push(
      `spending at most 90% of income (spending ${usdText(s.monthlySpendUsd)} against verified income ${usdText(s.verifiedMonthlyIncomeUsd)} a month) gives 15 points`,
    );
  if (has("active months (of 12)"))
    advice.push(`a genuine transfer every month (${s.activeMonths} of the last 12 so far)`);
  if (has("counterparty diversity"))
    advice.push(`more distinct genuine counterparties (${s.distinctCounterparties} now; 10 give the full 15)`);
  if (has("recent activity"))
    advice.push(
      `activity within 30 days (last activity ${s.daysSinceLastActivity ?? "never"}${s.daysSinceLastActivity === null ? "" : " days ago"})`,
    );
  if (has("wallet age")) advice.push(`time: wallet age adds points until a year of history (${s.ageDays} days now)`);
  if (has("drain pattern"))
    advice.push(`no longer passing inflows on to fresh one-time addresses (drain share ${s.drainSharePct}%)`);
  if (has("cycled own money"))
    advice.push(`no longer cycling its own money through wallets it funded (cycled share ${s.cycledSharePct}%)`);
  return `${short(address)}: financial health ${x.financialHealth}/100, reputation ${x.reputation}/100. What holds them down: ${why || "nothing: every factor is at its maximum"}.${advice.length ? ` What would raise them: ${advice.slice(0, 4).join("; ")}.` : ""}`;
}

const usdlessPoints = (n: number) => String(Math.round(n * 10) / 10);

export function compareText(a: Address, fa: Facts, b: Address, fb: Facts): string {
  const line = (address: Address, f: Facts) =>
    `${short(address)}: health ${f.scores!.financialHealth}, reputation ${f.scores!.reputation}, recommendation ${f.scores!.recommendation}, verified income ${usdText(f.income!.verifiedMonthlyUsd)} a month (${f.income!.incomeLabel}), loan capacity up to ${usdText(f.loan!.maxUsd)} (${f.loan!.confidence} confidence), balance ${usdText(f.balances!.totalUsd)}`;
  const rank = { approve: 2, review: 1, decline: 0 } as const;
  const [sa, sb] = [fa.scores!, fb.scores!];
  const better =
    rank[sa.recommendation] !== rank[sb.recommendation]
      ? rank[sa.recommendation] > rank[sb.recommendation]
        ? a
        : b
      : sa.financialHealth + sa.reputation !== sb.financialHealth + sb.reputation
        ? sa.financialHealth + sa.reputation > sb.financialHealth + sb.reputation
          ? a
          : b
        : null;
  return `${line(a, fa)}. ${line(b, fb)}. ${better ? `${short(better)} is the stronger borrower by this model.` : "They rank the same by this model."}`;
}
