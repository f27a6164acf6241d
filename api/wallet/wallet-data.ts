import { desc, eq, gte, sql } from "ponder";
import type { Address } from "../../config/addresses.ts";
import type { IndexTarget } from "../../config/target.ts";
import { accountMonth, counterparty } from "../../ponder.schema.ts";
import { monthOf } from "../../shared/month.ts";
import type { IndexDb } from "../db.ts";
import { isoFromSeconds as iso, usdRoundedToCents as usd } from "../money.ts";
import { DAY } from "../scoring/facts.ts";
import type { Assessment } from "./assess.ts";

/**
 * walletData: the full picture of one wallet that the scores were computed from (documented in
 * docs/api.md): balances, monthly series per token, top counterparties and the income breakdown.
 */
export async function walletData(db: IndexDb, target: Pick<IndexTarget, "tokens">, a: Assessment) {
  const [monthly, topCounterparties] = await Promise.all([
    walletMonthly(db, target, a),
    walletTopCounterparties(db, a),
  ]);
  const s = a.result.signals;
  return {
    account: a.facts.account && {
      firstActiveAt: iso(a.facts.account.firstAt),
      lastActiveAt: iso(a.facts.account.lastAt),
      ageDays: s.ageDays,
      transfersIn: a.facts.account.transfersIn,
      transfersOut: a.facts.account.transfersOut,
    },
    balances: target.tokens.map((t) => {
      const units = a.facts.balances.find((b) => b.token === t.address)?.balance ?? 0n;
      return { token: t.address, symbol: t.symbol, balanceUnits: units.toString(), balanceUsd: usd(units) };
    }),
    monthly,
    topCounterparties,
    income: {
      byMonth: s.incomeByMonth.map((m) => ({ month: m.month, incomeUsd: usd(m.units) })),
      monthlyEstimateUsd: usd(s.monthlyIncomeUnits),
      verifiedMonthlyUsd: usd(s.verifiedMonthlyIncomeUnits),
      weeklyConsistencyPct: Math.round(s.weeklyConsistency * 100),
      recurringPayers: s.recurring.map((r) => ({
        payer: r.payer,
        cadence: r.cadence,
        payments: r.payments,
        medianUsd: usd(r.medianUnits),
        monthlyUsd: usd(r.monthlyUnits),
      })),
      inflowUsd: Object.fromEntries(Object.entries(s.inflowByKind).map(([kind, units]) => [kind, usd(units)])),
      dustInflows: s.dustInflows,
      selfFundedWallets: s.selfFundedWallets,
    },
  };
}

/** walletData.monthly: one row per month and token over the last 18 months (the account_month table). */
export async function walletMonthly(db: IndexDb, target: Pick<IndexTarget, "tokens">, a: Assessment) {
  const address = a.facts.address as Address;
  const symbol = (token: string) => target.tokens.find((t) => t.address === token)?.symbol ?? token;
  const firstMonth = monthOf(a.asOf.timestamp - 550 * DAY);
  const months = await db
    .select()
    .from(accountMonth)
    .where(sql`${eq(accountMonth.address, address)} and ${gte(accountMonth.month, firstMonth)}`)
    .orderBy(accountMonth.month, accountMonth.token);
  return months.map((m) => ({
    month: m.month,
    token: m.token,
    symbol: symbol(m.token),
    inflowUsd: usd(m.inflow),
    outflowUsd: usd(m.outflow),
    transfersIn: m.transfersIn,
    transfersOut: m.transfersOut,
    counterparties: m.counterparties,
    payers: m.payers,
    payees: m.payees,
  }));
}

/** walletData.topCounterparties: the 20 largest by volume, lifetime (the counterparty table). */
export async function walletTopCounterparties(db: IndexDb, a: Assessment) {
  const address = a.facts.address as Address;
  const top = await db
    .select({
      counterparty: counterparty.counterparty,
      totalIn: sql<string>`sum(${counterparty.totalIn})`.mapWith(BigInt),
      totalOut: sql<string>`sum(${counterparty.totalOut})`.mapWith(BigInt),
      transfersIn: sql<string>`sum(${counterparty.transfersIn})`.mapWith(Number),
      transfersOut: sql<string>`sum(${counterparty.transfersOut})`.mapWith(Number),
      firstAt: sql<string>`min(${counterparty.firstAt})`.mapWith(Number),
      lastAt: sql<string>`max(${counterparty.lastAt})`.mapWith(Number),
    })
    .from(counterparty)
    .where(eq(counterparty.address, address))
    .groupBy(counterparty.counterparty)
    .orderBy(desc(sql`sum(${counterparty.totalIn}) + sum(${counterparty.totalOut})`))
    .limit(20);
  return top.map((c) => ({
    counterparty: c.counterparty,
    receivedUsd: usd(c.totalIn),
    sentUsd: usd(c.totalOut),
    transfersIn: c.transfersIn,
    transfersOut: c.transfersOut,
    firstAt: iso(c.firstAt),
    lastAt: iso(c.lastAt),
  }));
}
