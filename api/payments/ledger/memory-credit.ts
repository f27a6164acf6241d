import type { Address } from "../../../config/addresses.ts";
import { minUnits } from "../../money.ts";
import type { CreditLeaseRow, CreditLotRow, CreditSpendRow, PaymentRow } from "../../store/schema.ts";
import { type SpendEvent, spendAllows } from "../credit-lifecycle.ts";
import { ABANDONED_AFTER_MS, ABSENT } from "../lifecycle.ts";
import {
  type AbandonedSpend,
  type CreditHold,
  type CreditLedger,
  type CreditShort,
  type CreditSpending,
  type HeldSpendOutcome,
  keyId,
  type LeaseOpening,
  type LeaseSpend,
  type LeaseSpendOutcome,
  type NewLease,
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
  private readonly leases = new Map<string, CreditLeaseRow>();
  /** Live tokens: hash -> owner. */
  private readonly tokens = new Map<string, Address>();

  constructor(
    private readonly payments: (key: PaymentKey) => PaymentRow | undefined,
    private readonly now: () => number,
  ) {}

  /** Copies of every spend (a model test checks them). */
  snapshot(): { lots: CreditLotRow[]; spends: CreditSpendRow[]; leases: CreditLeaseRow[] } {
    return {
      lots: [...this.lotsByKey.values()].map((l) => ({ ...l })),
      spends: [...this.spends.values()].map((s) => ({ ...s })),
      leases: [...this.leases.values()].map((l) => ({ ...l })),
    };
  }

  /** Time passes: every timestamp moves `ms` back (MemoryLedger.age). */
  age(ms: number): void {
    const back = (d: Date) => new Date(d.getTime() - ms);
    for (const lot of this.lotsByKey.values())
      Object.assign(lot, { createdAt: back(lot.createdAt), expiresAt: back(lot.expiresAt) });
    for (const s of this.spends.values())
      Object.assign(s, { createdAt: back(s.createdAt), updatedAt: back(s.updatedAt) });
    for (const l of this.leases.values())
      Object.assign(l, { createdAt: back(l.createdAt), renewedAt: back(l.renewedAt) });
  }

  /** The lots are short: the owner's open leases are asked back (wanted). */
  private askLeasesBack(owner: Address, balance: bigint): CreditShort {
    for (const l of this.leases.values()) if (l.owner === owner && l.closedAt === null) l.wanted = true;
    return { balance, leased: this.leasedOpen(owner) };
  }

  /** What the owner's open leases have not spent. */
  private leasedOpen(owner: Address): bigint {
    return [...this.leases.values()]
      .filter((l) => l.owner === owner && l.closedAt === null)
      .reduce((sum, l) => sum + BigInt(l.amount) - BigInt(l.spent), 0n);
  }

  /** Takes `amount` from the owner's spendable lots, soonest to expire first: the draws, and the token that gave most. */
  private draw(lots: CreditLotRow[], amount: bigint): { draws: Record<string, string>; token: Address } {
    const draws: Record<string, string> = {};
    let left = amount;
    let token: Address | undefined;
    let largest = -1n;
    for (const lot of lots) {
      if (left === 0n) break;
      const take = minUnits(BigInt(lot.remaining), left);
      draws[keyId(lot as PaymentKey)] = take.toString();
      lot.remaining = (BigInt(lot.remaining) - take).toString();
      left -= take;
      if (take > largest) [largest, token] = [take, lot.token as Address];
    }
    return { draws, token: token! };
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
    return this.spendable(owner).reduce((sum, lot) => sum + BigInt(lot.remaining), 0n) + this.leasedOpen(owner);
  }

  async hold(spend: NewSpend): Promise<CreditHold> {
    const owner = "owner" in spend.payer ? spend.payer.owner : this.tokens.get(spend.payer.tokenHash);
    if (!owner) return { unknownToken: true };
    const existing = spend.paymentId ? await this.find(owner, spend.paymentId) : undefined;
    if (existing) return { existing };
    const lots = this.spendable(owner);
    const before = lots.reduce((sum, lot) => sum + BigInt(lot.remaining), 0n);
    if (before < spend.amount) return { short: this.askLeasesBack(owner, before) };
    const { draws, token } = this.draw(lots, spend.amount);
    const at = new Date(this.now());
    const { payer: _, ...columns } = spend;
    const row: CreditSpendRow = {
      ...columns,
      owner,
      amount: spend.amount.toString(),
      draws,
      lease: null,
      reference: null,
      status: "held",
      responseStatus: null,
      responseType: null,
      responseBody: null,
      createdAt: at,
      updatedAt: at,
    };
    this.spends.set(spend.id, row);
    return { held: { ...row }, balance: before - spend.amount + this.leasedOpen(owner), token };
  }

  async find(owner: Address, paymentId: string): Promise<CreditSpendRow | undefined> {
    const row = [...this.spends.values()].find((s) => s.owner === owner && s.paymentId === paymentId);
    return row && { ...row };
  }

  async spent(
    id: string,
    answer: { status: number; type: string; body: string },
    tokenHash: string | null = null,
  ): Promise<HeldSpendOutcome> {
    if (tokenHash !== null && !this.tokens.has(tokenHash)) return "revoked";
    const row = this.spends.get(id);
    if (!this.allowed(row, "spent")) return "released";
    Object.assign(row!, {
      status: "spent",
      responseStatus: answer.status,
      responseType: answer.type,
      responseBody: row!.paymentId === null ? null : answer.body,
      updatedAt: new Date(this.now()),
    });
    return "spent";
  }

  private giveBack(id: string, event: SpendEvent): boolean {
    const row = this.spends.get(id);
    if (!this.allowed(row, event)) return false;
    this.spends.delete(id);
    for (const [lot, amount] of Object.entries(row!.draws ?? {})) {
      const stored = this.lotsByKey.get(lot);
      if (stored) stored.remaining = (BigInt(stored.remaining) + BigInt(amount)).toString();
    }
    return true;
  }

  async release(id: string): Promise<void> {
    this.giveBack(id, "released");
  }

  async reference(id: string, reference: string): Promise<void> {
    const row = this.spends.get(id);
    if (this.allowed(row, "referenced")) Object.assign(row!, { reference, updatedAt: new Date(this.now()) });
  }

  async releaseAbandoned(): Promise<number> {
    return [...this.spends.values()].filter((s) => s.reference === null && this.giveBack(s.id, "abandoned")).length;
  }

  async abandonedReferenced(): Promise<AbandonedSpend[]> {
    return [...this.spends.values()]
      .filter((s) => s.reference !== null && this.allowed(s, "abandoned"))
      .sort((a, b) => a.updatedAt.getTime() - b.updatedAt.getTime())
      .map((s) => ({ id: s.id, route: s.route, reference: s.reference! }));
  }

  async openLease(lease: NewLease): Promise<LeaseOpening> {
    const lots = this.spendable(lease.owner);
    const balance = lots.reduce((sum, lot) => sum + BigInt(lot.remaining), 0n);
    const others = this.leasedOpen(lease.owner);
    if (balance < lease.least) return { short: this.askLeasesBack(lease.owner, balance) };
    const amount = minUnits(balance, lease.want);
    const { draws, token } = this.draw(lots, amount);
    const at = new Date(this.now());
    this.leases.set(lease.id, {
      id: lease.id,
      owner: lease.owner,
      amount: amount.toString(),
      spent: "0",
      draws,
      wanted: false,
      createdAt: at,
      renewedAt: at,
      closedAt: null,
    });
    return { leased: { id: lease.id, amount, balance: balance + others, token } };
  }

  async recordSpend(spend: LeaseSpend): Promise<{ outcome: LeaseSpendOutcome; wanted: boolean }> {
    if (spend.tokenHash !== null && this.tokens.get(spend.tokenHash) !== spend.owner)
      return { outcome: "revoked", wanted: false };
    const lease = this.leases.get(spend.lease);
    if (
      !lease ||
      lease.closedAt !== null ||
      BigInt(lease.spent) + spend.amount > BigInt(lease.amount) ||
      !this.allowed(this.spends.get(spend.id), "recorded")
    )
      return { outcome: "closed", wanted: false };
    const at = new Date(this.now());
    Object.assign(lease, { spent: (BigInt(lease.spent) + spend.amount).toString(), renewedAt: at });
    this.spends.set(spend.id, {
      id: spend.id,
      owner: spend.owner,
      route: spend.route,
      subject: spend.subject,
      fingerprint: spend.fingerprint,
      paymentId: null,
      amount: spend.amount.toString(),
      draws: null,
      lease: spend.lease,
      reference: null,
      status: "spent",
      responseStatus: spend.answer.status,
      responseType: spend.answer.type,
      responseBody: null,
      createdAt: at,
      updatedAt: at,
    });
    return { outcome: "recorded", wanted: lease.wanted };
  }

  async spendRecorded(id: string): Promise<boolean> {
    return this.spends.get(id)?.status === "spent";
  }

  async voidSpend(id: string, leaseId: string): Promise<boolean> {
    const spend = this.spends.get(id);
    const lease = this.leases.get(leaseId);
    if (!spend || spend.lease !== leaseId || !lease || lease.closedAt !== null || !this.allowed(spend, "voided"))
      return false;
    lease.spent = (BigInt(lease.spent) - BigInt(spend.amount)).toString();
    this.spends.delete(id);
    return true;
  }

  /** Closes an open lease: what it did not spend goes back to its lots, latest to expire first. Null if not open. */
  private close(id: string, abandonedOnly: boolean): bigint | null {
    const lease = this.leases.get(id);
    if (!lease || lease.closedAt !== null) return null;
    if (abandonedOnly && this.now() - lease.renewedAt.getTime() <= ABANDONED_AFTER_MS) return null;
    lease.closedAt = new Date(this.now());
    const back = BigInt(lease.amount) - BigInt(lease.spent);
    let left = back;
    const drawn = [...this.lotsByKey.values()]
      .filter((lot) => keyId(lot as PaymentKey) in lease.draws)
      .sort((a, b) => b.expiresAt.getTime() - a.expiresAt.getTime() || b.nonce.localeCompare(a.nonce));
    for (const lot of drawn) {
      const d = BigInt(lease.draws[keyId(lot as PaymentKey)]!);
      const give = minUnits(d, left);
      lot.remaining = (BigInt(lot.remaining) + give).toString();
      left -= give;
    }
    return back;
  }

  async closeLease(id: string): Promise<bigint> {
    return this.close(id, false) ?? 0n;
  }

  async closeAbandonedLeases(): Promise<number> {
    return [...this.leases.keys()].filter((id) => this.close(id, true) !== null).length;
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
