import type { Address } from "../../../config/addresses.ts";
import type { CreditLotRow, CreditSpendRow, PaymentRow } from "../../store/schema.ts";
import { type SpendEvent, spendAllows } from "../credit-lifecycle.ts";
import { ABSENT } from "../lifecycle.ts";
import {
  type CreditHold,
  type CreditLedger,
  type CreditSpending,
  keyId,
  type NewSpend,
  type PaymentKey,
} from "./ledger.ts";

/**
 * Prepaid credit in memory, beside the memory ledger's payments (a lot is spendable once its
 * payment's row is settled): the contract of ledger/sql/credit.ts (test/ledger/contract.ts).
 * Every write is checked against SPEND_TRANSITIONS; each call runs to completion between awaits.
 */
export class MemoryCredit implements CreditLedger {
  private readonly lotsByKey = new Map<string, CreditLotRow>();
  private readonly spends = new Map<string, CreditSpendRow>();
  /** Live tokens: hash -> owner. */
  private readonly tokens = new Map<string, Address>();

  constructor(
    private readonly payments: (key: PaymentKey) => PaymentRow | undefined,
    private readonly now: () => number,
  ) {}

  /** Copies of every spend (a model test checks them). */
  snapshot(): { lots: CreditLotRow[]; spends: CreditSpendRow[] } {
    return {
      lots: [...this.lotsByKey.values()].map((l) => ({ ...l })),
      spends: [...this.spends.values()].map((s) => ({ ...s })),
    };
  }

  /** Time passes: every timestamp moves `ms` back (MemoryLedger.age). */
  age(ms: number): void {
    const back = (d: Date) => new Date(d.getTime() - ms);
    for (const lot of this.lotsByKey.values())
      Object.assign(lot, { createdAt: back(lot.createdAt), expiresAt: back(lot.expiresAt) });
    for (const s of this.spends.values())
      Object.assign(s, { createdAt: back(s.createdAt), updatedAt: back(s.updatedAt) });
  }

  private spendable(owner: Address): CreditLotRow[] {
    const now = this.now();
    return [...this.lotsByKey.values()]
      .filter(
        (lot) =>
          lot.payer === owner &&
          lot.expiresAt.getTime() > now &&
          this.payments(lot as PaymentKey)?.status === "settled" &&
          BigInt(lot.remaining) > 0n,
      )
      .sort((a, b) => a.expiresAt.getTime() - b.expiresAt.getTime() || a.nonce.localeCompare(b.nonce));
  }

  private allowed(spend: CreditSpendRow | undefined, event: SpendEvent): boolean {
    return spendAllows(spend?.status ?? ABSENT, event, spend?.updatedAt, this.now());
  }

  async addLot(purchase: PaymentKey, amount: bigint, expiresAt: Date): Promise<void> {
    const id = keyId(purchase);
    if (this.lotsByKey.has(id)) return;
    const createdAt = new Date(this.now());
    this.lotsByKey.set(id, {
      ...purchase,
      amount: amount.toString(),
      remaining: amount.toString(),
      createdAt,
      expiresAt,
    });
  }

  async balance(owner: Address): Promise<bigint> {
    return this.spendable(owner).reduce((sum, lot) => sum + BigInt(lot.remaining), 0n);
  }

  async hold(spend: NewSpend): Promise<CreditHold> {
    const owner = "owner" in spend.payer ? spend.payer.owner : this.tokens.get(spend.payer.tokenHash);
    if (!owner) return { unknownToken: true };
    const existing = spend.paymentId ? await this.find(owner, spend.paymentId) : undefined;
    if (existing) return { existing };
    const lots = this.spendable(owner);
    const before = lots.reduce((sum, lot) => sum + BigInt(lot.remaining), 0n);
    if (before < spend.amount) return { short: before };
    const draws: Record<string, string> = {};
    let left = spend.amount;
    let token: Address | undefined;
    let largest = -1n;
    for (const lot of lots) {
      if (left === 0n) break;
      const take = BigInt(lot.remaining) < left ? BigInt(lot.remaining) : left;
      draws[keyId(lot as PaymentKey)] = take.toString();
      lot.remaining = (BigInt(lot.remaining) - take).toString();
      left -= take;
      if (take > largest) [largest, token] = [take, lot.token as Address];
    }
    const at = new Date(this.now());
    const { payer: _, ...columns } = spend;
    const row: CreditSpendRow = {
      ...columns,
      owner,
      amount: spend.amount.toString(),
      draws,
      status: "held",
      responseStatus: null,
      responseType: null,
      responseBody: null,
      createdAt: at,
      updatedAt: at,
    };
    this.spends.set(spend.id, row);
    return { held: { ...row }, balance: before - spend.amount, token: token! };
  }

  async find(owner: Address, paymentId: string): Promise<CreditSpendRow | undefined> {
    const row = [...this.spends.values()].find((s) => s.owner === owner && s.paymentId === paymentId);
    return row && { ...row };
  }

  async spent(id: string, answer: { status: number; type: string; body: string }): Promise<void> {
    const row = this.spends.get(id);
    if (!this.allowed(row, "spent")) return;
    Object.assign(row!, {
      status: "spent",
      responseStatus: answer.status,
      responseType: answer.type,
      responseBody: row!.paymentId === null ? null : answer.body,
      updatedAt: new Date(this.now()),
    });
  }

  private giveBack(id: string, event: SpendEvent): boolean {
    const row = this.spends.get(id);
    if (!this.allowed(row, event)) return false;
    this.spends.delete(id);
    for (const [lot, amount] of Object.entries(row!.draws)) {
      const stored = this.lotsByKey.get(lot);
      if (stored) stored.remaining = (BigInt(stored.remaining) + BigInt(amount)).toString();
    }
    return true;
  }

  async release(id: string): Promise<void> {
    this.giveBack(id, "released");
  }

  async releaseAbandoned(): Promise<number> {
    return [...this.spends.keys()].filter((id) => this.giveBack(id, "abandoned")).length;
  }

  async lots(owner: Address) {
    return [...this.lotsByKey.values()]
      .filter((lot) => lot.payer === owner)
      .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime())
      .map((lot) => {
        const paid = this.payments(lot as PaymentKey);
        return { ...lot, status: paid?.status ?? null, transaction: paid?.transaction ?? null };
      });
  }

  async spending(owner: Address): Promise<CreditSpending[]> {
    const byDayRoute = new Map<string, CreditSpending>();
    for (const s of this.spends.values()) {
      if (s.owner !== owner || s.status !== "spent") continue;
      const day = s.createdAt.toISOString().slice(0, 10);
      const entry = byDayRoute.get(`${day} ${s.route}`) ?? { day, route: s.route, calls: 0, amount: 0n };
      entry.calls++;
      entry.amount += BigInt(s.amount);
      byDayRoute.set(`${day} ${s.route}`, entry);
    }
    return [...byDayRoute.values()].sort((a, b) => b.day.localeCompare(a.day) || a.route.localeCompare(b.route));
  }

  async recent(owner: Address, limit: number): Promise<CreditSpendRow[]> {
    return [...this.spends.values()]
      .filter((s) => s.owner === owner && s.status === "spent")
      .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime())
      .slice(0, limit)
      .map((s) => ({ ...s }));
  }

  async paidFor(owner: Address, subject: string, routes: string[], since: Date): Promise<boolean> {
    return [...this.spends.values()].some(
      (s) =>
        s.owner === owner &&
        s.subject === subject &&
        routes.includes(s.route) &&
        s.status === "spent" &&
        s.createdAt.getTime() > since.getTime(),
    );
  }

  async issueToken(owner: Address, tokenHash: string): Promise<void> {
    this.tokens.set(tokenHash, owner);
  }

  async revokeTokens(owner: Address): Promise<number> {
    const live = [...this.tokens].filter(([, o]) => o === owner);
    for (const [hash] of live) this.tokens.delete(hash);
    return live.length;
  }

  async tokenOwner(tokenHash: string): Promise<Address | undefined> {
    return this.tokens.get(tokenHash);
  }
}
