import type { Context, MiddlewareHandler } from "hono";
import type { Address } from "../../config/addresses.ts";
import type { AppEnv } from "../http/env.ts";
import type { Claim, PaymentCore, PricedRoute, Reply } from "./core.ts";
import { log } from "../http/log.ts";

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
};

/** Body routes name `walletAddress` (and the paying `callerAddress`); wallet routes take `address` from the path. */
export const walletRequest: PaymentHooks = {
  subject: (input) => (input.walletAddress ?? input.address) as Address | undefined,
  caller: (input) => input.callerAddress as Address | undefined,
};

/** The request as validated by the route's schemas: path, query and body together. */
export function validatedInput(c: Context): Record<string, unknown> {
  return Object.assign({}, ...(["param", "query", "json"] as const).map((target) => c.req.valid(target as never)));
}

const send = (c: Context, reply: Reply) => c.body(reply.body, reply.status as 200, reply.headers);

/**
 * The Hono adapter over the payment core (api/payments/core.ts), put after validation: it reads
 * the validated request, leaves `billing` for the handler, and settles once the handler answered.
 */
export function payment(route: PricedRoute, hooks: PaymentHooks = walletRequest): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const core = c.var.payments;
    const input = validatedInput(c);
    const request = {
      headers: { xPayment: c.req.header("x-payment"), paymentSignature: c.req.header("payment-signature") },
      url: c.req.url,
      path: c.req.path,
      input,
      subject: hooks.subject(input),
      caller: hooks.caller(input),
    };
    const admitted = await core.admit(route, request);
    if ("reply" in admitted) return send(c, admitted.reply);
    const { claim } = admitted;
    c.set("billing", claim.billing);
    try {
      await next();
    } catch (error) {
      await core.conclude(route, request, claim, { failed: `handler failed (${(error as Error).message.split("\n")[0]})` });
      throw error;
    }
    if (c.error || c.res.status >= 400) {
      await core.conclude(route, request, claim, { failed: `handler answered ${c.res.status}` });
      return;
    }
    const answer = { status: c.res.status, type: c.res.headers.get("content-type") ?? "application/json", body: await c.res.clone().text() };
    const concluded = await core.conclude(route, request, claim, { answer });
    if ("reply" in concluded) {
      await hooks.onSettlementFailed?.(c, { reply: concluded.reply, claim, core }).catch((error: Error) => log.error(`[payments] ${route.name}: undoing an unpaid answer failed: ${error.message}`));
      c.res = send(c, concluded.reply);
    }
    else for (const [name, value] of Object.entries(concluded.headers)) c.res.headers.set(name, value);
  };
}
