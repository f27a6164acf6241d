import { randomUUID } from "node:crypto";
import { isValidPaymentId } from "@x402/extensions/payment-identifier";
import type { Address } from "../../../config/addresses.ts";
import { askUntilAnswered, firstLine, sleep } from "../../../shared/async.ts";
import { log } from "../../../shared/log.ts";
import type { CreditSpendRow } from "../../store/schema.ts";
import { freeBilling } from "../billing.ts";
import { hashCreditToken } from "../credit-token.ts";
import { PaymentError } from "../errors.ts";
import { fingerprintOf } from "../fingerprint.ts";
import { paidRecently } from "../free-read.ts";
import type { CreditHold, HeldSpendOutcome, NewSpend, Resolution, StoredAnswer } from "../ledger/ledger.ts";
import { ABANDONED_AFTER_MS } from "../lifecycle.ts";
import { checkCaller } from "../verify.ts";
import type { CoreContext } from "./context.ts";
import { askUntilUndone } from "./credit-leases.ts";
import { MAX_ROUNDS } from "./decide.ts";
import {
  creditGivenBack,
  creditInsufficient,
  creditTokenInvalid,
  ledgerDown,
  paymentIdReused,
  sanctionedPayer,
  settlementPending,
  shuttingDown,
} from "./refusals.ts";
import type { Claim, CreditAdmission, LeasedCall, PaymentRequest, PricedRoute, Reply } from "./types.ts";

// A call paid from prepaid credit: who pays (a credit token's owner, or a signed-in wallet) ->
// a free read (it paid for this wallet's screen recently) runs free ->
// without a Payment-Identifier: the price taken from this replica's lease (core/credit-leases.ts)
// -> the handler -> the spend recorded before the answer leaves, or the price back in the lease;
// with one: a retry is answered again -> else the price is held from the balance in the write that
// claims the call -> the handler -> spent (answer stored) or released.

/** Who pays from credit: the bearer of a credit token, or a wallet signed in with SIGN-IN-WITH-X. */
export type CreditPayer = { token: string } | { wallet: Address };

/** How long a retry waits for the copy of its request that holds the same Payment-Identifier. */
const HELD_WAIT_MS = 90_000;
const POLL_MS = 50;

/** The ledger key a credit claim carries: no token moves, the nonce names the spend. */
const CREDIT_NONCE_PREFIX = "credit:";

/**
 * Before the handler: the price held from the payer's credit, the stored answer of a retry, or a
 * refusal (thrown). A token is resolved to its owner in the hold itself (one round trip); a hold
 * its owner may not make (sanctioned, another callerAddress) is given back at once. The owner's
 * sanctions check runs beside the hold when the owner is known before it (a signed-in wallet, or
 * a token this replica has seen).
 */
export async function admitCredit(
  ctx: CoreContext,
  route: PricedRoute,
  request: PaymentRequest,
  payer: CreditPayer,
): Promise<CreditAdmission> {
  const paymentId = request.headers.paymentId ?? null;
  if (paymentId !== null && !isValidPaymentId(paymentId))
    throw new PaymentError(
      "payment_malformed",
      "Payment-Identifier must be 16-128 letters, digits, '-' or '_' (an x402 payment-identifier).",
    );
  if (ctx.draining()) throw shuttingDown();
  const fingerprint = fingerprintOf(route, request);
  let who: { owner: Address } | { tokenHash: string } =
    "wallet" in payer ? { owner: payer.wallet } : { tokenHash: hashCreditToken(payer.token) };
  // Kept once the token is swapped for its owner (a retry, a free read): the call's spend is refused
  // if the token is revoked while it runs.
  const tokenHash = "tokenHash" in who ? who.tokenHash : null;
  const mayBeFree = route.freeRead !== undefined && request.subject !== undefined;
  if ((paymentId || mayBeFree) && "tokenHash" in who) {
    // A retry is looked up by its owner's identifier, and a free read by its owner's payments:
    // the owner is needed before the hold.
    const owner = await ctx.ledger.credit.tokenOwner(who.tokenHash);
    if (!owner) throw creditTokenInvalid();
    who = { owner };
  }
  const known = "owner" in who ? who.owner : ctx.tokenOwners.get(who.tokenHash);
  if (known) checkCaller(request.caller, known);
  const checked = known ? sanctionsRefusal(ctx, known) : undefined;
  if ("owner" in who && mayBeFree && (await paidRecently(ctx.ledger, route, who.owner, request.subject!))) {
    const refusal = await checked;
    if (refusal) throw refusal;
    return { free: freeBilling(ctx.settings.tokens, who.owner) };
  }
  // A settle-first route's call makes something outside the ledger (a passport on chain): it is
  // held, in a row that can name it (PaymentCore.reference), so that a crash before its answer
  // leaves is undone by the sweep rather than left standing unpaid, as a leased call would be.
  if (!paymentId && !route.settleFirst) return admitLeased(ctx, route, request, tokenHash, known, checked, fingerprint);
  for (let round = 0; round < MAX_ROUNDS; round++) {
    if (paymentId && "owner" in who) {
      const earlier = await ctx.ledger.credit.find(who.owner, paymentId);
      if (earlier) {
        if (earlier.fingerprint !== fingerprint) throw paymentIdReused(paymentId);
        if (earlier.status === "spent") {
          const refusal = await checked;
          if (refusal) throw refusal;
          return { reply: creditReplay(earlier) };
        }
        await waitWhileHeld(ctx, who.owner, paymentId);
        continue;
      }
    }
    const hold = await holdOrWait(ctx, route.microUsd, {
      id: randomUUID(),
      payer: who,
      route: route.name,
      subject: request.subject ?? null,
      fingerprint,
      paymentId,
      amount: route.microUsd,
    });
    if ("unknownToken" in hold) throw creditTokenInvalid();
    if ("existing" in hold) continue;
    if ("short" in hold) {
      // A payer who may not pay is told so rather than that its credit is short.
      const refusal = await checked;
      throw refusal ?? creditInsufficient(route, hold.short.balance + hold.short.leased);
    }
    const owner = hold.held.owner as Address;
    if ("tokenHash" in who) rememberOwner(ctx, who.tokenHash, owner);
    try {
      if (owner !== known) checkCaller(request.caller, owner);
      const refusal = await (owner === known ? checked : sanctionsRefusal(ctx, owner));
      if (refusal) throw refusal;
    } catch (error) {
      await ctx.ledger.credit.release(hold.held.id);
      throw error;
    }
    const token = ctx.settings.tokens.find((t) => t.address === hold.token) ?? ctx.settings.tokens[0]!;
    return {
      claim: {
        key: { token: token.address, payer: owner, nonce: `${CREDIT_NONCE_PREFIX}${hold.held.id}` },
        verified: null,
        waived: false,
        billing: { chargedUnits: route.microUsd, token, payer: owner, waived: false, creditLeft: hold.balance },
        credit: { spend: hold.held.id, balance: hold.balance, tokenHash },
      },
    };
  }
  throw settlementPending();
}

/**
 * A hold, made again while the lots are short but open leases hold enough (this replica's own
 * goes back, the others are asked back by the hold): refused only once LEASE_WAIT_MS has passed.
 */
async function holdOrWait(ctx: CoreContext, price: bigint, spend: NewSpend): Promise<CreditHold> {
  const deadline = ctx.leases.waitDeadline();
  for (;;) {
    const hold = await ctx.ledger.credit.hold(spend);
    if (!("short" in hold)) return hold;
    if ("owner" in spend.payer) ctx.leases.giveBack(spend.payer.owner);
    if (!(await ctx.leases.waitForLeases(hold.short, price, deadline))) return hold;
  }
}

/**
 * A call without a Payment-Identifier: its owner known (a token this replica has not seen is
 * looked up), checked, then its price taken from this replica's lease on the owner's credit, in
 * memory. Its spend is recorded once answered (concludeCredit).
 */
async function admitLeased(
  ctx: CoreContext,
  route: PricedRoute,
  request: PaymentRequest,
  tokenHash: string | null,
  known: Address | undefined,
  checked: Promise<Error | undefined> | undefined,
  fingerprint: string,
): Promise<CreditAdmission> {
  let owner = known;
  if (!owner) {
    owner = await ctx.ledger.credit.tokenOwner(tokenHash!);
    if (!owner) throw creditTokenInvalid();
    rememberOwner(ctx, tokenHash!, owner);
    checkCaller(request.caller, owner);
  }
  const refusal = await (checked ?? sanctionsRefusal(ctx, owner));
  if (refusal) throw refusal;
  const taken = await ctx.leases.take(owner, route.microUsd);
  if ("short" in taken) {
    // A revoked token is told so, not that its credit is short (one just looked up is live).
    if (tokenHash && known && !(await ctx.ledger.credit.tokenOwner(tokenHash))) throw creditTokenInvalid();
    throw creditInsufficient(route, taken.short);
  }
  const { lease, balance } = taken;
  const id = randomUUID();
  const token = ctx.settings.tokens.find((t) => t.address === lease.token) ?? ctx.settings.tokens[0]!;
  return {
    claim: {
      key: { token: token.address, payer: owner, nonce: `${CREDIT_NONCE_PREFIX}${id}` },
      verified: null,
      waived: false,
      billing: { chargedUnits: route.microUsd, token, payer: owner, waived: false, creditLeft: balance },
      credit: {
        spend: id,
        balance,
        leased: {
          lease,
          spend: {
            id,
            lease: lease.id,
            owner,
            tokenHash,
            route: route.name,
            subject: request.subject ?? null,
            fingerprint,
            amount: route.microUsd,
          },
        },
      },
    },
  };
}

/**
 * The refusal of a sanctioned payer, or none: started early so that it runs beside the ledger's
 * reads, it settles (with the lookup's own error, if it failed) and never rejects unobserved.
 */
async function sanctionsRefusal(ctx: CoreContext, owner: Address): Promise<Error | undefined> {
  try {
    return (await ctx.deps.sanctions?.isListed(owner)) ? sanctionedPayer(owner) : undefined;
  } catch (error) {
    return error as Error;
  }
}

/** Owners remembered per replica: enough for every active token; forgotten all at once past it. */
const MAX_TOKEN_OWNERS = 10_000;
function rememberOwner(ctx: CoreContext, tokenHash: string, owner: Address): void {
  if (ctx.tokenOwners.size >= MAX_TOKEN_OWNERS) ctx.tokenOwners.clear();
  ctx.tokenOwners.set(tokenHash, owner);
}

/**
 * After the handler of a credit claim: its answer stored (the price stays taken), or the price
 * given back. A leased call's spend is recorded before its answer leaves; a token revoked
 * meanwhile, or a hold released or a lease closed under it (its replica stalled past
 * ABANDONED_AFTER_MS), refuses it. A spend whose write failed and that is not found written is
 * refused (the store is down: 503, so that the middleware undoes what the handler did).
 */
export async function concludeCredit(
  ctx: CoreContext,
  credit: NonNullable<Claim["credit"]>,
  answer: StoredAnswer | undefined,
): Promise<{ headers: Record<string, string> } | { refused: PaymentError }> {
  const { spend, balance, leased, tokenHash = null } = credit;
  if (leased) return concludeLeased(ctx, leased, balance, answer);
  if (!answer) {
    await releaseHold(ctx, spend);
    return { headers: {} };
  }
  let outcome: HeldSpendOutcome;
  try {
    outcome = await ctx.ledger.credit.spent(spend, answer, tokenHash);
  } catch (error) {
    // As a leased call's recording (concludeLeased): found, the answer leaves; not found, refused,
    // and the hold given back once the store answers (else the sweep does). A write that landed
    // after all is answered to a retry under the same identifier.
    if (!(await recordedAfterAll(ctx, spend))) {
      void askUntilUndone(() => ctx.ledger.credit.release(spend)).then((asked) => {
        if ("error" in asked)
          log.warn(`[payments] credit hold ${spend} not released (${firstLine(asked.error)}): the sweep will`);
      });
      return unconfirmed(spend, error);
    }
    outcome = "spent";
  }
  if (outcome === "revoked") {
    await releaseHold(ctx, spend);
    return { refused: creditTokenInvalid() };
  }
  // Released under it (held past ABANDONED_AFTER_MS, the sweep gave the price back): not answered.
  if (outcome === "released") return { refused: creditGivenBack() };
  return { headers: creditHeaders(spend, balance) };
}

/** A hold given back now; one the store refuses now is released by the sweep once it is abandoned. */
const releaseHold = (ctx: CoreContext, id: string) => ctx.ledger.credit.release(id).catch(() => undefined);

async function concludeLeased(
  ctx: CoreContext,
  { lease, spend }: LeasedCall,
  balance: bigint,
  answer: StoredAnswer | undefined,
): Promise<{ headers: Record<string, string> } | { refused: PaymentError }> {
  if (!answer) {
    ctx.leases.finish(lease, spend.amount, false);
    return { headers: {} };
  }
  let recorded: Awaited<ReturnType<CoreContext["ledger"]["credit"]["recordSpend"]>>;
  try {
    recorded = await ctx.ledger.credit.recordSpend({ ...spend, answer });
  } catch (error) {
    // The write may have landed with its acknowledgement lost (the connection dropped): a call
    // charged has no identifier to be asked for again, so its answer leaves now. Not known to be
    // recorded: the answer does not leave, and the recording, if it landed, is undone once the
    // store answers again.
    if (!(await recordedAfterAll(ctx, spend.id))) {
      ctx.leases.refusedUnconfirmed(lease, spend.id, spend.amount);
      return unconfirmed(spend.id, error);
    }
    recorded = { outcome: "recorded", wanted: false };
  }
  ctx.leases.recorded(lease, spend.amount, recorded);
  if (recorded.outcome === "revoked") return { refused: creditTokenInvalid() };
  if (recorded.outcome === "closed") return { refused: creditGivenBack() };
  return { headers: creditHeaders(spend.id, balance) };
}

/** How long a call whose spend's write failed asks the ledger whether it landed (the store may be coming back). */
const RECORDED_CHECK_MS = 2_000;

/** Whether a spend whose write failed (a recording, or a hold's spent) is spent all the same, asked until RECORDED_CHECK_MS has passed. */
async function recordedAfterAll(ctx: CoreContext, id: string): Promise<boolean> {
  const asked = await askUntilAnswered(() => ctx.ledger.credit.spendRecorded(id), RECORDED_CHECK_MS, {
    firstPause: POLL_MS,
  });
  return "answer" in asked && asked.answer;
}

/** A call whose spend's write failed and was not found written: refused as the ledger being down (nothing known taken). */
function unconfirmed(id: string, error: unknown): { refused: PaymentError } {
  log.error(
    `[payments] credit spend ${id}: its write failed and could not be confirmed (${firstLine(error)}): refused`,
  );
  return { refused: ledgerDown() };
}

/** What a credit-paid answer says of its payment: the spend's ledger reference and the balance left (micro-USD). */
const creditHeaders = (spend: string, balance: bigint): Record<string, string> => ({
  "Credit-Spend": spend,
  "Credit-Balance": balance.toString(),
  "Access-Control-Expose-Headers": "Credit-Spend, Credit-Balance",
});

/** The answer a credit spend bought, again: same body, same status, charged once. */
const creditReplay = (row: CreditSpendRow): Reply => ({
  status: row.responseStatus ?? 200,
  headers: {
    "content-type": row.responseType ?? "application/json",
    "x-payment-replayed": "true",
    "Credit-Spend": row.id,
  },
  body: row.responseBody ?? "",
});

/** Another copy of this request holds the same Payment-Identifier: wait until it is spent or released (or abandoned). */
async function waitWhileHeld(ctx: CoreContext, owner: Address, paymentId: string): Promise<void> {
  const deadline = Date.now() + HELD_WAIT_MS;
  while (Date.now() < deadline) {
    await sleep(POLL_MS);
    const row = await ctx.ledger.credit.find(owner, paymentId);
    if (row?.status !== "held") return;
    if (Date.now() - row.updatedAt.getTime() > ABANDONED_AFTER_MS) {
      await releaseAbandonedHolds(ctx);
      return;
    }
  }
  throw settlementPending();
}

/** How an abandoned hold's call is told to what undoes it: its payment failed, as far as the ledger knows. */
const ABANDONED_HOLD: Resolution = {
  status: "failed",
  failure: "paid from credit, its request died before the answer left: the price went back to the credit",
};

/**
 * Gives back the holds of requests that died (older than ABANDONED_AFTER_MS). One that names what
 * its call made outside the ledger (a passport) is released only once the route's undo
 * (PaymentDeps.onOutcome) has run: if it fails, the hold stays for the next sweep, the price still
 * taken, so that the undo is never lost. How many holds went back.
 */
export async function releaseAbandonedHolds(ctx: CoreContext): Promise<number> {
  let released = 0;
  for (const spend of await ctx.ledger.credit.abandonedReferenced()) {
    try {
      await ctx.deps.onOutcome?.(
        { route: spend.route, responseBody: null, reference: spend.reference },
        ABANDONED_HOLD,
      );
    } catch (error) {
      log.warn(
        `[payments] credit hold ${spend.id}: undoing ${spend.reference} failed, left to the next sweep (${firstLine(error)})`,
      );
      continue;
    }
    await ctx.ledger.credit.release(spend.id);
    released++;
  }
  return released + (await ctx.ledger.credit.releaseAbandoned());
}
