import { zeroAddress } from "viem";
import type { Address } from "../../config/addresses.ts";
import { DAY, dayOf, HOUR, type Month, randomMoment } from "./calendar.ts";
import type { PersonaTruth, PlannedTransfer, TokenSymbol } from "./plan.ts";
import { actorAddress, type Random, usd } from "./random.ts";

export type PersonaContext = {
  rng: Random;
  seed: number;
  months: Month[];
  now: number;
  /** Background shops where personas spend, so their counterparties look like everyone else's. */
  shops: Address[];
};

type PersonaPlan = PersonaTruth & { transfers: PlannedTransfer[] };

/**
 * The named personas with a known ground truth. Each builder returns the wallet, the verdict a
 * good model should reach, the facts seeded on purpose, and its transfers.
 */
export function planPersonas(ctx: PersonaContext): {
  personas: Record<string, PersonaTruth>;
  transfers: PlannedTransfer[];
} {
  const plans: Record<string, PersonaPlan> = {
    salaried: salaried(ctx),
    "gig-worker": gigWorker(ctx),
    merchant: merchant(ctx),
    "new-wallet": newWallet(ctx),
    dormant: dormant(ctx),
    "self-funder": selfFunder(ctx),
    drainer: drainer(ctx),
    whale: whale(ctx),
    "one-off": oneOff(ctx),
    "dust-spammed": dustSpammed(ctx),
    // Last, so the shared rng draws the personas above exactly as before these two existed.
    sanctioned: sanctioned(ctx),
    delisted: delisted(ctx),
  };
  const personas: Record<string, PersonaTruth> = {};
  const transfers: PlannedTransfer[] = [];
  for (const [name, { transfers: own, ...truth }] of Object.entries(plans)) {
    personas[name] = truth;
    transfers.push(...own);
  }
  return { personas, transfers };
}

const mint = (at: number, token: TokenSymbol, to: Address, amount: bigint): PlannedTransfer => ({
  at,
  token,
  from: zeroAddress,
  to,
  amount,
});
const pay = (
  at: number,
  token: TokenSymbol,
  from: Address,
  to: Address,
  amount: PlannedTransfer["amount"],
): PlannedTransfer => ({ at, token, from, to, amount });

/** `count` card-like payments to shops during the month, after `notBefore`. */
function spending(
  ctx: PersonaContext,
  month: Month,
  wallet: Address,
  token: TokenSymbol,
  count: number,
  median: number,
  notBefore = month.start,
): PlannedTransfer[] {
  const out: PlannedTransfer[] = [];
  for (let i = 0; i < count; i++) {
    const at = randomMoment(month, () => ctx.rng.next());
    if (at < notBefore) continue;
    out.push(pay(at, token, wallet, ctx.rng.pick(ctx.shops), usd(Math.max(1, ctx.rng.amount(median, 0.7)))));
  }
  return out;
}

function salaried(ctx: PersonaContext): PersonaPlan {
  const wallet = actorAddress(ctx.seed, "persona:salaried");
  const employer = actorAddress(ctx.seed, "acme-payroll");
  const landlord = actorAddress(ctx.seed, "landlord");
  const transfers: PlannedTransfer[] = [];
  let salaryPayments = 0;
  let firstPayday: number | null = null;
  for (const month of ctx.months) {
    const salary = month.index < 8 ? 3_200 : 3_400;
    const funding = dayOf(month, 1, 6);
    if (funding !== null) transfers.push(mint(funding, "USDT", employer, usd(salary * 2)));
    const payday = dayOf(month, 25, 9);
    if (payday !== null) {
      transfers.push(pay(payday, "USDT", employer, wallet, usd(salary)));
      salaryPayments++;
      firstPayday ??= payday;
    }
    if (firstPayday === null) continue;
    const rent = dayOf(month, 2, 10);
    if (rent !== null && rent > firstPayday) transfers.push(pay(rent, "USDT", wallet, landlord, usd(1_100)));
    transfers.push(...spending(ctx, month, wallet, "USDT", ctx.rng.int(18, 28), 32, firstPayday + HOUR));
  }
  return {
    address: wallet,
    expected: "approve",
    description:
      "Monthly payroll from one employer on the 25th, rent on the 2nd, regular card-like spending, growing savings.",
    truth: { employer, payDay: 25, monthlySalaryUsd: 3_400, salaryPayments, token: "USDT" },
    transfers,
  };
}

function gigWorker(ctx: PersonaContext): PersonaPlan {
  const wallet = actorAddress(ctx.seed, "persona:gig-worker");
  const clients = Array.from({ length: 45 }, (_, i) => actorAddress(ctx.seed, `gig-client-${i}`));
  const transfers: PlannedTransfer[] = [];
  let gigPayments = 0;
  for (const month of ctx.months) {
    for (const client of clients) {
      const funding = dayOf(month, 1, 1);
      if (funding !== null && ctx.rng.chance(0.4)) transfers.push(mint(funding, "USDC", client, usd(600)));
    }
    const jobs = ctx.rng.poisson(14);
    for (let i = 0; i < jobs; i++) {
      const at = randomMoment(month, () => ctx.rng.next());
      transfers.push(
        pay(at, "USDC", ctx.rng.pick(clients), wallet, usd(Math.min(400, Math.max(8, ctx.rng.amount(55, 0.7))))),
      );
      gigPayments++;
    }
    transfers.push(...spending(ctx, month, wallet, "USDC", ctx.rng.poisson(12), 40));
  }
  return {
    address: wallet,
    expected: "review",
    description: "Many small irregular payments from dozens of clients, spends most of it.",
    truth: { clients: clients.length, gigPayments, token: "USDC" },
    transfers,
  };
}

function merchant(ctx: PersonaContext): PersonaPlan {
  const wallet = actorAddress(ctx.seed, "persona:merchant");
  const customers = Array.from({ length: 180 }, (_, i) => actorAddress(ctx.seed, `merchant-customer-${i}`));
  const supplier = actorAddress(ctx.seed, "merchant-supplier");
  const owner = actorAddress(ctx.seed, "merchant-owner");
  const transfers: PlannedTransfer[] = [];
  let sales = 0;
  for (const month of ctx.months) {
    const funding = dayOf(month, 1, 0);
    if (funding !== null) for (const customer of customers) transfers.push(mint(funding, "USDC", customer, usd(120)));
    const count = ctx.rng.poisson(260);
    for (let i = 0; i < count; i++) {
      const at = randomMoment(month, () => ctx.rng.next());
      if (at < month.start + HOUR) continue;
      transfers.push(
        pay(at, "USDC", ctx.rng.pick(customers), wallet, usd(Math.min(110, Math.max(2, ctx.rng.amount(20, 0.6))))),
      );
      sales++;
    }
    for (const day of [7, 14, 21, 28]) {
      const at = dayOf(month, day, 18);
      if (at !== null) transfers.push(pay(at, "USDC", wallet, supplier, { share: 0.5 }));
    }
    const draw = dayOf(month, 28, 20);
    if (draw !== null) transfers.push(pay(draw, "USDC", wallet, owner, { share: 0.3 }));
  }
  return {
    address: wallet,
    expected: "approve",
    description: "Hundreds of sales a month from 180 paying customers; pays its supplier weekly and its owner monthly.",
    truth: { customers: customers.length, sales, supplier, token: "USDC" },
    transfers,
  };
}

function newWallet(ctx: PersonaContext): PersonaPlan {
  const wallet = actorAddress(ctx.seed, "persona:new-wallet");
  const friend = actorAddress(ctx.seed, "new-wallet-friend");
  const firstAt = ctx.now - 12 * DAY;
  const transfers = [
    mint(firstAt - HOUR, "USDT", friend, usd(1_000)),
    pay(firstAt, "USDT", friend, wallet, usd(450)),
    pay(firstAt + 2 * DAY, "USDT", wallet, ctx.rng.pick(ctx.shops), usd(38.5)),
    pay(firstAt + 5 * DAY, "USDT", wallet, ctx.rng.pick(ctx.shops), usd(61.2)),
    pay(firstAt + 9 * DAY, "USDT", wallet, ctx.rng.pick(ctx.shops), usd(24)),
  ];
  return {
    address: wallet,
    expected: "decline",
    description: "First activity 12 days ago: one inflow from a friend and three small payments (thin file).",
    truth: { firstActivityDaysAgo: 12, thinFile: true },
    transfers,
  };
}

function dormant(ctx: PersonaContext): PersonaPlan {
  const wallet = actorAddress(ctx.seed, "persona:dormant");
  const employer = actorAddress(ctx.seed, "old-employer");
  const activeMonths = ctx.months.slice(0, Math.max(1, ctx.months.length - 9));
  const transfers: PlannedTransfer[] = [];
  let lastAt = 0;
  for (const month of activeMonths) {
    const payday = dayOf(month, 10, 9)!;
    transfers.push(mint(payday - HOUR, "USDT", employer, usd(1_800)));
    transfers.push(pay(payday, "USDT", employer, wallet, usd(1_800)));
    const spends = spending(ctx, month, wallet, "USDT", 10, 60, payday + HOUR).filter(
      (t) => t.at < month.start + 27 * DAY,
    );
    transfers.push(...spends);
    lastAt = Math.max(lastAt, payday, ...spends.map((t) => t.at));
  }
  return {
    address: wallet,
    expected: "decline",
    description: "Paid and spending for its first months, silent ever since (dormant).",
    truth: { activeMonths: activeMonths.length, lastActivity: new Date(lastAt * 1000).toISOString(), dormant: true },
    transfers,
  };
}

function selfFunder(ctx: PersonaContext): PersonaPlan {
  const wallet = actorAddress(ctx.seed, "persona:self-funder");
  const mules = Array.from({ length: 5 }, (_, i) => actorAddress(ctx.seed, `self-funder-mule-${i}`));
  const transfers: PlannedTransfer[] = [mint(ctx.months[0]!.start + DAY, "USDT", wallet, usd(6_000))];
  let cycledBackUsd = 0;
  for (const month of ctx.months) {
    // Every other month it funds its own wallets; every month they send part of it back on a
    // steady schedule, dressed up as income.
    if (month.index % 2 === 0) {
      const at = dayOf(month, 3, 12);
      if (at !== null) for (const mule of mules) transfers.push(pay(at, "USDT", wallet, mule, usd(800)));
    }
    mules.forEach((mule, i) => {
      const at = dayOf(month, 5 + i, 9);
      if (at === null || (month.index === 0 && at < (dayOf(month, 3, 12) ?? 0))) return;
      transfers.push(pay(at, "USDT", mule, wallet, usd(400)));
      cycledBackUsd += 400;
    });
    transfers.push(...spending(ctx, month, wallet, "USDT", 4, 35));
  }
  return {
    address: wallet,
    expected: "decline",
    description: "Its 'income' is money cycled back, on a schedule, from five wallets it funded itself.",
    truth: { fundedWallets: mules.length, cycledBackUsd, realIncomeUsd: 0 },
    transfers,
  };
}

function drainer(ctx: PersonaContext): PersonaPlan {
  const wallet = actorAddress(ctx.seed, "persona:drainer");
  const payers = Array.from({ length: 12 }, (_, i) => actorAddress(ctx.seed, `drainer-source-${i}`));
  const transfers: PlannedTransfer[] = [];
  let sinks = 0;
  for (const month of ctx.months) {
    const inflows = ctx.rng.int(2, 4);
    for (let i = 0; i < inflows; i++) {
      const at = randomMoment(month, () => ctx.rng.next());
      if (at + 12 * HOUR >= month.end) continue;
      const payer = ctx.rng.pick(payers);
      const amount = usd(ctx.rng.int(300, 2_000));
      transfers.push(mint(at - HOUR, "USDT", payer, amount), pay(at, "USDT", payer, wallet, amount));
      // Within hours nearly everything leaves for an address never seen before.
      const sink = actorAddress(ctx.seed, `drain-sink-${sinks++}`);
      transfers.push(pay(at + ctx.rng.int(1, 11) * HOUR, "USDT", wallet, sink, { share: 0.97 }));
    }
  }
  return {
    address: wallet,
    expected: "decline",
    description: "Receives, then within hours sends ~97% of its balance to a fresh address each time.",
    truth: { freshSinks: sinks, drainShare: 0.97 },
    transfers,
  };
}

function whale(ctx: PersonaContext): PersonaPlan {
  const wallet = actorAddress(ctx.seed, "persona:whale");
  const exchange = actorAddress(ctx.seed, "whale-exchange");
  const first = ctx.months[0]!;
  const transfers: PlannedTransfer[] = [
    mint(first.start + 2 * DAY, "USDC", exchange, usd(3_000_000)),
    pay(first.start + 3 * DAY, "USDC", exchange, wallet, usd(2_500_000)),
  ];
  for (const month of ctx.months) {
    if (month.index % 3 !== 1) continue;
    const at = dayOf(month, 15, 14);
    if (at !== null) transfers.push(pay(at, "USDC", wallet, exchange, usd(ctx.rng.int(5_000, 20_000))));
  }
  return {
    address: wallet,
    expected: "review",
    description: "A 2.5M USDC balance from one exchange withdrawal, a few outflows, no income.",
    truth: { openingDepositUsd: 2_500_000, recurringIncome: false },
    transfers,
  };
}

function oneOff(ctx: PersonaContext): PersonaPlan {
  const wallet = actorAddress(ctx.seed, "persona:one-off");
  const payer = actorAddress(ctx.seed, "one-off-payer");
  const month = ctx.months[Math.min(4, ctx.months.length - 1)]!;
  const at = dayOf(month, 12, 15) ?? month.start + HOUR;
  const transfers: PlannedTransfer[] = [
    mint(at - HOUR, "USDT", payer, usd(50_000)),
    pay(at, "USDT", payer, wallet, usd(50_000)),
  ];
  for (const later of ctx.months.filter((m) => m.index > month.index))
    transfers.push(...spending(ctx, later, wallet, "USDT", 3, 120));
  return {
    address: wallet,
    expected: "review",
    description: "One large inflow of 50,000 USDT, then modest spending; nothing recurring.",
    truth: { singleInflowUsd: 50_000, recurringIncome: false },
    transfers,
  };
}

function dustSpammed(ctx: PersonaContext): PersonaPlan {
  const wallet = actorAddress(ctx.seed, "persona:dust-spammed");
  const friend = actorAddress(ctx.seed, "dust-friend");
  const spammers = Array.from({ length: 120 }, (_, i) => actorAddress(ctx.seed, `dust-spammer-${i}`));
  const transfers: PlannedTransfer[] = [];
  const recent = ctx.months.slice(-10);
  const firstRecent = recent[0]!;
  for (const spammer of spammers) transfers.push(mint(firstRecent.start + HOUR, "USDT", spammer, 1_000n));
  transfers.push(mint(firstRecent.start + 2 * HOUR, "USDT", friend, usd(300)));
  transfers.push(pay(firstRecent.start + DAY, "USDT", friend, wallet, usd(200)));
  let dustInflows = 0;
  for (let i = 0; i < 360; i++) {
    const month = recent[i % recent.length]!;
    const at = randomMoment(month, () => ctx.rng.next());
    if (at <= firstRecent.start + 2 * HOUR) continue;
    transfers.push(pay(at, "USDT", ctx.rng.pick(spammers), wallet, BigInt(ctx.rng.int(1, 9))));
    dustInflows++;
  }
  for (const month of recent.slice(1)) transfers.push(...spending(ctx, month, wallet, "USDT", 1, 12));
  return {
    address: wallet,
    expected: "decline",
    description: "Hundreds of sub-cent inflows from 120 spam addresses, one real 200 USDT inflow, little else.",
    truth: { dustInflows, dustMaxUnits: 9, realInflowUsd: 200 },
    transfers,
  };
}

/**
 * A salaried-like history of its own: an employer minting on the 1st and paying on `payDay`, rent
 * to its own landlord, card-like spending at the shops. For personas whose only difference from an
 * ordinary employee is what the sanctions oracle says about them.
 */
function employee(
  ctx: PersonaContext,
  label: string,
  terms: { salaryUsd: number; payDay: number; rentUsd: number; rentDay: number },
) {
  const wallet = actorAddress(ctx.seed, `persona:${label}`);
  const employer = actorAddress(ctx.seed, `${label}-employer`);
  const landlord = actorAddress(ctx.seed, `${label}-landlord`);
  const transfers: PlannedTransfer[] = [];
  let salaryPayments = 0;
  let firstPayday: number | null = null;
  for (const month of ctx.months) {
    const funding = dayOf(month, 1, 6);
    if (funding !== null) transfers.push(mint(funding, "USDT", employer, usd(terms.salaryUsd * 2)));
    const payday = dayOf(month, terms.payDay, 9);
    if (payday !== null) {
      transfers.push(pay(payday, "USDT", employer, wallet, usd(terms.salaryUsd)));
      salaryPayments++;
      firstPayday ??= payday;
    }
    if (firstPayday === null) continue;
    const rent = dayOf(month, terms.rentDay, 10);
    if (rent !== null && rent > firstPayday) transfers.push(pay(rent, "USDT", wallet, landlord, usd(terms.rentUsd)));
    transfers.push(...spending(ctx, month, wallet, "USDT", ctx.rng.int(18, 28), 32, firstPayday + HOUR));
  }
  const truth = {
    employer,
    payDay: terms.payDay,
    monthlySalaryUsd: terms.salaryUsd,
    salaryPayments,
    token: "USDT",
  };
  return { wallet, transfers, truth, firstPayday };
}

function sanctioned(ctx: PersonaContext): PersonaPlan {
  const { wallet, transfers, truth, firstPayday } = employee(ctx, "sanctioned", {
    salaryUsd: 3_000,
    payDay: 15,
    rentUsd: 1_000,
    rentDay: 3,
  });
  // It pays one associate directly about once a month over the last 8 months (within the last 12),
  // so that wallet has a sanctioned counterparty of its own.
  const counterparty = actorAddress(ctx.seed, "sanctioned-associate");
  const historyStart = ctx.months[0]!.start;
  let counterpartyPayments = 0;
  for (let k = 0; k < 8; k++) {
    const at = ctx.now - (3 + 30 * k) * DAY + ctx.rng.int(0, 8) * HOUR;
    if (at >= ctx.now || at < historyStart || firstPayday === null || at <= firstPayday + HOUR) continue;
    transfers.push(pay(at, "USDT", wallet, counterparty, usd(ctx.rng.int(150, 400))));
    counterpartyPayments++;
  }
  return {
    address: wallet,
    expected: "decline",
    description:
      "A salaried-like history (payroll on the 15th, rent, card-like spending), but listed on the Chainalysis sanctions oracle at the end of the history.",
    truth: { ...truth, listed: true, counterparty, counterpartyPayments },
    transfers,
  };
}

function delisted(ctx: PersonaContext): PersonaPlan {
  const { wallet, transfers, truth } = employee(ctx, "delisted", {
    salaryUsd: 3_100,
    payDay: 10,
    rentUsd: 950,
    rentDay: 4,
  });
  return {
    address: wallet,
    expected: "approve",
    description:
      "A salaried-like history (payroll on the 10th, rent, card-like spending); listed on the sanctions oracle, then removed from it: not sanctioned now.",
    truth: { ...truth, listed: false, delisted: true },
    transfers,
  };
}
