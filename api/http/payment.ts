import type { Context, MiddlewareHandler } from "hono";
import type { Address } from "../../config/addresses.ts";
import { firstLine } from "../../shared/async.ts";
import { ApiError } from "../../shared/errors.ts";
import { log } from "../../shared/log.ts";
import type { Billing } from "../payments/billing.ts";
import type { Claim, CreditAdmission, CreditPayer, PaymentCore, Reply } from "../payments/core.ts";
import { creditTokenOf } from "../payments/credit-token.ts";
import type { PaymentHeaders } from "../payments/header.ts";
import type { StoredAnswer } from "../payments/ledger/ledger.ts";
import { SIGN_IN_HEADER, type SignInOutcome, type SignInRoute, signInFor } from "../payments/sign-in.ts";
import type { AppEnv } from "./app-env.ts";

/** What varies by route: which wallet a payment is about, and which wallet must be paying. */
export type PaymentHooks = {
  subject: (input: Record<string, unknown>) => Address | undefined;
  caller: (input: Record<string, unknown>) => Address | undefined;
  /**
   * The handler answered but its payment was not settled (conclude returned a refusal, which is
   * the answer): undo what the handler did that must not stand unpaid (the report route revokes
   * the passport it published). Runs before the refusal is sent.
   */
  onSettlementFailed?: (c: Context, failure: { reply: Reply; claim: Claim; core: PaymentCore }) => Promise<void>;
  /** Settled before the answer even when X402_SETTLEMENT=deferred (what the handler does cannot be given on credit). */
  settleFirst?: boolean;
  /** The purchase of prepaid credit: paid with x402 only, never from credit. */
  buysCredit?: boolean;
  /**
   * The handler only reads (it writes nothing, and has no effect but its answer): a credit payer's
   * call may start it while the price is being taken. It awaits `billing` after its reads.
   */
  readOnly?: boolean;
  /**
   * A route priced per unit (the batch screen: per wallet answered): the declared price is the
   * unit's, and this request costs `count` of them. Counted after validation, before the 402.
   */
  units?: { name: string; count: (input: Record<string, unknown>, c: Context<AppEnv>) => number };
};

/** Body routes name `walletAddress` (and the paying `callerAddress`); wallet routes take `address` from the path. */
export const walletRequest: PaymentHooks = {
  subject: (input) => (input.walletAddress ?? input.address) as Address | undefined,
  caller: (input) => input.callerAddress as Address | undefined,
};

/** walletRequest on a route whose handler only reads: the screens, the analyses, the signals and the history. */
export const walletRead: PaymentHooks = { ...walletRequest, readOnly: true };

/** The request as validated by the route's schemas: path, query and body together. */
export function validatedInput(c: Context): Record<string, unknown> {
  return Object.assign({}, ...(["param", "query", "json"] as const).map((target) => c.req.valid(target as never)));
}

/** The idempotency key of a call paid from credit (an x402 payment-identifier, which a payment carries inside itself). */
export const PAYMENT_ID_HEADER = "Payment-Identifier";

/**
 * Who pays from prepaid credit, if the call is paid that way: a signed-in wallet with credit, or
 * the bearer of a credit token. A payment sent with either is used instead (it is the explicit one).
 */
function creditPayer(
  route: SignInRoute,
  headers: PaymentHeaders,
  signedIn: SignInOutcome,
  authorization: string | undefined,
): CreditPayer | undefined {
  if (route.buysCredit || headers.xPayment !== undefined || headers.paymentSignature !== undefined) return undefined;
  if ("credit" in signedIn) return { wallet: signedIn.credit };
  const token = creditTokenOf(authorization);
  return token === undefined ? undefined : { token };
}

const send = (c: Context, reply: Reply) => c.body(reply.body, reply.status as 200, reply.headers);

/**
 * The Hono adapter over the payment core (api/payments/core.ts), put after validation: it reads
 * the validated request, leaves `billing` for the handler, and settles once the handler answered.
 * On a read-only route, a credit payer this process has seen pay before gets the handler started
 * while its price is taken (the hold's round trip overlaps the handler's reads): the handler awaits
 * `billing` before it renders, and a refused price is answered instead of whatever it made.
 */
export function payment(
  declared: SignInRoute,
  hooks: PaymentHooks = walletRequest,
  advertise: (reply: Reply, path: string) => Reply = (reply) => reply,
): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const started = performance.now();
    const core = c.var.payments;
    const input = validatedInput(c);
    // This request's price: the 402 names it, and an authorization for less is refused.
    const route = hooks.units
      ? { ...declared, microUsd: declared.microUsd * BigInt(hooks.units.count(input, c)) }
      : declared;
    const request = {
      headers: {
        xPayment: c.req.header("x-payment"),
        paymentSignature: c.req.header("payment-signature"),
        paymentId: c.req.header(PAYMENT_ID_HEADER),
      },
      url: c.req.url,
      path: c.req.path,
      input,
      subject: hooks.subject(input),
      caller: hooks.caller(input),
    };
    // A sign-in that qualifies runs the handler with nothing charged and nothing to settle.
    const signIn = signInFor(core);
    const signedIn = await signIn.admit(route, { ...request, header: c.req.header(SIGN_IN_HEADER) });
    if ("reply" in signedIn) return send(c, signedIn.reply);
    if ("billing" in signedIn) {
      c.set("billing", Promise.resolve(signedIn.billing));
      return next();
    }
    // Set, not only returned: an early handler's answer is already in place, and this replaces it.
    const refuse = async (reply: Reply) => {
      c.res = send(c, advertise(await signIn.advertise(route, request.url, reply), request.path));
      return c.res;
    };
    const credit = creditPayer(route, request.headers, signedIn, c.req.header("authorization"));
    let admittedAt = 0;
    const admission = (credit ? core.admitCredit(route, request, credit) : core.admit(route, request)).then(
      (admitted) => {
        admittedAt = performance.now();
        return admitted;
      },
    );
    // Only a payer already seen (never a made-up token: the handler's reads are not given away),
    // and not a retry (its answer may be stored): see the function's comment.
    const early =
      hooks.readOnly === true &&
      credit !== undefined &&
      request.headers.paymentId === undefined &&
      core.knowsCreditPayer(credit);
    let failed: unknown;
    if (early) {
      const billing = admission.then(billingOf);
      billing.catch(() => {}); // a handler that failed before awaiting it leaves the refusal unobserved
      c.set("billing", billing);
      try {
        await next();
      } catch (error) {
        failed = error;
      }
    }
    const admitted = await admission;
    if ("reply" in admitted) return refuse(admitted.reply);
    if ("free" in admitted) {
      if (early) {
        if (failed !== undefined) throw failed;
        return;
      }
      c.set("billing", Promise.resolve(admitted.free));
      return next();
    }
    const { claim } = admitted;
    c.set("claim", claim);
    if (!early) {
      c.set("billing", Promise.resolve(claim.billing));
      try {
        await next();
      } catch (error) {
        failed = error;
      }
    }
    if (failed !== undefined) {
      await core.conclude(route, request, claim, { failed: `handler failed (${firstLine(failed)})` });
      throw failed;
    }
    if (c.error || c.res.status >= 400) {
      await core.conclude(route, request, claim, { failed: `handler answered ${c.res.status}` });
      return;
    }
    const answer = await takeAnswer(c);
    const answeredAt = performance.now();
    const concluded = await core.conclude(route, request, claim, { answer });
    if ("reply" in concluded) {
      await hooks
        .onSettlementFailed?.(c, { reply: concluded.reply, claim, core })
        .catch((error: Error) =>
          log.error(`[payments] ${route.name}: undoing an unpaid answer failed: ${error.message}`),
        );
      c.res = send(c, concluded.reply);
    } else for (const [name, value] of Object.entries(concluded.headers)) c.res.headers.set(name, value);
    c.res.headers.append(
      "Server-Timing",
      serverTiming({
        payment: admittedAt - started,
        // From the claim, or (a read-only route's early start) from the start: the two overlap.
        handler: answeredAt - (early ? started : admittedAt),
        settlement: performance.now() - answeredAt,
      }),
    );
  };
}

const utf8 = new TextDecoder();

/**
 * The handler's answer, as the ledger keeps it. Its bytes are read once and the response made again
 * from them: a clone would tee the body's stream (about 0.15 ms a call), and the server would then
 * stream it rather than write the bytes it holds.
 */
async function takeAnswer(c: Context<AppEnv>): Promise<StoredAnswer> {
  const { status, headers } = c.res;
  const bytes = new Uint8Array(await c.res.arrayBuffer());
  // Unset first: Hono rebuilds a response set over another from its body stream.
  c.res = undefined;
  c.res = new Response(bytes, { status, headers });
  return { status, type: headers.get("content-type") ?? "application/json", body: utf8.decode(bytes) };
}

/** The handler's billing from an admission; a refusal stops an early handler (the refusal is answered instead). */
function billingOf(admitted: CreditAdmission): Billing {
  if ("claim" in admitted) return admitted.claim.billing;
  if ("free" in admitted) return admitted.free;
  throw new PriceRefused();
}

/** What an early handler's `await c.var.billing` throws when the price was refused: never answered itself. */
class PriceRefused extends ApiError {
  constructor() {
    super(402, "payment_required", "The price of this call was refused.");
  }
}

/**
 * Where a paid call's time went, for the caller and the operator (Server-Timing): verifying and
 * claiming the payment, the handler, and settling (or queueing) it.
 */
const serverTiming = (phases: Record<string, number>) =>
  Object.entries(phases)
    .map(([name, ms]) => `${name};dur=${ms.toFixed(2)}`)
    .join(", ");
