import type { Hex } from "viem";
import type { TokenInfo } from "../../../config/celo.ts";
import { log } from "../../../shared/log.ts";
import type { PaymentRow, PaymentStatus } from "../../store/schema.ts";
import { PaymentError } from "../errors.ts";
import { fingerprintOf, sha256Hex } from "../fingerprint.ts";
import { paidRecently } from "../free-read.ts";
import { decodePayment, type PaymentAttempt } from "../header.ts";
import {
  ABANDONED_AFTER_MS,
  isAbandoned,
  isRerunning,
  type NewPayment,
  type OpenAmounts,
  type PaymentKey,
} from "../ledger/ledger.ts";
import { checkFundsLocally, checkSignatureLocally, type PayerState, verifyWithoutRpc } from "../local-verify.ts";
import { priceInUnits } from "../prices.ts";
import { chainOutcome, keyOf, reconcileRow } from "../reconcile.ts";
import { checkPaymentTerms, signerOf, type VerifiedPayment, verifyPayment } from "../verify.ts";
import { type CoreContext, deferrable, reconcileDeps } from "./context.ts";
import { decide, type RowDecision } from "./decide.ts";
import {
  paymentIdReused,
  paymentRequired,
  sanctionedPayer,
  settlementPending,
  shuttingDown,
  unsettledPayment,
} from "./refusals.ts";
import { replayReply } from "./replies.ts";
import type { Admission, Claim, PaymentRequest, PricedRoute } from "./types.ts";
import { awaitSettlement, waitWhilePending, waitWhileRerunning } from "./waits.ts";

// Admission: decode -> (deferred, first sight: claim at once) -> each round: read the row ->
// identify which payment this attempt is -> decide from its row -> wait, replay, rerun, refuse,
// or pay (verify -> debts and free read -> claim). A round that waited, or lost a race for the
// claim, reads the row again; decide() ends it after MAX_ROUNDS.

/** One request's payment attempt, decoded and checked: what every step reads. */
type Attempt = {
  route: PricedRoute;
  request: PaymentRequest;
  payment: PaymentAttempt;
  token: TokenInfo;
  /** The request and its validated input, hashed: a retry must be the same request. */
  fingerprint: string;
  /** The payment this attempt carries. */
  own: Target;
  /** Its authorization is past validBefore: it pays nothing more, and only collects what its own row holds (the refusal otherwise). */
  lapsed?: PaymentError;
  /** Deferred mode: the indexed payer state, this attempt's reads already started. */
  payerState?: PayerState;
};

/**
 * The payment an attempt is for: its own, or (with a payment-identifier) the earlier payment sent
 * under the same id, a retry signed anew, whose answer or outcome is this request's, not charged again.
 */
type Target = { key: PaymentKey; signatureHash: string; following: boolean };

/** Rows a payment-identifier retry follows: their payment may yet be (or was) charged. */
const FOLLOWED = new Set<PaymentStatus>(["pending", "queued", "settling", "settled", "waived"]);

/** Before the handler: a claimed payment to run on, or the reply to send instead. Refusals are thrown (PaymentError). */
export async function admitPayment(ctx: CoreContext, route: PricedRoute, request: PaymentRequest): Promise<Admission> {
  const attempt = await decode(ctx, route, request);
  const first = await claimAtFirstSight(ctx, attempt);
  if (first) return first;
  let target = attempt.own;
  // The first round reads the row and the payer's open amounts together; a later round has waited, and reads the row again.
  let read: { row: PaymentRow | undefined; open?: OpenAmounts } = await ctx.ledger.lookup(target.key);
  for (let round = 0; ; round++) {
    if (round > 0) read = { row: await ctx.ledger.find(target.key) };
    const identified = await identify(ctx, attempt, target, read.row);
    if (!identified) {
      // The earlier payment failed or lapsed without charge: this one pays.
      target = attempt.own;
      continue;
    }
    ({ target } = identified);
    const decision = decide(
      identified.row,
      { fingerprint: attempt.fingerprint, signatureHash: target.signatureHash, lapsed: attempt.lapsed },
      round,
    );
    const admitted = await act(ctx, attempt, target, identified.row, decision, read.open);
    if (admitted) return admitted;
  }
}

/** The payment header decoded, the checks that need no chain, and what identifies this attempt. */
async function decode(ctx: CoreContext, route: PricedRoute, request: PaymentRequest): Promise<Attempt> {
  const { settings } = ctx;
  const payment = decodePayment(request.headers, settings.maxHeaderBytes);
  if (!payment) throw paymentRequired(route);
  const { token, lapsed } = await checkPaymentTerms(
    payment,
    route.microUsd,
    settings,
    request.caller,
    Math.floor(Date.now() / 1000),
  );
  const { from, nonce } = payment.authorization;
  const own = {
    key: { token: token.address, payer: from, nonce },
    signatureHash: sha256Hex(payment.signature.toLowerCase()),
    following: false,
  };
  const fingerprint = fingerprintOf(route, request);
  // The indexed payer state is read while the ledger is: no wait of its own on the hot path.
  const payerState =
    !lapsed && settings.timing.mode === "deferred" && ctx.deps.payerState
      ? prefetched(ctx.deps.payerState, token.address, from, nonce)
      : undefined;
  return { route, request, payment, token, fingerprint, own, lapsed, payerState };
}

/**
 * Which payment this attempt is, given the row read for `target`: its own, or the earlier one its
 * payment-identifier names. Undefined when the followed payment turned out never charged: the
 * attempt then pays with its own authorization, from a fresh read.
 */
async function identify(
  ctx: CoreContext,
  attempt: Attempt,
  target: Target,
  row: PaymentRow | undefined,
): Promise<{ target: Target; row: PaymentRow | undefined } | undefined> {
  const identified = target.following ? { target, row } : await follow(ctx, attempt, row);
  if (!identified) return { target, row };
  if (identified.row && FOLLOWED.has(identified.row.status) && !isAbandoned(identified.row)) return identified;
  // Never charged: failed, lapsed, gone, or claimed by a request that died (a pending claim sent
  // nothing). Its claim is released, so that the identifier passes on to this attempt's own
  // authorization: this attempt's authorization never pays under the earlier payment's key.
  if (identified.row && isAbandoned(identified.row))
    await ctx.ledger.failed(identified.target.key, ABANDONED_FOR_RETRY);
  return undefined;
}

/**
 * The earlier payment sent under this attempt's payment-identifier, when its own row is not there
 * yet and that one may be charged. A lapsed authorization follows none: a retry signed anew is live.
 */
async function follow(
  ctx: CoreContext,
  attempt: Attempt,
  row: PaymentRow | undefined,
): Promise<{ target: Target; row: PaymentRow } | undefined> {
  const { paymentId } = attempt.payment;
  if (row || !paymentId || attempt.lapsed) return undefined;
  const earlier = await ctx.ledger.findByPaymentId(attempt.own.key.payer, paymentId);
  if (!earlier || !FOLLOWED.has(earlier.status)) return undefined;
  if (earlier.fingerprint !== attempt.fingerprint) throw paymentIdReused(paymentId);
  // Only the payer may collect what its identifier bought: the signature must be the payer's.
  if ((await signerOf(attempt.payment, attempt.token, ctx.settings)) !== attempt.own.key.payer)
    await verifyPayment(attempt.payment, attempt.token, ctx.deps);
  return { target: { key: keyOf(earlier), signatureHash: earlier.signatureHash, following: true }, row: earlier };
}

const ABANDONED_FOR_RETRY =
  "claim abandoned by its request; a retry signed anew under the same payment-identifier pays instead; nothing charged";

/** Carries out a decision: the admission, or undefined for another round. */
async function act(
  ctx: CoreContext,
  attempt: Attempt,
  target: Target,
  row: PaymentRow | undefined,
  decision: RowDecision,
  open: OpenAmounts | undefined,
): Promise<Admission | undefined> {
  switch (decision.next) {
    case "refuse":
      throw decision.error;
    case "replay":
      return { reply: replayReply(row!, ctx.settings.network) };
    case "wait_for_claim":
      await waitWhilePending(ctx.ledger, target.key);
      return undefined;
    case "wait_for_settlement":
      await awaitSettlement(ctx, row!);
      return undefined;
    case "rerun":
      return rerun(ctx, attempt, target, row!);
    case "ask_chain":
      return paidAfterAll(ctx, row!, attempt.lapsed!);
    case "pay":
      return pay(ctx, attempt, target, open);
  }
}

/**
 * Charged, but the answer was never stored (a crash between settlement and record): the handler
 * runs again and nothing is settled. One request at a time: concurrent retries wait for its answer.
 */
async function rerun(
  ctx: CoreContext,
  attempt: Attempt,
  target: Target,
  row: PaymentRow,
): Promise<Admission | undefined> {
  const { key } = target;
  if (isRerunning(row) || !(await ctx.ledger.claimRerun(key))) {
    await waitWhileRerunning(ctx.ledger, key);
    return undefined;
  }
  const billing = { chargedUnits: BigInt(row.amount), token: attempt.token, payer: key.payer, waived: false };
  return { claim: { key, verified: null, waived: false, billing, paid: { transaction: row.transaction! } } };
}

/**
 * A lapsed authorization whose row says never charged: undefined (another round, a rerun) if the
 * chain says it paid us after all, recorded as the reconciler does; else `lapsed` is thrown. Only
 * that outcome is recorded: the row's own status stands otherwise (a deferred failure stays a debt).
 */
async function paidAfterAll(ctx: CoreContext, row: PaymentRow, lapsed: PaymentError): Promise<undefined> {
  const deps = reconcileDeps(ctx);
  const outcome = await chainOutcome(row, deps).catch(() => "pending" as const);
  if (outcome === "pending" || outcome.status !== "settled" || (await reconcileRow(row, deps)) === "pending")
    throw lapsed;
  return undefined;
}

/**
 * The payment is open: verify it, price it (the payer's debts, a free read), claim it. Undefined
 * when another request claimed it first, or when its nonce turned out spent by one of ours.
 */
async function pay(
  ctx: CoreContext,
  attempt: Attempt,
  target: Target,
  known: OpenAmounts | undefined,
): Promise<Admission | undefined> {
  const { ledger } = ctx;
  const { route, request, token, payment } = attempt;
  if (ctx.draining()) throw shuttingDown();
  await refuseListed(ctx, attempt);
  const open = known ?? (await ledger.openFor(attempt.own.key.payer, token.address));
  let verified: VerifiedPayment;
  try {
    verified = await verify(ctx, attempt, open.unsettled);
  } catch (error) {
    await spentByUs(ctx, attempt, target, error);
    return undefined;
  }
  // A payer whose deferred settlement failed pays that amount again with this call, settled first.
  const { owed } = open;
  if (owed > 0n && verified.amount < priceInUnits(route.microUsd, token.decimals) + owed)
    throw unsettledPayment(route, owed);
  const waived =
    owed === 0n &&
    request.subject !== undefined &&
    (await paidRecently(ledger, route, verified.payer, request.subject));
  // Verified while the shutdown began: nothing is claimed, so the process may exit at once.
  if (ctx.draining()) throw shuttingDown();
  const entry = newPayment(attempt, target, verified.amount);
  const deferred = !waived && owed === 0n && deferrable(ctx, route, payment.authorization.validBefore);
  const claimed = deferred
    ? await ledger.claimDeferred(entry, { signature: payment.signature, validAfter: payment.authorization.validAfter })
    : await ledger.claim(entry);
  if (!claimed) return undefined;
  const billing = { chargedUnits: waived ? 0n : verified.amount, token: verified.token, payer: verified.payer, waived };
  return { claim: { key: target.key, verified, waived, billing, deferred, ...(owed > 0n ? { repays: owed } : {}) } };
}

/**
 * A verification that refused: rethrown, unless the nonce is spent and we hold this request's row
 * for it (ours is never "already used": another copy of this request may have settled it
 * meanwhile). Then the chain says by whom, and the caller reads the row again.
 */
async function spentByUs(ctx: CoreContext, attempt: Attempt, target: Target, error: unknown): Promise<void> {
  const row =
    error instanceof PaymentError && error.code === "nonce_already_used"
      ? await ctx.ledger.find(target.key)
      : undefined;
  if (!row || row.fingerprint !== attempt.fingerprint || row.signatureHash !== target.signatureHash) throw error;
  if (row.status === "failed" || row.status === "pending") {
    const outcome = await reconcileRow(row, reconcileDeps(ctx));
    if (outcome === "pending" && row.status === "failed") throw settlementPending();
  }
}

/**
 * Deferred mode verifies from the indexed balance and authorization events, less what this
 * payer has claimed but not settled: no RPC on the hot path. Contract wallets, and before mode,
 * go through the facilitator (the signature and a simulated transfer over RPC).
 */
async function verify(ctx: CoreContext, attempt: Attempt, unsettled: bigint): Promise<VerifiedPayment> {
  if (attempt.payerState) {
    const local = await verifyWithoutRpc(attempt.payment, attempt.token, {
      settings: ctx.settings,
      state: attempt.payerState,
      unsettled,
    });
    if (local !== "needs_rpc") return local;
  }
  return verifyPayment(attempt.payment, attempt.token, ctx.deps);
}

/**
 * Deferred mode's way for a payment presented for the first time, in one round trip: once its
 * signature checks out, its claim is inserted while the index is read, and its funds are checked
 * against what the insert says its payer has open. A refusal takes the claim back. Undefined when
 * the full way must decide: a row exists already, a contract wallet, a payer with debts, a
 * balance the index does not follow, a payment-identifier, a free-read route or a lapsed authorization.
 */
async function claimAtFirstSight(ctx: CoreContext, attempt: Attempt): Promise<{ claim: Claim } | undefined> {
  const { payerState, payment, token, route, own } = attempt;
  if (
    !payerState ||
    attempt.lapsed ||
    payment.paymentId ||
    route.freeRead ||
    !deferrable(ctx, route, payment.authorization.validBefore)
  )
    return undefined;
  if ((await checkSignatureLocally(payment, token, ctx.settings)) === "needs_rpc") return undefined;
  if (ctx.draining()) throw shuttingDown();
  await refuseListed(ctx, attempt);
  const entry = newPayment(attempt, own, payment.authorization.value);
  const open = await ctx.ledger.claimFirst(entry, {
    signature: payment.signature,
    validAfter: payment.authorization.validAfter,
  });
  if (!open) return undefined;
  const takeBack = () =>
    ctx.ledger
      .unclaim(entry, entry.signatureHash)
      .catch((error: Error) =>
        log.error(
          `[payments] a refused claim could not be taken back (it lapses after ${ABANDONED_AFTER_MS} ms): ${error.message}`,
        ),
      );
  let verified: VerifiedPayment | "needs_rpc" = "needs_rpc";
  try {
    if (open.owed === 0n)
      verified = await checkFundsLocally(payment, token, {
        settings: ctx.settings,
        facts: payerState.read(token.address, entry.payer, entry.nonce as Hex),
        unsettled: open.unsettled,
      });
  } catch (error) {
    await takeBack();
    throw error;
  }
  if (verified === "needs_rpc") {
    await takeBack();
    return undefined;
  }
  const billing = { chargedUnits: verified.amount, token: verified.token, payer: verified.payer, waived: false };
  return { claim: { key: own.key, verified, waived: false, billing, deferred: true } };
}

/**
 * A payer listed on the sanctions oracle is refused before a new payment is verified or claimed
 * (403, nothing charged). Only new money is refused: what a payment already charged before the
 * listing paid for (a replay, a rerun after a crash) is still answered, never money without data.
 */
async function refuseListed(ctx: CoreContext, attempt: Attempt): Promise<void> {
  const payer = attempt.payment.authorization.from;
  if (await ctx.deps.sanctions?.isListed(payer)) throw sanctionedPayer(payer);
}

/** The ledger row that claims `target` for this attempt. */
const newPayment = (attempt: Attempt, target: Target, amount: bigint): NewPayment => ({
  ...target.key,
  amount,
  route: attempt.route.name,
  subject: attempt.request.subject ?? null,
  fingerprint: attempt.fingerprint,
  signatureHash: target.signatureHash,
  paymentId: attempt.payment.paymentId ?? null,
  encoding: attempt.payment.encoding,
  validBefore: attempt.payment.authorization.validBefore,
});

/** `state` with this attempt's facts already being read: the read starts now, and answers this attempt from then on. */
function prefetched(
  state: PayerState,
  token: TokenInfo["address"],
  payer: PaymentKey["payer"],
  nonce: Hex,
): PayerState {
  const facts = state.read(token, payer, nonce);
  facts.catch(() => undefined); // a refusal that never asks leaves it unobserved, not unhandled
  return {
    read: (t, wallet, n) => (t === token && wallet === payer && n === nonce ? facts : state.read(t, wallet, n)),
  };
}
