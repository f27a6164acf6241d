import { createHash } from "node:crypto";
import { encodePaymentResponseHeader } from "@x402/core/http";
import type { SettleResponse } from "@x402/core/types";
import type { Hex, PublicClient } from "viem";
import type { Address } from "../../config/addresses.ts";
import type { PaymentSettings } from "../../config/payments.ts";
import { errorBody } from "../../shared/errors.ts";
import { unitsToUsd } from "../money.ts";
import type { Billing } from "./billing.ts";
import { PaymentError } from "./errors.ts";
import type { Facilitator } from "./facilitator.ts";
import { type Settler, usedIn } from "./relayer.ts";
import { decodePayment, type PaymentHeaders } from "./header.ts";
import { ABANDONED_AFTER_MS, isAbandoned, isRerunning, keyId, type NewPayment, type OpenAmounts, type PaymentKey, type PaymentLedger, type Resolution, type StoredAnswer } from "./ledger.ts";
import { chainOutcome, keyOf, type ReconcileChain, reconcileRow } from "./reconcile.ts";
import { paymentRequiredAnswer } from "./requirements.ts";
import { paidRecently } from "./free-read.ts";
import { priceInUnits } from "./prices.ts";
import { checkPayment, signerOf, type VerifiedPayment, verifyPayment } from "./verify.ts";
import { checkFundsLocally, checkSignatureLocally, type PayerState, verifyWithoutRpc } from "./local-verify.ts";
import type { PaymentAttempt } from "./header.ts";
import type { TokenInfo } from "../../config/celo.ts";
import type { PaymentRow } from "../store/schema.ts";
import { log } from "../../shared/log.ts";
import { sleep, firstLine } from "../../shared/async.ts";

/** A priced operation as the payment core sees it (built from its route declaration and the price table). */
export type PricedRoute = {
  /** "POST /api/lender/screen": how the ledger names the route. */
  name: string;
  description: string;
  /** Price in micro-USD (the smallest unit of both 6-decimal stablecoins). */
  microUsd: bigint;
  /** When set, the call is free to a payer who paid for one of these routes about the same wallet recently. */
  freeRead?: { after: readonly string[]; rule: string };
  /** Always settled before the answer, whatever X402_SETTLEMENT says (the report: an on-chain publication). */
  settleFirst?: boolean;
};

/** One paid request, as any HTTP adapter hands it over: already validated. */
export type PaymentRequest = {
  headers: PaymentHeaders;
  /** The full URL, named as the resource in 402 answers. */
  url: string;
  path: string;
  /** The validated request (body, path and query): a retry must be the same request. */
  input: unknown;
  /** The wallet the call is about. */
  subject?: Address;
  /** The request's callerAddress, which must be the payer when given. */
  caller?: Address;
};

/** An answer complete in itself: a refusal, or the answer a payment already bought. */
export type Reply = { status: number; headers: Record<string, string>; body: string };

/**
 * A payment claimed for this request: the handler may run on it. `paid` says the payment is
 * already settled on chain (its answer was never stored): run the handler, do not settle again.
 */
export type Claim = {
  key: PaymentKey;
  verified: VerifiedPayment | null;
  waived: boolean;
  billing: Billing;
  paid?: { transaction: string };
  /** To be answered now and settled by the worker afterwards (X402_SETTLEMENT=deferred), if its answer finds the caps with room (else settled first). */
  deferred?: boolean;
  /** This payment also covers the payer's debts (failed deferred settlements): settled first, they are repaid with it. */
  repays?: boolean;
};

/** How the handler ended: its answer, or a failure (an error status, or a throw). */
export type HandlerOutcome = { answer: StoredAnswer } | { failed: string };

export type PaymentDeps = {
  settings: PaymentSettings;
  facilitator: Facilitator;
  chain: Pick<PublicClient, "readContract" | "getBalance"> & ReconcileChain;
  ledger: PaymentLedger;
  /** How long a request waits for its settlement's receipt before answering settlement_pending (RECEIPT_WAIT_MS). */
  receiptWaitMs?: number;
  /** How long a retry waits for a settlement whose outcome is unknown before answering settlement_pending (SETTLING_WAIT_MS). */
  settlingWaitMs?: number;
  /** What must follow an outcome read from the chain, before it is recorded (reconcile.ts OnOutcome): the report route revokes unpaid passports. */
  onOutcome?: (row: PaymentRow, outcome: Resolution) => Promise<void>;
  /** Deferred mode: the indexed payer state that verifies without RPC (api/payments/local-verify.ts). Without it, verification uses the RPC. */
  payerState?: PayerState;
  /** Called when a deferred payment joins the settlement queue (the in-process worker starts at once). */
  onQueued?: () => void;
};

/** How long a copy of a request waits for the copy that is settling its payment. */
const IN_FLIGHT_WAIT_MS = 90_000;
/** A settlement's receipt is awaited this long; then the answer is 503 settlement_pending and the row stays `settling`. */
export const RECEIPT_WAIT_MS = 10_000;
/** A retry of a payment whose settlement outcome is unknown waits this long for the chain to tell. */
export const SETTLING_WAIT_MS = 10_000;
/** How long a SIGTERM waits for requests holding a claim (settlement included) before the process exits: core.drain(SHUTDOWN_DRAIN_MS). */
export const SHUTDOWN_DRAIN_MS = 15_000;
/** Retry-After (seconds) of settlement_pending and settlement_unavailable. */
export const RETRY_AFTER_SECONDS = 5;

/**
 * x402 payment for priced calls, framework-free:
 *   admit:    decode -> check -> verify (facilitator) -> claim in the ledger
 *   conclude: settle -> record the answer -> receipt headers
 * Bad input never gets here (adapters validate first). A handler that fails settles nothing; a
 * failed settlement returns no data. A retry of a settled request with the same payment gets the
 * stored answer; the same payment on another request is refused.
 */
export class PaymentCore {
  readonly settings: PaymentSettings;
  readonly facilitator: Facilitator;
  readonly chain: PaymentDeps["chain"];
  readonly ledger: PaymentLedger;

  /** Settlements under way in this process, by payment. */
  private readonly inflight = new Map<string, Promise<unknown>>();
  /** Requests holding a claim (handler or settlement running): what drain() waits for. */
  private claims = 0;
  /** Requests being admitted (verification, waiting for a copy): drain() waits for them too, so that none claims unseen. */
  private admitting = 0;
  private draining = false;

  constructor(private readonly deps: PaymentDeps) {
    ({ settings: this.settings, facilitator: this.facilitator, chain: this.chain, ledger: this.ledger } = deps);
  }

  /** Before the handler: a claimed payment to run on, or the reply to send instead. */
  async admit(route: PricedRoute, request: PaymentRequest): Promise<{ claim: Claim } | { reply: Reply }> {
    this.admitting++;
    try {
      return await this.claim(route, request);
    } catch (error) {
      if (error instanceof PaymentError) return { reply: this.refusal(route, request.url, error) };
      // Nothing is claimed yet: whatever failed (the service store down, most likely), nothing can
      // have been charged, and the client should retry, not read a 500.
      log.error(`[payments] ${route.name}: admission failed: ${firstLine(error)}`);
      return { reply: this.refusal(route, request.url, new PaymentError("settlement_unavailable", "The payment could not be taken right now (the service's ledger did not answer); nothing was charged. Retry with the same payment.")) };
    } finally {
      this.admitting--;
    }
  }

  /** After the handler: settle and record, then the receipt headers to add, or the reply that replaces the answer. */
  async conclude(route: PricedRoute, request: Pick<PaymentRequest, "url">, claim: Claim, outcome: HandlerOutcome): Promise<{ headers: Record<string, string> } | { reply: Reply }> {
    const id = keyId(claim.key);
    const settling = this.concludeClaim(route, request, claim, outcome);
    this.inflight.set(id, settling);
    try {
      return await settling;
    } finally {
      if (this.inflight.get(id) === settling) this.inflight.delete(id);
      this.claims--;
    }
  }

  private async concludeClaim(route: PricedRoute, request: Pick<PaymentRequest, "url">, claim: Claim, outcome: HandlerOutcome): Promise<{ headers: Record<string, string> } | { reply: Reply }> {
    const { ledger } = this.deps;
    const { key, waived } = claim;
    if (claim.paid) {
      // Already charged on chain: the answer is the payer's, produced again; nothing is settled.
      if ("failed" in outcome) {
        await ledger.releaseRerun(key);
        return { headers: {} };
      }
      await ledger.answered(key, outcome.answer);
      return { headers: receiptHeaders(claim.paid.transaction, this.settings.network, claim.billing.payer) };
    }
    if ("failed" in outcome) {
      await this.release(key, `${outcome.failed}; nothing settled`);
      return { headers: {} };
    }
    if (waived) {
      await ledger.waived(key, outcome.answer);
      return { headers: {} };
    }
    const verified = claim.verified!;
    const timing = this.settings.timing;
    if (claim.deferred && timing.mode === "deferred" && (await ledger.queuedWithinCaps(key, outcome.answer, { perPayer: timing.maxPerPayerMicroUsd, total: timing.maxTotalMicroUsd }))) {
      this.deps.onQueued?.();
      return { headers: receiptHeaders(null, this.settings.network, verified.payer) };
    }
    // Not deferrable, or past a cap: settled before the answer.
    const settled = this.facilitator.settler
      ? await this.settleSelf(this.facilitator.settler, key, verified, outcome.answer)
      : await this.settleRemote(key, verified, outcome.answer);
    if ("transaction" in settled) {
      if (claim.repays) await ledger.repay(verified.payer, key).catch((error: Error) => log.error(`[payments] debts repaid in ${settled.transaction} but not recorded: ${error.message}`));
      return { headers: receiptHeaders(settled.transaction, this.settings.network, verified.payer) };
    }
    return { reply: this.refusal(route, request.url, settled.refused) };
  }

  /**
   * Self-settlement: the signed transaction's hash (with the answer) is recorded, then it is sent,
   * then its receipt is awaited. No receipt in time leaves the row `settling`: the chain decides later.
   */
  private async settleSelf(settler: Settler, key: PaymentKey, verified: VerifiedPayment, answer: StoredAnswer): Promise<{ transaction: string } | { refused: PaymentError }> {
    const { ledger } = this.deps;
    let submitted;
    try {
      submitted = await settler.submit(verified.payload, verified.requirements, async (signed) => {
        if (!(await ledger.settling(key, answer, signed))) throw new Error("the ledger row is no longer this request's");
      });
    } catch (error) {
      // The ledger could not record the transaction: it was not sent.
      await this.release(key, `settlement not sent: ${firstLine(error)}`);
      return { refused: unavailable() };
    }
    if (!submitted.sent) {
      await ledger.failed(key, submitted.reason);
      return { refused: submitted.unavailable ? unavailable() : settlementFailed(submitted.reason) };
    }
    const hash = submitted.signed.transaction;
    const receipt = await settler.receipt(hash, this.deps.receiptWaitMs ?? RECEIPT_WAIT_MS);
    if (receipt && usedIn(receipt, key.token, key.payer, key.nonce)) {
      await ledger.settled(key, hash).catch((error: Error) => log.error(`[payments] settled in ${hash} but the ledger update failed: ${error.message}`));
      return { transaction: hash };
    }
    // Reverted, or no receipt yet: the chain's state decides (the nonce may have been used by another transaction).
    return this.decideFromChain(key);
  }

  /**
   * Marks a claim failed (nothing charged) so that a retry may claim it again. A write the store
   * refuses (it is down) is tried again every second in the background: otherwise the row would
   * stay claimed until ABANDONED_AFTER_MS, and the payer's retries would wait for it.
   */
  private async release(key: PaymentKey, failure: string): Promise<void> {
    const attempt = () => this.ledger.failed(key, failure);
    try {
      await attempt();
    } catch {
      const deadline = Date.now() + ABANDONED_AFTER_MS;
      const retry = () => {
        if (Date.now() > deadline) return;
        setTimeout(() => attempt().catch(retry), 1_000).unref?.();
      };
      retry();
    }
  }

  /** A remote facilitator settles in one call; if it fails without a verdict, the chain decides. */
  private async settleRemote(key: PaymentKey, verified: VerifiedPayment, answer: StoredAnswer): Promise<{ transaction: string } | { refused: PaymentError }> {
    const { ledger } = this.deps;
    if (!(await ledger.settling(key, answer))) return { refused: pending() };
    let settlement: SettleResponse;
    try {
      settlement = await this.facilitator.settle(verified.payload, verified.requirements);
    } catch {
      return this.decideFromChain(key);
    }
    if (settlement.success) {
      await ledger.settled(key, settlement.transaction).catch((error: Error) => log.error(`[payments] settled in ${settlement.transaction} but the ledger update failed: ${error.message}`));
      return { transaction: settlement.transaction };
    }
    const reason = settlement.errorReason ?? "settlement failed";
    if (settlement.transaction) await ledger.settling(key, null, { transaction: settlement.transaction });
    const decided = await this.decideFromChain(key, /^invalid_/.test(reason) && !settlement.transaction ? reason : undefined);
    return decided;
  }

  /**
   * The outcome of a settlement that did not end in a receipt of success, from the chain's state.
   * `refusedBeforeSending`: the facilitator refused it before any transaction (nothing can move).
   */
  private async decideFromChain(key: PaymentKey, refusedBeforeSending?: string): Promise<{ transaction: string } | { refused: PaymentError }> {
    const row = await this.ledger.find(key);
    if (!row) return { refused: pending() };
    const outcome = await reconcileRow(row, this.reconcileDeps());
    if (outcome === "pending") {
      if (refusedBeforeSending) {
        await this.ledger.failed(key, refusedBeforeSending);
        return { refused: settlementFailed(refusedBeforeSending) };
      }
      await this.ledger.touch(key).catch(() => undefined);
      return { refused: pending() };
    }
    if (outcome.status === "settled") return { transaction: outcome.transaction };
    return { refused: settlementFailed(outcome.failure, outcome.transaction) };
  }

  /** One row's outcome as the chain tells it, not recorded (chain errors are thrown). */
  chainOutcome(row: PaymentRow): Promise<Resolution | "pending"> {
    return chainOutcome(row, this.reconcileDeps());
  }

  /** Reads one row's outcome from the chain and records it (the settlement worker's verdict on a failed attempt). */
  reconcileOne(row: PaymentRow): Promise<Resolution | "pending"> {
    return reconcileRow(row, this.reconcileDeps());
  }

  private reconcileDeps() {
    return { chain: this.deps.chain, ledger: this.ledger, payTo: this.settings.payTo, settler: this.facilitator.settler, onOutcome: this.deps.onOutcome };
  }

  /**
   * Settles from the chain every row whose outcome is unknown: `settling` rows idle for
   * `settlingIdleMs` (0 at start: rows left by a crash) and abandoned claims. Rows this process is
   * settling right now are left to their request.
   */
  async reconcileUnresolved(settlingIdleMs: number): Promise<{ checked: number; resolved: number; outcomes: (Resolution | "pending")[] }> {
    const rows = (await this.ledger.unresolved(settlingIdleMs)).filter((row) => !this.inflight.has(keyId(keyOf(row))));
    const outcomes: (Resolution | "pending")[] = [];
    for (const row of rows) outcomes.push(await reconcileRow(row, this.reconcileDeps()));
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
    return { drained: busy() === 0, inFlight: busy() };
  }

  private async claim(route: PricedRoute, request: PaymentRequest): Promise<{ claim: Claim } | { reply: Reply }> {
    const { settings, ledger } = this.deps;
    const attempt = decodePayment(request.headers, settings.maxHeaderBytes);
    if (!attempt) {
      throw new PaymentError("payment_required", `${route.name} costs ${unitsToUsd(route.microUsd)} USD per call: pay with an x402 payment (EIP-3009 authorization in USDT or USDC on Celo).`);
    }
    const token = await checkPayment(attempt, route.microUsd, settings, request.caller, Math.floor(Date.now() / 1000));
    const ownKey = { token: token.address, payer: attempt.authorization.from, nonce: attempt.authorization.nonce };
    const fingerprint = sha256(`${route.name}\n${request.path}\n${JSON.stringify(request.input)}`);
    const ownSignatureHash = sha256(attempt.signature.toLowerCase());
    // With a payment-identifier, the earlier payment sent under the same id (a retry signed anew)
    // is followed instead: its answer, or its outcome, is this request's, and this one is not charged.
    let [key, signatureHash, following] = [ownKey as PaymentKey, ownSignatureHash, false];

    // The indexed payer state is read while the ledger is: no wait of its own on the hot path.
    const payerState = this.localPayerState(attempt, token);
    const newPayment = (key: PaymentKey, signatureHash: string, amount: bigint): NewPayment => ({
      ...key,
      amount,
      route: route.name,
      subject: request.subject ?? null,
      fingerprint,
      signatureHash,
      paymentId: attempt.paymentId ?? null,
      encoding: attempt.encoding,
      validBefore: attempt.authorization.validBefore,
    });
    if (payerState && !attempt.paymentId && !route.freeRead && this.deferrable(route)) {
      const claimed = await this.claimNew(attempt, token, payerState, newPayment(ownKey, ownSignatureHash, attempt.authorization.value));
      if (claimed) return claimed;
    }
    // The first round reads the row and the payer's open amounts together; a later round has waited, and reads them again.
    let openRead: OpenAmounts | undefined;

    for (let round = 0; ; round++) {
      let existing: PaymentRow | undefined;
      if (round === 0) ({ row: existing, open: openRead } = await ledger.lookup(key));
      else [existing, openRead] = [await ledger.find(key), undefined];
      if (!following && !existing && attempt.paymentId) {
        const earlier = await ledger.findByPaymentId(ownKey.payer, attempt.paymentId);
        if (earlier && FOLLOWED.has(earlier.status)) {
          if (earlier.fingerprint !== fingerprint) {
            throw new PaymentError("payment_id_reused", `Payment identifier ${attempt.paymentId} already named another request; use a new identifier for a new request.`);
          }
          // Only the payer may collect what its identifier bought: the signature must be the payer's.
          if ((await signerOf(attempt, token, settings)) !== ownKey.payer) await verifyPayment(attempt, token, this.deps);
          [key, signatureHash, following, existing] = [keyOf(earlier), earlier.signatureHash, true, earlier];
        }
      }
      if (following && existing && !FOLLOWED.has(existing.status)) {
        // The earlier payment failed or lapsed without charge: this one pays.
        [key, signatureHash, following] = [ownKey, ownSignatureHash, false];
        continue;
      }
      if (existing && (existing.fingerprint !== fingerprint || existing.signatureHash !== signatureHash)) {
        throw new PaymentError("payment_reused", "This payment authorization was already presented with another request; sign a new one for this request.");
      }
      if (existing?.status === "pending" && !isAbandoned(existing)) {
        await waitWhilePending(ledger, key);
        continue;
      }
      if (existing?.status === "settling") {
        await this.awaitSettlement(existing);
        continue;
      }
      if (existing?.status === "settled" && existing.responseBody === null) {
        // Charged, but the answer was never recorded (a crash between settlement and record): run the
        // handler again, settle nothing. One request at a time: concurrent retries wait for its answer.
        if (isRerunning(existing) || !(await ledger.claimRerun(key))) {
          await waitWhileRerunning(ledger, key);
          continue;
        }
        const billing = { chargedUnits: BigInt(existing.amount), token, payer: key.payer, waived: false };
        this.claims++;
        return { claim: { key, verified: null, waived: false, billing, paid: { transaction: existing.transaction! } } };
      }
      if (existing?.status === "settled" || existing?.status === "waived" || existing?.status === "queued") return { reply: this.replay(existing) };
      if (existing?.status === "expired") throw new PaymentError("authorization_expired", "This authorization expired without being used: it was never charged. Sign a new one.");
      if (existing?.status === "used_elsewhere") {
        throw new PaymentError("nonce_already_used", `This authorization was used or cancelled on chain by a transaction that did not pay for this request (${existing.failure}); it was not charged here. Sign a new one.`);
      }
      if (round > 2) throw new PaymentError("settlement_failed", `The payment could not be settled: ${existing?.failure ?? "unknown failure"}.`);
      if (this.draining) throw shuttingDown();

      const open = openRead ?? (await ledger.openFor(ownKey.payer, token.address));
      let verified: VerifiedPayment;
      try {
        verified = await this.verify(attempt, token, open.unsettled, payerState);
      } catch (error) {
        // The nonce is spent but we hold a row for it: the chain says by whom (ours is never "already used").
        // (Another copy of this request may have claimed and settled it meanwhile: read the row again.)
        const row = error instanceof PaymentError && error.code === "nonce_already_used" ? await ledger.find(key) : undefined;
        if (row && row.fingerprint === fingerprint && row.signatureHash === signatureHash) {
          if (row.status === "failed" || row.status === "pending") {
            const outcome = await reconcileRow(row, this.reconcileDeps());
            if (outcome === "pending" && row.status === "failed") throw pending();
          }
          continue;
        }
        throw error;
      }
      // A payer whose deferred settlement failed pays that amount again with this call, settled first.
      const owed = open.owed;
      if (owed > 0n && verified.amount < priceInUnits(route.microUsd, token.decimals) + owed) throw unsettledPayment(route, owed);
      const waived = owed === 0n && (await this.isFreeRead(route, verified.payer, request.subject));
      // Verified while the shutdown began: nothing is claimed, so the process may exit at once.
      if (this.draining) throw shuttingDown();
      const entry = newPayment(key, signatureHash, verified.amount);
      const deferrable = !waived && owed === 0n && this.deferrable(route);
      const claimed = deferrable ? await ledger.claimDeferred(entry, { signature: attempt.signature, validAfter: attempt.authorization.validAfter }) : await ledger.claim(entry);
      if (claimed) {
        const billing = { chargedUnits: waived ? 0n : verified.amount, token: verified.token, payer: verified.payer, waived };
        this.claims++;
        return { claim: { key, verified, waived, billing, deferred: deferrable, repays: owed > 0n } };
      }
    }
  }

  /** Whether this route's payments may be answered before they are settled (X402_SETTLEMENT=deferred, a relayer, a route that allows it). */
  private deferrable(route: PricedRoute): boolean {
    return this.settings.timing.mode === "deferred" && !route.settleFirst && this.facilitator.settler !== undefined;
  }

  /**
   * Deferred mode's way for a payment presented for the first time, in one round trip: once its
   * signature checks out, its claim is inserted while the index is read, and its funds are checked
   * against what the insert says its payer has open. A refusal takes the claim back. Undefined when
   * the full way must decide: a row exists already, a contract wallet, a payer with debts, a
   * balance the index does not follow.
   */
  private async claimNew(attempt: PaymentAttempt, token: TokenInfo, payerState: PayerState, entry: NewPayment): Promise<{ claim: Claim } | undefined> {
    if ((await checkSignatureLocally(attempt, token, this.settings)) === "needs_rpc") return undefined;
    if (this.draining) throw shuttingDown();
    const open = await this.ledger.claimFirst(entry, { signature: attempt.signature, validAfter: attempt.authorization.validAfter });
    if (!open) return undefined;
    const takeBack = () => this.ledger.unclaim(entry, entry.signatureHash).catch((error: Error) => log.error(`[payments] a refused claim could not be taken back (it lapses after ${ABANDONED_AFTER_MS} ms): ${error.message}`));
    let verified: VerifiedPayment | "needs_rpc" = "needs_rpc";
    try {
      if (open.owed === 0n) verified = await checkFundsLocally(attempt, token, { settings: this.settings, facts: payerState.read(token.address, entry.payer, entry.nonce as Hex), unsettled: open.unsettled });
    } catch (error) {
      await takeBack();
      throw error;
    }
    if (verified === "needs_rpc") {
      await takeBack();
      return undefined;
    }
    const billing = { chargedUnits: verified.amount, token: verified.token, payer: verified.payer, waived: false };
    this.claims++;
    return { claim: { key: { token: entry.token, payer: entry.payer, nonce: entry.nonce }, verified, waived: false, billing, deferred: true } };
  }

  /**
   * A retry of a payment whose settlement outcome is unknown: wait for the request settling it in
   * this process, or read the outcome from the chain, up to SETTLING_WAIT_MS; then settlement_pending.
   */
  private async awaitSettlement(row: PaymentRow): Promise<void> {
    const key = keyOf(row);
    const deadline = Date.now() + (this.deps.settlingWaitMs ?? SETTLING_WAIT_MS);
    for (;;) {
      const local = this.inflight.get(keyId(key));
      if (local) await Promise.race([local.catch(() => undefined), sleep(Math.max(0, deadline - Date.now()))]);
      else if ((await reconcileRow(row, this.reconcileDeps())) !== "pending") return;
      const now = await this.ledger.find(key);
      if (!now || now.status !== "settling") return;
      if (Date.now() >= deadline) throw pending();
      await sleep(250);
      row = now;
    }
  }

  /**
   * Deferred mode verifies from the indexed balance and authorization events, less what this
   * payer has claimed but not settled: no RPC on the hot path. Contract wallets, and before mode,
   * go through the facilitator (the signature and a simulated transfer over RPC).
   */
  private async verify(attempt: PaymentAttempt, token: TokenInfo, unsettled: bigint, payerState: PayerState | undefined): Promise<VerifiedPayment> {
    if (payerState) {
      const local = await verifyWithoutRpc(attempt, token, { settings: this.settings, state: payerState, unsettled });
      if (local !== "needs_rpc") return local;
    }
    return verifyPayment(attempt, token, this.deps);
  }

  /** Deferred mode: this attempt's payer state, its reads already started (see prefetched). */
  private localPayerState(attempt: PaymentAttempt, token: TokenInfo): PayerState | undefined {
    const { payerState } = this.deps;
    if (this.settings.timing.mode !== "deferred" || !payerState) return undefined;
    return prefetched(payerState, token.address, attempt.authorization.from, attempt.authorization.nonce);
  }

  private async isFreeRead(route: PricedRoute, payer: Address, subject: Address | undefined): Promise<boolean> {
    return subject !== undefined && paidRecently(this.ledger, route, payer, subject);
  }

  /** The refusal for `error`: a 402 with the payment requirements, or the error body with its status. */
  refusal(route: PricedRoute, url: string, error: PaymentError): Reply {
    // 503s also name their code at the top level, where 402 answers have it: a client reads both alike.
    if (error.status === 503) return jsonReply(503, { ...errorBody(error.code, error.message, error.details), code: error.code }, { "Retry-After": String(RETRY_AFTER_SECONDS) });
    if (error.status !== 402) return jsonReply(error.status, errorBody(error.code, error.message, error.details));
    const answer = paymentRequiredAnswer(this.settings, error.price === undefined ? route : { ...route, microUsd: error.price }, url, error);
    return jsonReply(402, answer.body, answer.headers);
  }

  /** The answer a settled (or waived) payment bought, again: same body, same status, one charge. */
  private replay(row: PaymentRow): Reply {
    const headers: Record<string, string> = { "content-type": row.responseType ?? "application/json", "x-payment-replayed": "true" };
    if (row.transaction || row.status === "queued") Object.assign(headers, receiptHeaders(row.status === "queued" ? null : row.transaction, this.settings.network, row.payer as Address));
    return { status: row.responseStatus ?? 200, headers, body: row.responseBody ?? "" };
  }
}

/**
 * PAYMENT-RESPONSE (v2) and X-PAYMENT-RESPONSE (v1): the settlement receipt. A deferred payment's
 * (transaction null) has no transaction yet: `extra.settlement` is "pending", and the payment is
 * settled by the worker before its validBefore.
 */
function receiptHeaders(transaction: string | null, network: PaymentSettings["network"], payer: string): Record<string, string> {
  const settlement = transaction === null ? { transaction: "", extra: { settlement: "pending" } } : { transaction };
  const encoded = encodePaymentResponseHeader({ success: true, ...settlement, network, payer });
  return { "PAYMENT-RESPONSE": encoded, "X-PAYMENT-RESPONSE": encoded, "Access-Control-Expose-Headers": "PAYMENT-RESPONSE, X-PAYMENT-RESPONSE" };
}

const jsonReply = (status: number, body: unknown, headers: Record<string, string> = {}): Reply => ({
  status,
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(body),
});

async function waitWhilePending(ledger: PaymentLedger, key: PaymentKey) {
  const deadline = Date.now() + IN_FLIGHT_WAIT_MS;
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    const row = await ledger.find(key);
    if (!row || row.status !== "pending" || isAbandoned(row)) return;
  }
  throw pending();
}

async function waitWhileRerunning(ledger: PaymentLedger, key: PaymentKey) {
  const deadline = Date.now() + IN_FLIGHT_WAIT_MS;
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    const row = await ledger.find(key);
    if (!row || !isRerunning(row)) return;
  }
  throw pending();
}

/** `state` with this attempt's facts already being read: the read starts now, and answers this attempt from then on. */
function prefetched(state: PayerState, token: Address, payer: Address, nonce: Hex): PayerState {
  const facts = state.read(token, payer, nonce);
  facts.catch(() => undefined); // a refusal that never asks leaves it unobserved, not unhandled
  return { read: (t, wallet, n) => (t === token && wallet === payer && n === nonce ? facts : state.read(t, wallet, n)) };
}

/** Rows a payment-identifier retry follows: their payment may yet be (or was) charged. */
const FOLLOWED = new Set(["pending", "queued", "settling", "settled", "waived"]);


/** The outcome of this payment's settlement is not known yet: the client's way back is a retry with the same payment. */
const pending = () =>
  new PaymentError(
    "settlement_pending",
    "This payment's settlement is under way and its outcome is not known yet. Retry with the same payment (same request) to get the answer it paid for; it will not be charged twice.",
  );
/** The payer owes failed deferred settlements: this call costs its price plus the debt, settled before it answers. */
const unsettledPayment = (route: PricedRoute, owedUnits: bigint) =>
  new PaymentError(
    "unsettled_payment",
    `An earlier answer to this payer was not paid: its deferred settlement failed (the authorization was cancelled or the balance moved). Pay the ${unitsToUsd(owedUnits)} USD owed with this call: authorize ${unitsToUsd(route.microUsd + owedUnits)} USD.`,
    { owedUnits: owedUnits.toString() },
    route.microUsd + owedUnits,
  );
const shuttingDown = () => new PaymentError("settlement_unavailable", "The service is shutting down; nothing was charged. Retry with the same payment.");
const unavailable = () =>
  new PaymentError("settlement_unavailable", "The payment could not be settled right now (the chain did not answer); nothing was charged and no data is returned. Retry with the same payment.");
const settlementFailed = (reason: string, transaction?: string) =>
  new PaymentError("settlement_failed", `The payment was verified but its settlement failed (${reason}); nothing was charged and no data is returned.`, {
    reason,
    transaction: transaction ?? null,
  });

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
