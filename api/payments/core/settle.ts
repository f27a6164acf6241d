import type { SettleResponse } from "@x402/core/types";
import { firstLine } from "../../../shared/async.ts";
import { log } from "../../../shared/log.ts";
import type { PaymentError } from "../errors.ts";
import { ABANDONED_AFTER_MS, type PaymentKey, type StoredAnswer } from "../ledger/ledger.ts";
import { reconcileRow } from "../reconcile.ts";
import { type Settler, type SubmitResult, usedIn } from "../relayer.ts";
import type { VerifiedPayment } from "../verify.ts";
import { type CoreContext, reconcileDeps } from "./context.ts";
import { concludeCredit } from "./credit.ts";
import { chainUnavailable, ledgerDown, settlementFailed, settlementPending } from "./refusals.ts";
import { capNotice, receiptHeaders } from "./replies.ts";
import type { Claim, HandlerOutcome } from "./types.ts";

/** A settlement's receipt is awaited this long; then the answer is 503 settlement_pending and the row stays `settling`. */
export const RECEIPT_WAIT_MS = 10_000;

/** How a settlement ended for the request: the transaction that paid, or the refusal that replaces the answer. */
type Settled = { transaction: string } | { refused: PaymentError };

/**
 * After the handler, by the claim's kind: a credit spend is kept or given back (core/credit.ts); a rerun records its answer (settles nothing); a failed
 * handler releases the claim; a free read records its answer; a deferred one joins the queue if
 * the caps have room; any other is settled before its answer leaves.
 */
export async function concludeClaim(
  ctx: CoreContext,
  claim: Claim,
  outcome: HandlerOutcome,
): Promise<{ headers: Record<string, string> } | { refused: PaymentError }> {
  const { ledger, settings } = ctx;
  const { key } = claim;
  if (claim.credit) return concludeCredit(ctx, claim.credit, "answer" in outcome ? outcome.answer : undefined);
  if (claim.paid) {
    // Already charged on chain: the answer is the payer's, produced again; nothing is settled.
    if ("failed" in outcome) {
      await ledger.releaseRerun(key);
      return { headers: {} };
    }
    await ledger.answered(key, outcome.answer);
    return { headers: receiptHeaders(claim.paid.transaction, settings.network, claim.billing.payer) };
  }
  if ("failed" in outcome) {
    await release(ctx, key, `${outcome.failed}; nothing settled`);
    return { headers: {} };
  }
  if (claim.waived) {
    await ledger.waived(key, outcome.answer);
    return { headers: {} };
  }
  const verified = claim.verified!;
  const { timing } = settings;
  if (claim.deferred && timing.mode === "deferred") {
    let queued: boolean;
    try {
      queued = await ledger.queuedWithinCaps(key, outcome.answer, {
        perPayer: timing.maxPerPayerMicroUsd,
        total: timing.maxTotalMicroUsd,
      });
    } catch (error) {
      // The store did not take the answer: it does not leave, and the claim is given up (nothing
      // charged; a retry pays anew). A write that landed all the same is settled and answered to a
      // retry of the same payment.
      await release(ctx, key, `deferred answer not queued (${firstLine(error)}); nothing settled`);
      return { refused: ledgerDown() };
    }
    if (queued) {
      ctx.deps.onQueued?.();
      return { headers: receiptHeaders(null, settings.network, verified.payer) };
    }
  }
  // Not deferrable, or past a cap: settled before the answer.
  const { settler } = ctx.facilitator;
  const settled = settler
    ? await settleSelf(ctx, settler, key, verified, outcome.answer)
    : await settleRemote(ctx, key, verified, outcome.answer);
  if ("refused" in settled) return settled;
  if (claim.repays)
    await ledger
      .repay(verified.payer, key, claim.repays)
      .catch((error: Error) =>
        log.error(`[payments] debts repaid in ${settled.transaction} but not recorded: ${error.message}`),
      );
  const receipt = receiptHeaders(settled.transaction, settings.network, verified.payer);
  // A deferred call settled first because the caps were full: the payer is told why, and of credit.
  return { headers: claim.deferred && timing.mode === "deferred" ? { ...receipt, ...capNotice() } : receipt };
}

/**
 * Self-settlement: the signed transaction's hash (with the answer) is recorded, then it is sent,
 * then its receipt is awaited. No receipt in time leaves the row `settling`: the chain decides later.
 */
async function settleSelf(
  ctx: CoreContext,
  settler: Settler,
  key: PaymentKey,
  verified: VerifiedPayment,
  answer: StoredAnswer,
): Promise<Settled> {
  const { ledger } = ctx;
  let submitted: SubmitResult;
  try {
    submitted = await settler.submit(verified.payload, verified.requirements, async (signed) => {
      if (!(await ledger.settling(key, answer, signed))) throw new Error("the ledger row is no longer this request's");
    });
  } catch (error) {
    // The ledger could not record the transaction: it was not sent.
    await release(ctx, key, `settlement not sent: ${firstLine(error)}`);
    return { refused: chainUnavailable() };
  }
  if (!submitted.sent) {
    await ledger.failed(key, submitted.reason);
    return { refused: submitted.unavailable ? chainUnavailable() : settlementFailed(submitted.reason) };
  }
  const hash = submitted.signed.transaction;
  const receipt = await settler.receipt(hash, ctx.deps.receiptWaitMs ?? RECEIPT_WAIT_MS);
  if (receipt && usedIn(receipt, key.token, key.payer, key.nonce)) {
    await recordSettled(ctx, key, hash);
    return { transaction: hash };
  }
  // Reverted, or no receipt yet: the chain's state decides (the nonce may have been used by another transaction).
  return decideFromChain(ctx, key);
}

/** A remote facilitator settles in one call; if it fails without a verdict, the chain decides. */
async function settleRemote(
  ctx: CoreContext,
  key: PaymentKey,
  verified: VerifiedPayment,
  answer: StoredAnswer,
): Promise<Settled> {
  const { ledger, facilitator } = ctx;
  if (!(await ledger.settling(key, answer))) return { refused: settlementPending() };
  let settlement: SettleResponse;
  try {
    settlement = await facilitator.settle(verified.payload, verified.requirements);
  } catch {
    return decideFromChain(ctx, key);
  }
  if (settlement.success) {
    await recordSettled(ctx, key, settlement.transaction);
    return { transaction: settlement.transaction };
  }
  const reason = settlement.errorReason ?? "settlement failed";
  if (settlement.transaction) await ledger.settling(key, null, { transaction: settlement.transaction });
  return decideFromChain(ctx, key, /^invalid_/.test(reason) && !settlement.transaction ? reason : undefined);
}

/** The money moved: recorded, and if the record fails the chain still says so (the reconciler writes it later). */
const recordSettled = (ctx: CoreContext, key: PaymentKey, transaction: string) =>
  ctx.ledger
    .settled(key, transaction)
    .catch((error: Error) =>
      log.error(`[payments] settled in ${transaction} but the ledger update failed: ${error.message}`),
    );

/**
 * The outcome of a settlement that did not end in a receipt of success, from the chain's state.
 * `refusedBeforeSending`: the facilitator refused it before any transaction (nothing can move).
 */
async function decideFromChain(ctx: CoreContext, key: PaymentKey, refusedBeforeSending?: string): Promise<Settled> {
  const { ledger } = ctx;
  const row = await ledger.find(key);
  if (!row) return { refused: settlementPending() };
  const outcome = await reconcileRow(row, reconcileDeps(ctx));
  if (outcome === "pending") {
    if (refusedBeforeSending) {
      await ledger.failed(key, refusedBeforeSending);
      return { refused: settlementFailed(refusedBeforeSending) };
    }
    await ledger.touch(key).catch(() => undefined);
    return { refused: settlementPending() };
  }
  if (outcome.status === "settled") return { transaction: outcome.transaction };
  return { refused: settlementFailed(outcome.failure, outcome.transaction) };
}

/**
 * Marks a claim failed (nothing charged) so that a retry may claim it again. A write the store
 * refuses (it is down) is tried again every second in the background: otherwise the row would
 * stay claimed until ABANDONED_AFTER_MS, and the payer's retries would wait for it.
 */
async function release(ctx: CoreContext, key: PaymentKey, failure: string): Promise<void> {
  const attempt = () => ctx.ledger.failed(key, failure);
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
