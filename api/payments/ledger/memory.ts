import type { Address } from "../../../config/addresses.ts";
import { PAYMENT_STATUSES, type PaymentRow } from "../../store/schema.ts";
import {
  ABANDONED_AFTER_MS,
  allows,
  broken,
  CLEARED_ON_RECLAIM,
  exposure,
  isDebt,
  OPEN,
  type PaymentEvent,
  RERUN_MARK,
  RESOLVED,
  transition,
  UNSETTLED,
} from "../lifecycle.ts";
import {
  type DeferredAuthorization,
  type ExposureCaps,
  keyId,
  type Ledger,
  type NewPayment,
  type OpenAmounts,
  type OutcomeCounts,
  type PaymentKey,
  type Resolution,
  type ServedTotals,
  type SettlementRecord,
  STALE_PENDING_MS,
  type StoredAnswer,
  type TransactionRead,
} from "./ledger.ts";
import { MemoryCredit } from "./memory-credit.ts";

export type MemoryLedgerOptions = {
  /** The clock (ms): abandoned claims, rerun leases and timestamps read it. A test moves it. */
  now?: () => number;
  /** Throw when a write leaves a row breaking an invariant of its state (lifecycle INVARIANTS). Default true. */
  checkInvariants?: boolean;
};

/**
 * The ledger in memory: the same contract as the SQL ledger (test/ledger/contract.ts), for unit
 * tests of the core without a database. Every write is a lifecycle transition; a write the
 * lifecycle refuses is a no-op (false where the method answers), as the SQL guards make it.
 * Each call is atomic (it runs to completion between awaits), as a statement is.
 */
export class MemoryLedger implements Ledger {
  private readonly rows = new Map<string, PaymentRow>();
  /** settlement_transaction: each signed transaction once, by hash. */
  private readonly signed = new Map<string, string>();
  private readonly nonces = new Map<string, Date>();
  private readonly now: () => number;
  private readonly checkInvariants: boolean;
  readonly credit: MemoryCredit;

  constructor(options: MemoryLedgerOptions = {}) {
    this.now = options.now ?? Date.now;
    this.checkInvariants = options.checkInvariants ?? true;
    this.credit = new MemoryCredit((key) => this.rows.get(keyId(key)), this.now);
  }

  /** Copies of every row (a model-based test checks them after each step). */
  snapshot(): PaymentRow[] {
    return [...this.rows.values()].map((row) => ({ ...row }));
  }

  /**
   * Applies `event` to `key`'s row with `patch` if the lifecycle allows it (and `also`, the
   * method's own condition, holds). True when written.
   */
  /** Time passes for the rows: every timestamp moves `ms` back (a test's way to age claims and leases). */
  age(ms: number): void {
    this.credit.age(ms);
    const back = (d: Date | null) => d && new Date(d.getTime() - ms);
    for (const [id, row] of this.rows) {
      this.rows.set(id, {
        ...row,
        createdAt: back(row.createdAt)!,
        updatedAt: back(row.updatedAt)!,
        settledAt: back(row.settledAt),
        reconciledAt: back(row.reconciledAt),
      });
    }
  }

  private write(
    key: PaymentKey,
    event: PaymentEvent,
    patch: (row: PaymentRow, now: Date) => Partial<PaymentRow>,
    also?: (row: PaymentRow) => boolean,
  ): boolean {
    const row = this.rows.get(keyId(key));
    const now = this.now();
    if (!row || !allows(row, event, now) || (also && !also(row))) return false;
    const to = transition(row, event, now);
    const at = new Date(now);
    if (to === "absent") {
      this.rows.delete(keyId(key));
      return true;
    }
    this.store({ ...row, ...patch(row, at), status: to, updatedAt: at }, event);
    return true;
  }

  private store(row: PaymentRow, event: PaymentEvent): void {
    const faults = this.checkInvariants ? broken(row) : [];
    if (faults.length > 0)
      throw new Error(`payment ${keyId(row as PaymentKey)} after ${event} breaks: ${faults.join("; ")}`);
    this.rows.set(keyId(row as PaymentKey), row);
  }

  /** The rows an event may leave, of those `where` selects. */
  private rowsFor(event: PaymentEvent, where: (row: PaymentRow) => boolean): PaymentRow[] {
    const now = this.now();
    return [...this.rows.values()].filter((row) => where(row) && allows(row, event, now));
  }

  async ping(): Promise<void> {}

  async find(key: PaymentKey): Promise<PaymentRow | undefined> {
    const row = this.rows.get(keyId(key));
    return row && { ...row };
  }

  async findByPaymentId(payer: Address, paymentId: string): Promise<PaymentRow | undefined> {
    const row = [...this.rows.values()].find((r) => r.payer === payer && r.paymentId === paymentId);
    return row && { ...row };
  }

  async lookup(key: PaymentKey): Promise<{ row: PaymentRow | undefined; open: OpenAmounts }> {
    return { row: await this.find(key), open: this.open(key.payer, key.token) };
  }

  async openFor(payer: Address, token: Address): Promise<OpenAmounts> {
    return this.open(payer, token);
  }

  private open(payer: string, token: string): OpenAmounts {
    let unsettled = 0n;
    let owed = 0n;
    for (const row of this.rows.values()) {
      if (row.payer !== payer || !OPEN.includes(row.status)) continue;
      if (row.token === token && UNSETTLED.includes(row.status)) unsettled += BigInt(row.amount);
      if (isDebt(row)) owed += BigInt(row.amount);
    }
    return { unsettled, owed };
  }

  async claim(entry: NewPayment): Promise<boolean> {
    return this.claimRow(entry, null);
  }

  async claimDeferred(entry: NewPayment, authorization: DeferredAuthorization): Promise<boolean> {
    return this.claimRow(entry, authorization);
  }

  async claimFirst(entry: NewPayment, authorization: DeferredAuthorization): Promise<OpenAmounts | undefined> {
    const open = this.open(entry.payer, entry.token);
    return this.insert(entry, authorization) ? open : undefined;
  }

  async unclaim(key: PaymentKey, signatureHash: string): Promise<void> {
    this.write(
      key,
      "unclaimed",
      () => ({}),
      (row) => row.signatureHash === signatureHash,
    );
  }

  private claimRow(entry: NewPayment, deferred: DeferredAuthorization | null): boolean {
    if (entry.paymentId) {
      // The identifier passes on from a payment that was never charged (failed, expired) to this one.
      // Not from the row being claimed again: it keeps its identifier (a retry signed anew must find it).
      for (const row of this.rowsFor(
        "idReleased",
        (r) => r.payer === entry.payer && r.paymentId === entry.paymentId && keyId(r as PaymentKey) !== keyId(entry),
      )) {
        this.write(row as PaymentKey, "idReleased", () => ({ paymentId: null }));
      }
    }
    if (this.insert(entry, deferred)) return true;
    const same = (row: PaymentRow) =>
      row.fingerprint === entry.fingerprint && row.signatureHash === entry.signatureHash;
    const again = () => ({ ...deferral(deferred), ...CLEARED_ON_RECLAIM });
    return this.write(entry, "reclaimed", again, same) || this.write(entry, "takenOver", again, same);
  }

  /** The claim's new row, unless a row holds its key or its payer's payment-identifier (the unique indexes). */
  private insert(entry: NewPayment, deferred: DeferredAuthorization | null): boolean {
    const id = keyId(entry);
    if (this.rows.has(id)) return false;
    if (
      entry.paymentId &&
      [...this.rows.values()].some((r) => r.payer === entry.payer && r.paymentId === entry.paymentId)
    )
      return false;
    const at = new Date(this.now());
    transition(undefined, "claimed");
    const row: PaymentRow = {
      token: entry.token,
      payer: entry.payer,
      nonce: entry.nonce,
      amount: entry.amount.toString(),
      route: entry.route,
      subject: entry.subject,
      fingerprint: entry.fingerprint,
      signatureHash: entry.signatureHash,
      encoding: entry.encoding,
      status: "pending",
      failure: null,
      transaction: null,
      responseStatus: null,
      responseType: null,
      responseBody: null,
      createdAt: at,
      updatedAt: at,
      settledAt: null,
      validBefore: entry.validBefore.toString(),
      settler: null,
      settlerNonce: null,
      reconciledAt: null,
      ...deferral(deferred),
      attempts: 0,
      paymentId: entry.paymentId ?? null,
      repaidBy: null,
      reference: null,
    };
    this.store(row, "claimed");
    return true;
  }

  async reference(key: PaymentKey, reference: string): Promise<void> {
    this.write(key, "referenced", () => ({ reference }));
  }

  async waived(key: PaymentKey, answer: StoredAnswer): Promise<void> {
    this.write(key, "waived", () => answerOf(answer));
  }

  async failed(key: PaymentKey, failure: string, transaction?: string, read?: TransactionRead): Promise<void> {
    this.write(key, "failed", () => ({ failure, transaction: transaction ?? null, signature: null }), stillRead(read));
  }

  async settling(key: PaymentKey, answer: StoredAnswer | null, record: SettlementRecord = {}): Promise<boolean> {
    const written = this.write(key, "settling", () => ({
      transaction: record.transaction ?? null,
      settler: record.settler ?? null,
      settlerNonce: record.settlerNonce ?? null,
      ...(answer ? answerOf(answer) : {}),
    }));
    const { transaction, settler, settlerNonce, rawTransaction } = record;
    if (
      written &&
      transaction &&
      settler &&
      settlerNonce !== undefined &&
      rawTransaction &&
      !this.signed.has(transaction)
    )
      this.signed.set(transaction, rawTransaction);
    return written;
  }

  async signedTransaction(transaction: string): Promise<string | undefined> {
    return this.signed.get(transaction);
  }

  async settled(key: PaymentKey, transaction: string): Promise<void> {
    this.write(key, "settled", (_, at) => ({ transaction, failure: null, signature: null, settledAt: at }));
  }

  async touch(key: PaymentKey): Promise<void> {
    this.write(key, "touched", () => ({}));
  }

  async repay(payer: Address, by: PaymentKey, upTo: bigint): Promise<void> {
    const debts = this.rowsFor("repaid", (r) => r.payer === payer).sort(
      (x, y) => x.updatedAt.getTime() - y.updatedAt.getTime() || x.nonce.localeCompare(y.nonce),
    );
    let covered = 0n;
    for (const row of debts) {
      covered += BigInt(row.amount);
      if (covered > upTo) break;
      this.write(row as PaymentKey, "repaid", () => ({ repaidBy: by.nonce }));
    }
  }

  async claimRerun(key: PaymentKey): Promise<boolean> {
    return this.write(key, "rerunClaimed", () => ({ responseStatus: RERUN_MARK }));
  }

  async releaseRerun(key: PaymentKey): Promise<void> {
    this.write(key, "rerunReleased", () => ({ responseStatus: null }));
  }

  async answered(key: PaymentKey, answer: StoredAnswer): Promise<void> {
    this.write(key, "answered", () => answerOf(answer));
  }

  async paidFor(payer: Address, subject: string, routes: string[], since: Date): Promise<boolean> {
    const t = since.getTime();
    return [...this.rows.values()].some(
      (r) =>
        r.payer === payer &&
        r.subject === subject &&
        routes.includes(r.route) &&
        ((r.status === "settled" && r.settledAt !== null && r.settledAt.getTime() > t) ||
          (r.deferred && (r.status === "queued" || r.status === "settling") && r.createdAt.getTime() > t)),
    );
  }

  /** The caps hold with this row counted (it is open deferred once claimed); else it settles first, no longer deferred. */
  async queuedWithinCaps(key: PaymentKey, answer: StoredAnswer, caps: ExposureCaps): Promise<boolean> {
    const open = exposure(this.rows.values());
    const withinCaps = (row: PaymentRow) =>
      (open.perPayer.get(row.payer) ?? 0n) <= caps.perPayer && open.total <= caps.total;
    if (this.write(key, "queued", () => answerOf(answer), withinCaps)) return true;
    this.write(key, "creditRefused", () => deferral(null));
    return false;
  }

  async takeQueued(limit: number, tokens: readonly Address[]): Promise<PaymentRow[]> {
    const due = this.rowsFor("taken", (r) => tokens.includes(r.token as Address)).sort((a, b) =>
      compareNumeric(a.validBefore, b.validBefore),
    );
    const taken = due.slice(0, Math.max(0, limit));
    for (const row of taken) this.write(row as PaymentKey, "taken", () => ({}));
    return taken.map((row) => ({ ...this.rows.get(keyId(row as PaymentKey))! }));
  }

  async expireQueued(nowSeconds: number, marginSeconds: number): Promise<number> {
    const limit = BigInt(nowSeconds + marginSeconds);
    const due = this.rowsFor("expired", (r) => r.validBefore !== null && BigInt(r.validBefore) < limit);
    const failure =
      "deferred settlement not sent before the authorization's validBefore; never charged (the service's loss)";
    for (const row of due) this.write(row as PaymentKey, "expired", () => ({ failure, signature: null }));
    return due.length;
  }

  async requeue(key: PaymentKey, attempted: boolean, read?: TransactionRead): Promise<void> {
    this.write(
      key,
      "requeued",
      (row) => ({
        transaction: null,
        settler: null,
        settlerNonce: null,
        attempts: row.attempts + (attempted ? 1 : 0),
      }),
      stillRead(read),
    );
  }

  async resolve(key: PaymentKey, resolution: Resolution): Promise<boolean> {
    return this.write(key, RESOLVED[resolution.status], (_, at) =>
      resolution.status === "settled"
        ? { transaction: resolution.transaction, failure: resolution.note ?? null, settledAt: at, reconciledAt: at }
        : {
            failure: resolution.failure,
            ...(resolution.transaction ? { transaction: resolution.transaction } : {}),
            reconciledAt: at,
          },
    );
  }

  async unresolved(settlingIdleMs: number, limit = 200): Promise<PaymentRow[]> {
    const now = this.now();
    const idle = (r: PaymentRow, ms: number) => r.updatedAt.getTime() < now - ms;
    return [...this.rows.values()]
      .filter(
        (r) =>
          (r.status === "settling" && idle(r, settlingIdleMs)) ||
          (r.status === "pending" && idle(r, ABANDONED_AFTER_MS)),
      )
      .sort((a, b) => a.updatedAt.getTime() - b.updatedAt.getTime())
      .slice(0, limit)
      .map((r) => ({ ...r }));
  }

  async spendSignInNonce(nonce: string, _wallet: Address, expiresAt: Date): Promise<boolean> {
    if (this.nonces.has(nonce)) return false;
    this.nonces.set(nonce, expiresAt);
    const now = this.now();
    for (const [n, at] of this.nonces) if (at.getTime() < now) this.nonces.delete(n);
    return true;
  }

  async outcomeCounts(): Promise<OutcomeCounts> {
    const counts = Object.fromEntries(PAYMENT_STATUSES.map((s) => [s, 0])) as unknown as OutcomeCounts;
    let reconciled = 0;
    let deferredExpired = 0;
    let owed = 0n;
    for (const row of this.rows.values()) {
      counts[row.status]++;
      if (row.reconciledAt !== null) reconciled++;
      if (row.deferred && row.status === "expired") deferredExpired++;
      if (isDebt(row)) owed += BigInt(row.amount);
    }
    return Object.assign(counts, { reconciled, deferredExpired, owedUnits: owed.toString() });
  }

  async servedTotals(): Promise<ServedTotals> {
    const groups = new Map<string, ServedTotals["rows"][number]>();
    const payers = new Set<string>();
    for (const row of this.rows.values()) {
      if (row.status !== "settled" && row.status !== "waived") continue;
      if (row.status === "settled") payers.add(row.payer);
      const id = `${row.route}\n${row.token}\n${row.status}`;
      const group = groups.get(id) ?? {
        route: row.route,
        token: row.token.toLowerCase(),
        status: row.status,
        calls: 0,
        amount: 0n,
      };
      group.calls++;
      group.amount += BigInt(row.amount);
      groups.set(id, group);
    }
    return { rows: [...groups.values()], payers: payers.size };
  }

  async stalePending(olderThanMs = STALE_PENDING_MS): Promise<{ count: number; oldest: Date | null }> {
    const before = this.now() - olderThanMs;
    const stale = [...this.rows.values()].filter(
      (r) => (r.status === "pending" || r.status === "settling") && r.createdAt.getTime() < before,
    );
    const oldest = stale.reduce<Date | null>((min, r) => (min === null || r.createdAt < min ? r.createdAt : min), null);
    return { count: stale.length, oldest };
  }
}

/** The columns that say whether a claim is deferred, and keep what the worker needs to submit it. */
const deferral = (deferred: DeferredAuthorization | null) =>
  deferred
    ? { deferred: true, signature: deferred.signature, validAfter: deferred.validAfter.toString() }
    : { deferred: false, signature: null, validAfter: null };

const answerOf = (answer: StoredAnswer) => ({
  responseStatus: answer.status,
  responseType: answer.type,
  responseBody: answer.body,
});

/** numeric text, nulls last (Postgres' ascending order). */
const compareNumeric = (a: string | null, b: string | null) =>
  a === null ? (b === null ? 0 : 1) : b === null ? -1 : BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0;

/** The row's transaction is still the one `read` (always, without one): sql/rules.ts's stillRead. */
const stillRead =
  (read: TransactionRead | undefined) =>
  (row: PaymentRow): boolean =>
    read === undefined || row.transaction === read.transaction;
