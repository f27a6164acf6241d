import type { PaymentSettings } from "../../config/payments.ts";
import { firstLine, sleep } from "../../shared/async.ts";
import { log } from "../../shared/log.ts";
import type { PaymentRow } from "../store/schema.ts";
import { admitPayment } from "./core/admit.ts";
import type { CoreContext } from "./core/context.ts";
import { reconcileDeps } from "./core/context.ts";
import { admitCredit, type CreditPayer, releaseAbandonedHolds } from "./core/credit.ts";
import { CreditLeases } from "./core/credit-leases.ts";
import { ledgerDown } from "./core/refusals.ts";
import { refusalReply } from "./core/replies.ts";
import { concludeClaim } from "./core/settle.ts";
import type {
  Admission,
  Claim,
  Conclusion,
  CreditAdmission,
  HandlerOutcome,
  Ledger,
  PaymentDeps,
  PaymentRequest,
  PricedRoute,
  Reply,
} from "./core/types.ts";
import { hashCreditToken } from "./credit-token.ts";
import { PaymentError } from "./errors.ts";
import type { Facilitator } from "./facilitator.ts";
import { keyId, type Resolution } from "./ledger/ledger.ts";
import { chainOutcome, keyOf, reconcileRow } from "./reconcile.ts";

export type { CreditPayer } from "./core/credit.ts";
export { RECEIPT_WAIT_MS } from "./core/settle.ts";
export type * from "./core/types.ts";

/** How long a SIGTERM waits for requests holding a claim (settlement included) before the process exits: core.drain(SHUTDOWN_DRAIN_MS). */
export const SHUTDOWN_DRAIN_MS = 15_000;

/**
 * x402 payment for priced calls, framework-free, over a Ledger and a facilitator (interfaces):
 *   admit:    decode -> check -> verify (facilitator) -> claim in the ledger   (core/admit.ts)
 *   conclude: settle -> record the answer -> receipt headers                  (core/settle.ts)
 * Bad input never gets here (adapters validate first). A handler that fails settles nothing; a
 * failed settlement returns no data. A retry of a settled request with the same payment gets the
 * stored answer; the same payment on another request is refused (refusals: core/refusals.ts).
 */
export class PaymentCore {
  readonly settings: PaymentSettings;
  readonly facilitator: Facilitator;
  readonly chain: PaymentDeps["chain"];
  readonly ledger: Ledger;

  private readonly context: CoreContext;
  /** Settlements under way in this process, by payment. */
  private readonly inflight = new Map<string, Promise<unknown>>();
  /** Requests holding a claim (handler or settlement running): what drain() waits for. */
  private claims = 0;
  /** Requests being admitted (verification, waiting for a copy): drain() waits for them too, so that none claims unseen. */
  private admitting = 0;
  private draining = false;

  constructor(deps: PaymentDeps) {
    ({ settings: this.settings, facilitator: this.facilitator, chain: this.chain, ledger: this.ledger } = deps);
    this.context = {
      deps,
      settings: this.settings,
      facilitator: this.facilitator,
      ledger: this.ledger,
      inflight: this.inflight,
      tokenOwners: new Map(),
      leases: new CreditLeases(this.ledger.credit, deps.leaseWaitMs),
      draining: () => this.draining,
    };
  }

  /** Before the handler: a claimed payment to run on, or the reply to send instead. */
  admit(route: PricedRoute, request: PaymentRequest): Promise<Admission> {
    return this.admitWith(route, request, () => admitPayment(this.context, route, request));
  }

  /** admit, paid from prepaid credit instead of a payment: the price held from the payer's balance. */
  admitCredit(route: PricedRoute, request: PaymentRequest, payer: CreditPayer): Promise<CreditAdmission> {
    return this.admitWith(route, request, () => admitCredit(this.context, route, request, payer));
  }

  /**
   * Whether this credit payer has been seen paying here: a signed-in wallet (its proof is checked),
   * or a token a hold of this process resolved before. A read-only handler may start before such a
   * payer's price is taken; an unknown token's price is taken first.
   */
  knowsCreditPayer(payer: CreditPayer): boolean {
    return "wallet" in payer || this.context.tokenOwners.has(hashCreditToken(payer.token));
  }

  private async admitWith<A extends CreditAdmission>(
    route: PricedRoute,
    request: PaymentRequest,
    admission: () => Promise<A>,
  ): Promise<A | { reply: Reply }> {
    this.admitting++;
    try {
      const admitted = await admission();
      if ("claim" in admitted) this.claims++;
      return admitted;
    } catch (error) {
      if (error instanceof PaymentError) return { reply: this.refusal(route, request.url, error) };
      // Nothing is claimed yet: whatever failed (the service store down, most likely), nothing can
      // have been charged, and the client should retry, not read a 500.
      log.error(`[payments] ${route.name}: admission failed: ${firstLine(error)}`);
      return { reply: this.refusal(route, request.url, ledgerDown()) };
    } finally {
      this.admitting--;
    }
  }

  /** After the handler: settle and record, then the receipt headers to add, or the reply that replaces the answer. */
  async conclude(
    route: PricedRoute,
    request: Pick<PaymentRequest, "url">,
    claim: Claim,
    outcome: HandlerOutcome,
  ): Promise<Conclusion> {
    const id = keyId(claim.key);
    const settling = concludeClaim(this.context, claim, outcome);
    this.inflight.set(id, settling);
    try {
      const concluded = await settling;
      return "refused" in concluded ? { reply: this.refusal(route, request.url, concluded.refused) } : concluded;
    } finally {
      if (this.inflight.get(id) === settling) this.inflight.delete(id);
      this.claims--;
    }
  }

  /**
   * Names, before it exists, what the claimed call makes that must not stand unpaid (a passport's
   * report id): if the request dies before its answer leaves, the reconciler undoes it
   * (PaymentDeps.onOutcome) when the payment turns out unpaid, or, paid from credit, before the
   * hold goes back.
   */
  async reference(claim: Pick<Claim, "key"> & { credit?: { spend: string } }, reference: string): Promise<void> {
    if (claim.credit) await this.ledger.credit.reference(claim.credit.spend, reference);
    else await this.ledger.reference(claim.key, reference);
  }

  /** The refusal for `error`: a 402 with the payment requirements, or the error body with its status. */
  refusal(route: PricedRoute, url: string, error: PaymentError): Reply {
    return refusalReply(this.settings, route, url, error);
  }

  /** One row's outcome as the chain tells it, not recorded (chain errors are thrown). */
  chainOutcome(row: PaymentRow): Promise<Resolution | "pending"> {
    return chainOutcome(row, reconcileDeps(this.context));
  }

  /** Reads one row's outcome from the chain and records it (the settlement worker's verdict on a failed attempt). */
  reconcileOne(row: PaymentRow): Promise<Resolution | "pending"> {
    return reconcileRow(row, reconcileDeps(this.context));
  }

  /**
   * Settles from the chain every row whose outcome is unknown: `settling` rows idle for
   * `settlingIdleMs` (0 at start: rows left by a crash) and abandoned claims. Rows this process is
   * settling right now are left to their request. Abandoned credit holds are released, and
   * abandoned credit leases closed.
   */
  async reconcileUnresolved(
    settlingIdleMs: number,
  ): Promise<{ checked: number; resolved: number; outcomes: (Resolution | "pending")[] }> {
    const rows = (await this.ledger.unresolved(settlingIdleMs)).filter((row) => !this.inflight.has(keyId(keyOf(row))));
    const outcomes: (Resolution | "pending")[] = [];
    for (const row of rows) outcomes.push(await this.reconcileOne(row));
    // Credit held by requests that died goes back to its owners (nothing was answered).
    const released = await releaseAbandonedHolds(this.context);
    if (released > 0) log.info(`[payments] ${released} credit holds of requests that died were released`);
    const closed = await this.ledger.credit.closeAbandonedLeases();
    if (closed > 0) log.info(`[payments] ${closed} credit leases of replicas that died were closed`);
    return { checked: rows.length, resolved: outcomes.filter((o) => o !== "pending").length, outcomes };
  }

  /**
   * Graceful shutdown: takes no new payment (503 settlement_unavailable: nothing charged, retry
   * with the same payment) and waits up to `timeoutMs` for the requests being admitted or holding a
   * claim (handler and settlement) to finish. Rows still settling then are reconciled at next start.
   */
  async drain(timeoutMs: number): Promise<{ drained: boolean; inFlight: number }> {
    this.draining = true;
    const deadline = Date.now() + timeoutMs;
    const busy = () => this.claims + this.admitting;
    while (busy() > 0 && Date.now() < deadline) await sleep(20);
    // What this replica's leases did not spend goes back now, not at the sweep.
    if (busy() === 0) await this.context.leases.closeAll(deadline);
    return { drained: busy() === 0, inFlight: busy() };
  }
}
