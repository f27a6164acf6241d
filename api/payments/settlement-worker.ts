import type { Hex } from "viem";
import type { Address } from "../../config/addresses.ts";
import { firstLine, sleep } from "../../shared/async.ts";
import { log } from "../../shared/log.ts";
import type { PaymentRow } from "../store/schema.ts";
import type { ServiceDb } from "../store/store.ts";
import type { PaymentCore } from "./core.ts";
import { RECEIPT_WAIT_MS } from "./core.ts";
import type { PaymentKey, TransactionRead } from "./ledger/ledger.ts";
import { EXPIRY_MARGIN_SECONDS } from "./lifecycle.ts";
import { listenForQueued, queueNotifier } from "./queue-signal.ts";
import { keyOf, MAX_SETTLE_ATTEMPTS } from "./reconcile.ts";
import { MAX_BATCH, type SignedSettlement, usedIn } from "./relayer.ts";
import { x402Payment } from "./verify.ts";

/** A run starts this long after a payment is queued, so that one transaction carries the payments queued about the same moment. */
const KICK_DELAY_MS = 25;
/** How long a run waits for the transactions already sent to be mined before it sends the next. */
const FOLLOW_WAIT_MS = 250;
/** How often the worker looks at the queue when nothing woke it (another replica's rows, retries). */
const WORKER_INTERVAL_MS = 500;

export type WorkerRun = { taken: number; expired: number };

/**
 * Settles deferred payments (X402_SETTLEMENT=deferred) from the queue in the service store. Any
 * number of workers, on any replica, share the queue: each row is taken by one
 * (ledger.takeQueued, FOR UPDATE SKIP LOCKED). Rows taken together are submitted together, so the
 * relayer settles them in one transaction (relayer.ts). A row whose outcome stays unknown is left
 * `settling` for the reconciler, like any other.
 */
export class SettlementWorker {
  private running: Promise<WorkerRun> | null = null;
  /** Settlements sent and waiting for their receipt: the next run waits a little for them first. */
  private readonly following = new Set<Promise<unknown>>();
  private again = false;
  private scheduled: NodeJS.Timeout | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly core: PaymentCore) {}

  /**
   * A payment was just queued: runs the queue shortly (KICK_DELAY_MS, so that the payments queued
   * meanwhile share its transaction), or right after the run under way.
   */
  kick(): void {
    if (this.running) this.again = true;
    else if (!this.scheduled) {
      this.scheduled = setTimeout(() => {
        this.scheduled = undefined;
        void this.run();
      }, KICK_DELAY_MS);
      this.scheduled.unref?.();
    }
  }

  /** Runs until the queue is empty (or nothing more can be taken); one run at a time in this process. */
  run(): Promise<WorkerRun> {
    if (this.running) return this.running;
    this.running = (async () => {
      const total: WorkerRun = { taken: 0, expired: 0 };
      try {
        let full = false;
        do {
          this.again = false;
          const once = await this.runOnce(full);
          total.taken += once.taken;
          total.expired += once.expired;
          full = once.taken === MAX_BATCH;
          if (full) this.again = true;
        } while (this.again);
      } catch (error) {
        log.warn(`[payments] settlement worker: ${firstLine(error)}`);
      } finally {
        this.running = null;
      }
      return total;
    })();
    return this.running;
  }

  /** One transaction's worth of the queue; `backlog`: the last one took a full batch, so more are waiting already. */
  private async runOnce(backlog: boolean): Promise<WorkerRun> {
    const { ledger } = this.core;
    // The rows queued while the last transaction waits for its block go together in the next one,
    // sent when it is mined or after FOLLOW_WAIT_MS: a few transactions per Celo block, not one per
    // kick, each polled for its receipt. A backlog goes at once: waiting would gather nothing more
    // than a full batch, and every row waiting counts against the exposure caps until it is settled.
    if (this.following.size && !backlog) await Promise.race([Promise.all([...this.following]), sleep(FOLLOW_WAIT_MS)]);
    const expired = await ledger.expireQueued(Math.floor(Date.now() / 1000), EXPIRY_MARGIN_SECONDS);
    if (expired)
      log.warn(`[payments] ${expired} deferred payments expired before they could be settled (never charged)`);
    // A replica that cannot settle (no relayer key: a remote facilitator) leaves the shared queue to one that can.
    if (!this.core.facilitator.settler) return { taken: 0, expired };
    // Only the tokens this replica accepts (another replica, configured for others, settles those).
    const rows = await ledger.takeQueued(
      MAX_BATCH,
      this.core.settings.tokens.map((t) => t.address),
    );
    // Submitted together: one transaction, its rows recorded `settling` together (ledger.settling).
    const sent = await Promise.all(rows.map((row) => this.submit(row)));
    const byTransaction = new Map<Hex, PaymentKey[]>();
    for (const s of sent) if (s) byTransaction.set(s.hash, [...(byTransaction.get(s.hash) ?? []), s.key]);
    for (const [hash, keys] of byTransaction) this.follow(hash, keys);
    return { taken: rows.length, expired };
  }

  /** Submits one taken row (it joins the others in one transaction): the transaction that carries it, or null when none does. */
  private async submit(row: PaymentRow): Promise<{ key: PaymentKey; hash: Hex } | null> {
    const { ledger, settings, facilitator } = this.core;
    const key = keyOf(row);
    // The transaction this worker last recorded on the row: the row is written back only while it
    // still holds it (another worker may have sent the row meanwhile, after a retry requeued it).
    let mine = row.transaction;
    const token = settings.tokens.find((t) => t.address === row.token)!;
    const settler = facilitator.settler!;
    if (!row.signature || row.validAfter === null || row.validBefore === null) {
      await ledger.failed(key, "cannot be settled: the stored authorization is incomplete");
      return null;
    }
    const attempt = {
      encoding: row.encoding as never,
      authorization: {
        from: row.payer as Address,
        to: settings.payTo,
        value: BigInt(row.amount),
        validAfter: BigInt(row.validAfter),
        validBefore: BigInt(row.validBefore),
        nonce: row.nonce as `0x${string}`,
      },
      signature: row.signature as `0x${string}`,
      token: token.address,
    };
    const { payload, requirements } = x402Payment(attempt, token, settings);
    // A row the ledger no longer gives this worker drops out (the relayer signs again without it).
    const record = async (signed: SignedSettlement) => {
      if (!(await ledger.settling(key, null, signed))) throw new Error("the ledger row is no longer this worker's");
      mine = signed.transaction;
    };
    const submitted = await settler.submit(payload, requirements, record).catch(() => null);
    if (!submitted) return null;
    if (!submitted.sent) {
      // The RPC did not answer, or refused our transaction (not the payer's transfer): try again later.
      if (submitted.unavailable || submitted.ours) await ledger.requeue(key, false, { transaction: mine });
      else await this.refused(row, submitted.reason, { transaction: mine });
      return null;
    }
    return { key, hash: submitted.signed.transaction };
  }

  /** Records the outcome of one transaction's rows once its receipt is in: those it used are settled (together), the chain decides the others. */
  private follow(hash: Hex, keys: PaymentKey[]): void {
    const settler = this.core.facilitator.settler!;
    const followed = (async () => {
      const receipt = await settler.receipt(hash, RECEIPT_WAIT_MS);
      const used = receipt ? keys.filter((key) => usedIn(receipt, key.token, key.payer, key.nonce)) : [];
      await Promise.all(used.map((key) => this.core.ledger.settled(key, hash)));
      await Promise.all(keys.filter((key) => !used.includes(key)).map((key) => this.decide(key)));
    })()
      .catch((error: Error) =>
        log.warn(`[payments] settlement ${hash.slice(0, 10)}…: ${firstLine(error)} (left to the reconciler)`),
      )
      .finally(() => this.following.delete(followed));
    this.following.add(followed);
  }

  /**
   * The node refused the transfer before sending it (gas estimation: the transfer would revert).
   * The chain says why: used (settled, or cancelled by the payer) is recorded; unused is an
   * attempt, and after MAX_SETTLE_ATTEMPTS the failure stands: the payer's balance cannot pay.
   */
  private async refused(row: PaymentRow, reason: string, asTaken: TransactionRead): Promise<void> {
    const { ledger } = this.core;
    const key = keyOf(row);
    const outcome = await this.core.chainOutcome(row).catch(() => "unknown" as const);
    if (outcome === "unknown") await ledger.requeue(key, false, asTaken);
    else if (outcome !== "pending") await ledger.resolve(key, outcome);
    else if (row.attempts + 1 < MAX_SETTLE_ATTEMPTS) await ledger.requeue(key, true, asTaken);
    else
      await ledger.failed(
        key,
        `the transfer cannot go through (${reason}); the answer was given, the payer owes it`,
        undefined,
        asTaken,
      );
  }

  private async decide(key: PaymentKey): Promise<string> {
    const row = await this.core.ledger.find(key);
    if (!row) return "pending";
    const outcome = await this.core.reconcileOne(row);
    return outcome === "pending" ? outcome : outcome.status;
  }

  start(intervalMs = WORKER_INTERVAL_MS): this {
    void this.run();
    this.timer = setInterval(() => (this.running ? undefined : void this.run()), intervalMs);
    this.timer.unref?.();
    return this;
  }

  /** Stops the schedule and waits for the run under way and the receipts it is waiting for. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    clearTimeout(this.scheduled);
    await this.running;
    await Promise.all([...this.following]);
  }
}

/** The Postgres store every process of a deployment shares (none on PGlite: one process). */
type SharedStore = { db: Promise<ServiceDb>; connectionString: string };

/**
 * This process's part in settling the shared queue: with a worker (X402_SETTLEMENT_WORKER=on),
 * what it queues kicks its own worker and what the others queue wakes it (queue-signal.ts); without
 * one, what it queues is signalled to the others. `onQueued` goes to createPayments, whose core
 * `start` then needs.
 */
export function settlementRole(runsWorker: boolean, shared: SharedStore | undefined) {
  let worker: SettlementWorker | undefined;
  let listener: { stop: () => Promise<void> } | undefined;
  const signal = !runsWorker && shared ? queueNotifier(shared.db) : undefined;
  return {
    onQueued: () => (worker ? worker.kick() : signal?.()),
    start(core: PaymentCore): void {
      if (!runsWorker) return;
      const started = new SettlementWorker(core).start();
      worker = started;
      if (shared) listener = listenForQueued(shared.connectionString, () => started.kick());
    },
    async stop(): Promise<void> {
      await listener?.stop();
      await worker?.stop();
    },
  };
}
