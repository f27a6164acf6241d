import type { MiddlewareHandler } from "hono";
import { errorBody } from "../../shared/errors.ts";
import { SIGN_IN_HEADER, type SignInRoute, signInFor } from "../payments/sign-in.ts";
import type { AppEnv } from "./app-env.ts";

/**
 * Refusals of an owner route (free, but it answers only the wallet that owns what it names): 401,
 * with a fresh sign-in-with-x challenge in `extensions`, the same the 402s of paid routes carry.
 */
export const OWNER_SIGN_IN_ERRORS = {
  /** No SIGN-IN-WITH-X header. */
  sign_in_required: 401,
  /** The proof is malformed, badly signed, expired, for another origin or chain, or its nonce was used. */
  sign_in_invalid: 401,
} as const;

/** What the OpenAPI `x-sign-in` and the x402 config say of an owner route. */
export const ownerSignInRule = `Send ${SIGN_IN_HEADER} (a sign-in-with-x challenge, signed by your wallet; each proof is used once): this free call answers about what that wallet owns. Without it: 401 sign_in_required with a challenge to sign.`;

/** Before an owner route's handler: the signed-in wallet in `c.var.owner`, or a 401 with a challenge. */
export function ownerSignIn(route: SignInRoute): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const signIn = signInFor(c.var.payments);
    const refuse = async (code: keyof typeof OWNER_SIGN_IN_ERRORS, message: string, details?: unknown) =>
      c.json(
        { ...errorBody(code, message, details), extensions: await signIn.challenge(route, c.req.url) },
        OWNER_SIGN_IN_ERRORS[code],
      );
    const header = c.req.header(SIGN_IN_HEADER);
    if (header === undefined)
      return refuse(
        "sign_in_required",
        `Sign in: send ${SIGN_IN_HEADER} with the challenge of this answer signed by the wallet that owns what you ask for. Nothing is charged.`,
      );
    const proven = await signIn.authenticate(header);
    if ("refused" in proven)
      return refuse("sign_in_invalid", `The sign-in was refused (${proven.refused.message}). Sign a new challenge.`, {
        reason: proven.refused.reason,
      });
    c.set("owner", proven.wallet);
    await next();
  };
}
