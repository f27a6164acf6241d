import { randomUUID } from "node:crypto";
import type { Address } from "../../../config/addresses.ts";
import { askUntilAnswered, firstLine, sleep } from "../../../shared/async.ts";
import { log } from "../../../shared/log.ts";
import { minUnits } from "../../money.ts";
import type { CreditLedger, CreditShort, LeaseSpendOutcome } from "../ledger/ledger.ts";

// Calls paid from credit without a Payment-Identifier take their price from a lease: a slice of
// the owner's balance this replica drew in one write. The price is taken in memory (no write
// before the handler), and the call is recorded `spent` in one batched, durable write before its
// answer leaves; a call that fails gives its price back to the lease. A lease goes back to the
// lots (what it did not spend) when it has been idle LEASE_IDLE_MS, when another replica finds
// the lots short, or at shutdown; if its replica dies, the sweep closes it after ABANDONED_AFTER_MS.

/** A lease is sized for this many calls at the price of the call that opens it, at first. */
const LEASE_CALLS = 16n;
/**
 * The lease that follows one its owner's calls used up is sized for twice as many calls, up to
 * this many: an agent in a loop opens one every few hundred calls, not every 16. A lease that went
 * back idle, asked back or short is followed by one of LEASE_CALLS.
 */
const MAX_LEASE_CALLS = 512n;
/** An idle lease goes back after this long: credit is not held away from other replicas for longer. */
const LEASE_IDLE_MS = 1_000;
/** A call that finds the lots short waits this long for leases held elsewhere to come back before it is refused. */
const LEASE_WAIT_MS = 5_000;
const POLL_MS = 50;

/** How long a refused call whose spend was not confirmed is looked for, to be undone, while the store comes back. */
const UNDO_WITHIN_MS = 60_000;

/** Asks `undo` (of a refused call's spend) until the store answers, for up to UNDO_WITHIN_MS. */
export const askUntilUndone = <T>(undo: () => Promise<T>) =>
  askUntilAnswered(undo, UNDO_WITHIN_MS, { firstPause: POLL_MS, maxPause: 5_000 });

/** A lease this replica holds. `left` is what its calls may still take (answered or running ones took the rest). */
export type Lease = {
  id: string;
  owner: Address;
  token: Address;
  left: bigint;
  /** How many calls it was sized for. */
  calls: bigint;
  /** The owner's balance outside this lease when it was opened: its balance now, as this replica knows it, is this plus `left`. */
  beyond: bigint;
  inflight: number;
  /** No new call takes from it; it closes when its last call ends. */
  retiring: boolean;
  idle?: NodeJS.Timeout;
};

/** The price taken from a lease: the lease, and the owner's balance after it as this replica knows it. */
export type LeaseTake = { lease: Lease; balance: bigint } | { short: bigint };

export class CreditLeases {
  /** The lease each owner's calls take from now. */
  private readonly current = new Map<Address, Lease>();
  /** Openings under way: the calls of one owner share one. */
  private readonly opening = new Map<Address, Promise<CreditShort | undefined>>();
  /** Every lease not yet closed (current and retiring). */
  private readonly open = new Set<Lease>();
  /** The undos under way of refused calls' recordings (refusedUnconfirmed): closeAll waits for them. */
  private readonly undoing = new Set<Promise<void>>();

  constructor(
    private readonly ledger: CreditLedger,
    /** LEASE_WAIT_MS unless the core's deps shorten it (PaymentDeps.leaseWaitMs). */
    private readonly waitMs = LEASE_WAIT_MS,
  ) {}

  /** Until when a call that finds the lots short may wait for leases to come back (waitMs from now). */
  waitDeadline(): number {
    return Date.now() + this.waitMs;
  }

  /** Takes `price` from the owner's lease, opening one when it has too little; `short` (the owner's whole balance) when the credit is. */
  async take(owner: Address, price: bigint): Promise<LeaseTake> {
    const deadline = this.waitDeadline();
    for (;;) {
      const lease = this.current.get(owner);
      if (lease && lease.left >= price) {
        lease.left -= price;
        lease.inflight++;
        clearTimeout(lease.idle);
        return { lease, balance: lease.beyond + lease.left };
      }
      // Used up while its owner's calls keep coming: the next lease is larger.
      if (lease) this.retire(lease);
      const calls = lease ? minUnits(lease.calls * 2n, MAX_LEASE_CALLS) : LEASE_CALLS;
      const opened = await (this.opening.get(owner) ?? this.openFor(owner, price, calls));
      if (opened === undefined || (await this.waitForLeases(opened, price, deadline))) continue;
      return { short: opened.balance + opened.leased };
    }
  }

  /** A hold found the owner's lots short: this replica's lease for it goes back (once its calls end). */
  giveBack(owner: Address): void {
    const lease = this.current.get(owner);
    if (lease) this.retire(lease);
  }

  /**
   * After the lots were found short: true (after POLL_MS) when the owner's open leases hold enough to
   * make up `price` and `deadline` has not passed: units held by leases, here or on another replica,
   * come back when their calls end (asked back, or idle), or are spent. False: refuse now.
   */
  async waitForLeases(short: CreditShort, price: bigint, deadline: number): Promise<boolean> {
    if (short.balance + short.leased < price || Date.now() >= deadline) return false;
    await sleep(POLL_MS);
    return true;
  }

  /** The call's price was spent (its answer recorded) or not (it failed, or its recording was refused): given back to the lease. */
  finish(lease: Lease, price: bigint, spent: boolean): void {
    lease.inflight--;
    if (!spent) lease.left += price;
    if (lease.inflight > 0) return;
    if (lease.retiring) void this.close(lease);
    else lease.idle = setTimeout(() => this.retire(lease), LEASE_IDLE_MS).unref();
  }

  /**
   * A call's recording came back: its price spent (recorded) or given back to the lease, and the
   * lease retired when another replica wants it or it was closed under this one (the sweep took
   * it): the next call opens another.
   */
  recorded(lease: Lease, price: bigint, { outcome, wanted }: { outcome: LeaseSpendOutcome; wanted: boolean }): void {
    this.finish(lease, price, outcome === "recorded");
    if (wanted || outcome === "closed") this.retire(lease);
  }

  /**
   * A call refused because its recording could not be confirmed (the store did not answer): the
   * recording may have landed all the same, charging a call not answered. It is undone as soon as
   * the store answers again (voidSpend: the price back to the lease, which its call keeps open
   * meanwhile, shutdown included: closeAll); only then is the price this replica's to spend again.
   */
  refusedUnconfirmed(lease: Lease, id: string, price: bigint): void {
    const undoing = (async () => {
      const asked = await askUntilUndone(() => this.ledger.voidSpend(id, lease.id));
      if ("error" in asked)
        log.error(
          `[payments] credit spend ${id}: whether it was recorded is unknown (${firstLine(asked.error)}); if it was, its owner paid for a call not answered`,
        );
      else if (asked.answer)
        log.warn(`[payments] credit spend ${id} was recorded though its answer was refused: undone`);
      // Not undone, yet recorded: its lease was closed first (by the sweep), with this call counted.
      else if (await this.ledger.spendRecorded(id).catch(() => false))
        log.error(
          `[payments] credit spend ${id}: recorded though its answer was refused, and its lease ${lease.id} was closed before it could be undone: its owner paid for a call not answered`,
        );
      this.finish(lease, price, false);
    })().finally(() => this.undoing.delete(undoing));
    this.undoing.add(undoing);
  }

  /** No new call takes from this lease; it goes back once its calls end (another replica wants it, or it ran short). */
  retire(lease: Lease): void {
    lease.retiring = true;
    if (this.current.get(lease.owner) === lease) this.current.delete(lease.owner);
    if (lease.inflight === 0) void this.close(lease);
  }

  /**
   * At shutdown, once no call runs: every lease goes back, after the undos under way (until
   * `deadline`). Closed first, a lease would make its undo fail and keep a refused call charged; one
   * still undoing at the deadline is left open: it goes back when its undo ends, or on the sweep.
   */
  async closeAll(deadline: number): Promise<void> {
    while (this.undoing.size > 0 && Date.now() < deadline) await sleep(POLL_MS);
    await Promise.all([...this.open].map((lease) => (lease.inflight > 0 ? this.retire(lease) : this.close(lease))));
  }

  /** Opens a lease for `owner` (shared by its calls meanwhile): undefined when it did, else the lots' balance and what other leases hold. */
  private openFor(owner: Address, price: bigint, calls: bigint): Promise<CreditShort | undefined> {
    const opening = (async () => {
      const opened = await this.ledger.openLease({ id: randomUUID(), owner, want: price * calls, least: price });
      if ("short" in opened) return opened.short;
      const { id, amount, balance, token } = opened.leased;
      const lease: Lease = {
        id,
        owner,
        token,
        left: amount,
        calls,
        beyond: balance - amount,
        inflight: 0,
        retiring: false,
      };
      this.open.add(lease);
      this.current.set(owner, lease);
      return undefined;
    })().finally(() => this.opening.delete(owner));
    this.opening.set(owner, opening);
    return opening;
  }

  private async close(lease: Lease): Promise<void> {
    if (!this.open.delete(lease)) return;
    clearTimeout(lease.idle);
    if (this.current.get(lease.owner) === lease) this.current.delete(lease.owner);
    // A close the store refuses now is made by the sweep, once the lease is abandoned.
    await this.ledger
      .closeLease(lease.id)
      .catch((error) =>
        log.warn(`[payments] credit lease ${lease.id} not closed (the sweep will): ${firstLine(error)}`),
      );
  }
}
