import { zeroAddress } from "viem";
import type { Address } from "../../config/addresses.ts";
import { DAY, dayOf, HOUR, type Month, randomMoment } from "./calendar.ts";
import type { PlannedTransfer, TokenSymbol } from "./plan.ts";
import { actorAddress, Random, usd } from "./random.ts";

type Archetype = "employee" | "gig" | "shop" | "saver" | "churned" | "casual";

type Member = {
  address: Address;
  kind: Archetype;
  token: TokenSymbol;
  /** Employees: employer, salary and pay day. */
  employer?: number;
  salary?: number;
  payDay?: number;
  /** Churned wallets are active only in months [activeFrom, activeTo]. */
  activeFrom?: number;
  activeTo?: number;
};

/** Transfers per member per month at activity 1 (measured on the generator), to size a target. */
const TRANSFERS_PER_MEMBER_MONTH = 10;

const MIX: [Archetype, number][] = [
  ["employee", 0.45],
  ["gig", 0.15],
  ["shop", 0.1],
  ["saver", 0.1],
  ["churned", 0.1],
  ["casual", 0.1],
];

/**
 * The background population: ordinary wallets of a few kinds (employees paid by a handful of
 * companies, gig workers, shops, savers using an exchange, churned and casual wallets) whose money
 * moves among them, generated a month at a time so millions of transfers never sit in memory.
 */
export class Population {
  readonly members: Member[];
  readonly shops: Address[];
  private readonly companies: { address: Address; token: TokenSymbol }[];
  private readonly exchange: Address;
  private readonly rng: Random;
  private readonly activity: number;
  private readonly seed: number;

  constructor(options: { seed: number; wallets: number; months: number; targetTransfers?: number }) {
    const { seed, wallets, months } = options;
    this.seed = seed;
    this.rng = new Random(seed ^ 0x5eed);
    this.activity = options.targetTransfers
      ? Math.max(0.05, options.targetTransfers / (wallets * months * TRANSFERS_PER_MEMBER_MONTH))
      : 1;
    this.exchange = actorAddress(seed, "exchange-hot-wallet");
    this.companies = Array.from({ length: Math.max(2, Math.round(wallets / 40)) }, (_, i) => ({
      address: actorAddress(seed, `company-${i}`),
      token: i % 3 === 2 ? "USDC" : "USDT",
    }));
    this.members = [];
    let cursor = 0;
    for (const [kind, share] of MIX) {
      const count = kind === "casual" ? wallets - cursor : Math.round(wallets * share);
      for (let i = 0; i < count; i++, cursor++) this.members.push(this.member(seed, cursor, kind, months));
    }
    this.shops = this.members.filter((m) => m.kind === "shop").map((m) => m.address);
    if (this.shops.length === 0) this.shops.push(actorAddress(seed, "corner-shop"));
  }

  private member(seed: number, index: number, kind: Archetype, months: number): Member {
    const rng = this.rng;
    const base: Member = {
      address: actorAddress(seed, `wallet-${index}`),
      kind,
      token: rng.chance(0.7) ? "USDT" : "USDC",
    };
    if (kind === "employee" || kind === "churned") {
      const employer = rng.int(0, this.companies.length - 1);
      Object.assign(base, {
        employer,
        token: this.companies[employer]!.token,
        salary: Math.round(rng.between(1_400, 6_500) / 10) * 10,
        payDay: rng.int(1, 28),
      });
    }
    if (kind === "churned") {
      const from = rng.int(0, Math.max(0, months - 4));
      Object.assign(base, { activeFrom: from, activeTo: Math.min(months - 1, from + rng.int(2, 6)) });
    }
    return base;
  }

  /** All transfers of one month, unsorted; the seeder orders them and caps spending at balances. */
  month(month: Month): PlannedTransfer[] {
    const rng = this.rng;
    const out: PlannedTransfer[] = [];
    const add = (
      at: number | null,
      token: TokenSymbol,
      from: Address,
      to: Address,
      amount: PlannedTransfer["amount"],
    ) => {
      if (at !== null && at >= month.start && at < month.end) out.push({ at, token, from, to, amount });
    };
    const spend = (m: Member, count: number, median: number) => {
      for (let i = 0; i < count; i++) {
        const at = randomMoment(month, () => rng.next());
        add(at, m.token, m.address, rng.pick(this.shops), usd(Math.max(1, rng.amount(median, 0.8))));
      }
    };

    // Money enters the economy through companies' revenue and the exchange (mints stand for on-ramps).
    const payroll = new Map<number, number>();
    for (const m of this.members)
      if (m.employer !== undefined) payroll.set(m.employer, (payroll.get(m.employer) ?? 0) + m.salary!);
    for (const [i, c] of this.companies.entries())
      add(dayOf(month, 1, 0), c.token, zeroAddress, c.address, usd((payroll.get(i) ?? 0) * 1.05 + 1_000));
    add(dayOf(month, 1, 0), "USDT", zeroAddress, this.exchange, usd(50_000 + 400 * this.members.length));
    add(dayOf(month, 1, 0), "USDC", zeroAddress, this.exchange, usd(50_000 + 400 * this.members.length));

    for (const m of this.members) {
      switch (m.kind) {
        // biome-ignore lint/suspicious/noFallthroughSwitchClause: while active, a churned wallet behaves like an employee
        case "churned":
          if (month.index < m.activeFrom! || month.index > m.activeTo!) break;
        case "employee": {
          const company = this.companies[m.employer!]!;
          const payday = dayOf(month, m.payDay!, 9);
          add(payday, company.token, company.address, m.address, usd(m.salary!));
          if (rng.chance(0.6))
            add(
              dayOf(month, rng.int(1, 5), 10),
              m.token,
              m.address,
              actorAddress(this.seed, `landlord-${m.employer}`),
              usd(m.salary! * 0.3),
            );
          spend(m, rng.poisson(12 * this.activity), m.salary! / 60);
          if (rng.chance(0.3 * this.activity))
            add(
              randomMoment(month, () => rng.next()),
              m.token,
              m.address,
              rng.pick(this.members).address,
              usd(rng.amount(40)),
            );
          break;
        }
        case "gig": {
          const jobs = rng.poisson(7 * this.activity);
          for (let i = 0; i < jobs; i++) {
            const payer = rng.chance(0.5) ? rng.pick(this.companies) : { address: this.exchange, token: m.token };
            add(
              randomMoment(month, () => rng.next()),
              payer.token,
              payer.address,
              m.address,
              usd(Math.max(5, rng.amount(70, 0.8))),
            );
          }
          spend(m, rng.poisson(7 * this.activity), 45);
          break;
        }
        case "shop":
          for (const day of [7, 14, 21, 28]) {
            add(dayOf(month, day, 20), "USDT", m.address, this.exchange, { share: 0.6 });
            add(dayOf(month, day, 20), "USDC", m.address, this.exchange, { share: 0.6 });
          }
          break;
        case "saver":
          if (rng.chance(0.3))
            add(
              randomMoment(month, () => rng.next()),
              m.token,
              this.exchange,
              m.address,
              usd(rng.between(1_000, 40_000)),
            );
          if (rng.chance(0.15))
            add(
              randomMoment(month, () => rng.next()),
              m.token,
              m.address,
              this.exchange,
              { share: 0.2 },
            );
          break;
        case "casual":
          if (rng.chance(0.5))
            add(
              randomMoment(month, () => rng.next()),
              m.token,
              this.exchange,
              m.address,
              usd(rng.amount(150)),
            );
          spend(m, rng.poisson(2 * this.activity), 30);
          break;
      }
    }
    // Companies sweep what is left of their revenue to the exchange at month end.
    for (const c of this.companies)
      add(month.start + 27 * DAY + 23 * HOUR, c.token, c.address, this.exchange, { share: 0.5 });
    return out;
  }
}
