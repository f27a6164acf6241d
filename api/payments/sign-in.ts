import {
  createSIWxResourceServerExtension,
  declareSIWxExtension,
  InMemorySIWxStorage,
  parseSIWxHeader,
  SIGN_IN_WITH_X,
  type SIWxPayload,
  validateSIWxMessage,
  verifySIWxSignature,
} from "@x402/extensions/sign-in-with-x";
import { type Address, addressSchema } from "../../config/addresses.ts";
import { readEnv } from "../../config/env.ts";
import { resolveSignInOrigin } from "../../config/sign-in.ts";
import { firstLine } from "../../shared/async.ts";
import { errorBody } from "../../shared/errors.ts";
import { tokenBuckets } from "../../shared/token-buckets.ts";
import { type Billing, freeBilling } from "./billing.ts";
import type { PaymentCore, PricedRoute, Reply } from "./core.ts";
import { paidRecently } from "./free-read.ts";
import type { PaymentHeaders } from "./header.ts";
import { paymentRequiredAnswer, requirementsFor, withExtensions } from "./requirements.ts";

/**
 * Sign-in-with-x (`@x402/extensions`, CAIP-122 / SIWE): a returning payer proves its wallet with
 * a signed message instead of a payment. Framework-free; the Hono adapter (api/http/payment.ts) asks
 * `admit` before the payment core. What a proof grants, by route declaration:
 *   - the free signal read, to the wallet that paid for an analysis of that wallet recently;
 *   - the analysis of the signed-in wallet itself, limited per wallet.
 * Nothing is charged or settled on a grant; a refused proof is never charged either.
 */

/** The request header carrying the proof: base64 JSON of the signed CAIP-122 message's fields. */
export const SIGN_IN_HEADER = "SIGN-IN-WITH-X";

/** What a sign-in can make free on a route (from its declaration). */
export type SignInGrants = { freeRead: boolean; ownWallet: boolean };

/** A priced route as the adapter sees it: the core's, plus what a sign-in grants there. */
export type SignInRoute = PricedRoute & { signIn?: SignInGrants };

/**
 * Refusals of a sign-in (402: the answer carries a fresh challenge and the payment requirements,
 * so the client can sign again or pay). Neither touches a payment sent with it.
 */
export const SIGN_IN_ERRORS = {
  /** The proof is malformed, badly signed, expired, for another domain, URI or chain, or its nonce was used. */
  sign_in_invalid: 402,
  /** A valid proof that grants nothing here (another wallet, no recent paid analysis) and no payment was sent. */
  sign_in_not_entitled: 402,
} as const;
export type SignInErrorCode = keyof typeof SIGN_IN_ERRORS;

/** A proof is accepted this long after its issuedAt (the package's default); its nonce is remembered as long. */
export const SIGN_IN_MAX_AGE_MS = 5 * 60_000;

const STATEMENT = "Sign in with your wallet: no payment is taken.";

/** The rule of a route's grants, in one sentence: the OpenAPI `x-sign-in` and GET /api/x402/config carry it. */
export function signInRule(grants: SignInGrants): string {
  const what = [
    grants.freeRead ? "the free read of freeWhen with no payment header" : undefined,
    grants.ownWallet
      ? "this call about your own wallet free (a limited number an hour per wallet, then 429 rate_limited)"
      : undefined,
  ].filter(Boolean);
  return `Send ${SIGN_IN_HEADER} (the sign-in-with-x challenge of the 402 answer, signed by your wallet) instead of a payment to get ${what.join(", and ")}.`;
}

export type SignInSettings = {
  /** The public origin clients sign in to (config/sign-in.ts): proofs for any other are refused. */
  origin: string;
  ownAnalysesPerHour: number;
};

const signInSettings = (env = readEnv()): SignInSettings => ({
  origin: resolveSignInOrigin(env),
  ownAnalysesPerHour: env.SIGN_IN_OWN_ANALYSES_PER_HOUR,
});

export type SignInRequest = {
  /** The SIGN-IN-WITH-X header, if sent. */
  header?: string;
  url: string;
  subject?: Address;
  caller?: Address;
  /** The payment headers: when a proof grants nothing and a payment came too, the payment is used as usual. */
  headers: PaymentHeaders;
};

/**
 * `pass`: no sign-in applies, go on with the payment. `billing`: run the handler, nothing charged.
 * `credit`: a signed-in wallet with prepaid credit, nothing free here: pay from its credit. `reply`: the answer.
 */
export type SignInOutcome = { pass: true } | { billing: Billing } | { credit: Address } | { reply: Reply };

type Proof = { wallet: Address; nonce: string; issuedAt: string } | { refused: { reason: string; message: string } };

export class SignIn {
  /** Nonces this process granted (a cache of the store's record, which holds for every replica), until their proof is too old anyway. */
  private readonly spent = new Map<string, number>();
  private readonly analyses: ReturnType<typeof tokenBuckets>;

  constructor(
    private readonly core: Pick<PaymentCore, "settings" | "ledger">,
    readonly settings: SignInSettings,
    private readonly now: () => number = Date.now,
  ) {
    this.analyses = tokenBuckets(settings.ownAnalysesPerHour, 3_600_000, now);
  }

  /** Before the payment core: what a SIGN-IN-WITH-X header does for this request. */
  async admit(route: SignInRoute, request: SignInRequest): Promise<SignInOutcome> {
    const paying = request.headers.xPayment !== undefined || request.headers.paymentSignature !== undefined;
    // Where sign-in grants nothing free, it only pays from credit: a payment sent with it is used as sent.
    if (request.header === undefined || (!route.signIn && (paying || route.buysCredit))) return { pass: true };
    const proof = await this.prove(request.header);
    if ("refused" in proof) {
      return {
        reply: await this.refusal(
          route,
          request.url,
          "sign_in_invalid",
          `The sign-in was refused (${proof.refused.message}); nothing was charged. Sign the challenge of this answer again, or pay.`,
          { reason: proof.refused.reason },
        ),
      };
    }
    const { wallet } = proof;
    const grant = route.signIn ? await this.grantFor(route, wallet, request) : undefined;
    if (!grant) {
      if (paying) return { pass: true };
      // Nothing free here, but the wallet has prepaid credit: the call is paid from it (one use per proof).
      if (!route.buysCredit && (await this.core.ledger.credit.balance(wallet)) > 0n) {
        if (!(await this.spend(proof.nonce, wallet, proof.issuedAt)))
          return { reply: await this.reused(route, request.url) };
        return { credit: wallet };
      }
      const message = `Signed in as ${wallet}, which gets nothing free here (${request.subject ? `about ${request.subject}` : "this call"}); nothing was charged. Pay for this call.`;
      return {
        reply: await this.refusal(route, request.url, "sign_in_not_entitled", message, {
          wallet,
          subject: request.subject ?? null,
        }),
      };
    }
    if (grant === "own-wallet") {
      const retryAfter = this.analyses.take(wallet);
      if (retryAfter > 0) return paying ? { pass: true } : { reply: this.rateLimited(retryAfter) };
    }
    // One use per proof, on every replica: the service store records the nonce it granted.
    if (!(await this.spend(proof.nonce, wallet, proof.issuedAt)))
      return { reply: await this.reused(route, request.url) };
    return { billing: freeBilling(this.core.settings.tokens, wallet) };
  }

  /**
   * The wallet a proof signs in, its nonce spent (one use, every replica): for routes that are free
   * but answer only their owner (declareRoute's `owner`). No grant is looked up.
   */
  async authenticate(header: string): Promise<{ wallet: Address } | Extract<Proof, { refused: unknown }>> {
    const proof = await this.prove(header);
    if ("refused" in proof) return proof;
    if (!(await this.spend(proof.nonce, proof.wallet, proof.issuedAt)))
      return { refused: { reason: "invalid_siwx_nonce", message: "this sign-in was already used" } };
    return { wallet: proof.wallet };
  }

  /** A 402 of a route where sign-in applies, with a fresh challenge in `extensions` (body and PAYMENT-REQUIRED). */
  async advertise(route: SignInRoute, url: string, reply: Reply): Promise<Reply> {
    if (!route.signIn || reply.status !== 402) return reply;
    return withExtensions(reply, await this.challenge(route, url));
  }

  /** The `extensions` entry of a 402: the package's own challenge (fresh nonce and issuedAt) for this resource, rebased on our origin. */
  async challenge(route: SignInRoute, url: string): Promise<Record<string, unknown>> {
    // The storage is the package's record of payers for its own request hook, unused here (the ledger is ours).
    const server = createSIWxResourceServerExtension({
      storage: new InMemorySIWxStorage(),
      origin: this.settings.origin,
    });
    const declaration = declareSIWxExtension({
      statement: STATEMENT,
      network: this.core.settings.network,
      expirationSeconds: SIGN_IN_MAX_AGE_MS / 1000,
    })[SIGN_IN_WITH_X];
    const accepts = requirementsFor(this.core.settings, route);
    const resource = { url, description: route.description, mimeType: "application/json" };
    const info = await server.enrichPaymentRequiredResponse!(declaration, {
      requirements: accepts,
      resourceInfo: resource,
      paymentRequiredResponse: { x402Version: 2, resource, accepts },
    });
    return { [SIGN_IN_WITH_X]: info };
  }

  /** The signed-in wallet, or why not: the package parses, validates (domain, URI, time, nonce) and verifies. */
  private async prove(header: string): Promise<Proof> {
    const refused = (reason: string, message: string) => ({ refused: { reason, message } });
    let payload: SIWxPayload;
    try {
      payload = parseSIWxHeader(header);
    } catch (error) {
      return refused("invalid_siwx_header", (error as Error).message);
    }
    const validation = await validateSIWxMessage(payload, new URL(this.settings.origin), {
      maxAge: SIGN_IN_MAX_AGE_MS,
      checkNonce: (nonce) => !this.isSpent(nonce),
    });
    if (!validation.isValid) return refused(validation.invalidReason, validation.invalidMessage);
    // The package checks the chain's format, not which chain: ours is the one the service is paid on.
    if (payload.chainId !== this.core.settings.network)
      return refused(
        "invalid_siwx_unsupported_chain",
        `signed for ${payload.chainId}, not ${this.core.settings.network}`,
      );
    let verified: Awaited<ReturnType<typeof verifySIWxSignature>>;
    try {
      // EOA (EIP-191) signatures, recovered locally: no RPC on this path. Contract wallets pay as usual.
      verified = await verifySIWxSignature(payload);
    } catch (error) {
      // The SIWE message could not even be built from these fields (e.g. an address that is not EIP-55).
      return refused("invalid_siwx_signature", firstLine(error));
    }
    if (!verified.isValid) return refused(verified.invalidReason, verified.invalidMessage);
    const wallet = addressSchema.safeParse(verified.payer);
    if (!wallet.success) return refused("invalid_siwx_signature", "the signer is not an EVM address");
    return { wallet: wallet.data, nonce: payload.nonce, issuedAt: payload.issuedAt };
  }

  private async grantFor(
    route: SignInRoute,
    wallet: Address,
    { subject, caller }: SignInRequest,
  ): Promise<"own-wallet" | "free-read" | undefined> {
    // callerAddress names the paying wallet; signed in, that is the signed-in one.
    if (subject === undefined || (caller !== undefined && caller.toLowerCase() !== wallet)) return undefined;
    if (route.signIn?.ownWallet && subject.toLowerCase() === wallet) return "own-wallet";
    if (route.signIn?.freeRead && (await paidRecently(this.core.ledger, route, wallet, subject, this.now())))
      return "free-read";
    return undefined;
  }

  private isSpent(nonce: string): boolean {
    return (this.spent.get(nonce) ?? 0) > this.now();
  }

  private async spend(nonce: string, wallet: Address, issuedAt: string): Promise<boolean> {
    const now = this.now();
    // Past issuedAt + max age the proof is refused as too old: the nonce need not be kept longer.
    const until = Math.max(Date.parse(issuedAt) || 0, now) + SIGN_IN_MAX_AGE_MS + 1000;
    if (this.isSpent(nonce) || !(await this.core.ledger.spendSignInNonce(nonce, wallet, new Date(until)))) return false;
    this.spent.set(nonce, until);
    if (this.spent.size > 10_000) for (const [n, t] of this.spent) if (t <= now) this.spent.delete(n);
    return true;
  }

  private reused(route: SignInRoute, url: string): Promise<Reply> {
    return this.refusal(
      route,
      url,
      "sign_in_invalid",
      "This sign-in was already used; nothing was charged. Sign a new challenge.",
      { reason: "invalid_siwx_nonce" },
    );
  }

  private async refusal(
    route: SignInRoute,
    url: string,
    code: SignInErrorCode,
    message: string,
    details: unknown,
  ): Promise<Reply> {
    const answer = paymentRequiredAnswer(this.core.settings, route, url, { code, message, details });
    return this.advertise(route, url, {
      status: SIGN_IN_ERRORS[code],
      headers: { "content-type": "application/json", ...answer.headers },
      body: JSON.stringify(answer.body),
    });
  }

  private rateLimited(retryAfter: number): Reply {
    const limit = this.settings.ownAnalysesPerHour;
    const body = errorBody(
      "rate_limited",
      `At most ${limit} free analyses of your own wallet an hour: retry in ${retryAfter} s, or pay for this call.`,
      { limitPerHour: limit, retryAfterSeconds: retryAfter },
    );
    return {
      status: 429,
      headers: { "content-type": "application/json", "Retry-After": String(retryAfter) },
      body: JSON.stringify(body),
    };
  }
}

const instances = new WeakMap<object, SignIn>();

/** The sign-in of this payment core (one per process and core: its nonces and per-wallet limits), from the environment. */
export function signInFor(core: Pick<PaymentCore, "settings" | "ledger">): SignIn {
  let signIn = instances.get(core);
  if (!signIn) instances.set(core, (signIn = new SignIn(core, signInSettings())));
  return signIn;
}
