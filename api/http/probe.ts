import type { MiddlewareHandler } from "hono";
import { paymentRequired } from "../payments/core/refusals.ts";
import type { Reply } from "../payments/priced-route.ts";
import { SIGN_IN_HEADER, type SignInRoute, signInFor } from "../payments/sign-in.ts";
import type { AppEnv } from "./app-env.ts";

/** Request headers that carry a way to pay for (or to be let into) a paid call. */
const CREDENTIALS = ["x-payment", "payment-signature", SIGN_IN_HEADER, "authorization"] as const;

/**
 * The x402 crawlers' probe: a paid route called with nothing to pay with and no body gets its 402,
 * discovery metadata included, before its request is validated (not a 400 for the missing body).
 * A request that carries a payment, or a body, is validated first as always: bad input is a 400 and
 * nothing is charged.
 */
export function unpaidProbe(
  route: SignInRoute,
  advertise: (reply: Reply, path: string) => Reply,
): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (CREDENTIALS.some((name) => c.req.header(name))) return next();
    // Read through Hono's body cache, which validation reads from next (and under the body limit).
    if ((await c.req.text()).length > 0) return next();
    const core = c.var.payments;
    const refusal = core.refusal(route, c.req.url, paymentRequired(route));
    const reply = advertise(await signInFor(core).advertise(route, c.req.url, refusal), c.req.path);
    return c.body(reply.body, reply.status as 402, reply.headers);
  };
}
