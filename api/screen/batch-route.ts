import type { RouteHandler } from "@hono/zod-openapi";
import type { Context, MiddlewareHandler } from "hono";
import type { Address } from "../../config/addresses.ts";
import { ApiError } from "../../shared/errors.ts";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute, jsonBody } from "../http/declare.ts";
import { validatedInput, walletRead } from "../http/payment.ts";
import { x402Billing } from "../payments/billing.ts";
import { PRICES, priceInUnits } from "../payments/prices.ts";
import { type ScreenBatchResult, screenBatchRequestSchema, screenBatchResultSchema } from "./batch-schema.ts";
import { type ScreenDeps, screenWallets } from "./screen.ts";

/**
 * The one rule for which wallets of a batch get a result, and so are paid for: the single screen's
 * (in tracked mode, a wallet outside the tracked set has no answer). Static configuration, so the
 * count priced before the 402 is the count answered.
 */
const answerable = (c: Context<AppEnv>, wallets: readonly Address[]) =>
  wallets.filter((w) => c.var.assessor.isIndexed(w));

const walletsOf = (c: Context<AppEnv>) => validatedInput(c).wallets as Address[];

/** Before payment: a batch with nothing to answer is a 404, as the single screen's untracked wallet is. */
const someIndexed: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (answerable(c, walletsOf(c)).length === 0)
    throw new ApiError(
      404,
      "wallet_not_indexed",
      "This service indexes tracked wallets only, and none of these wallets is one of them.",
    );
  await next();
};

export const screenBatchRoute = declareRoute("screenBatch", {
  method: "post",
  path: "/api/lender/screen/batch",
  tags: ["Lender"],
  summary: "Screen up to 100 borrowers' wallets for one payment",
  description:
    "One LenderScreenResult per wallet, in request order, each the single screen's answer. The price is per wallet answered: " +
    "a wallet this service cannot answer (in tracked mode, one outside the tracked set) gets a per-wallet error and is not charged, " +
    "and the 402 names the exact amount for this request. A bad or repeated address, or 0 or more than 100 wallets, is a 400 for the " +
    "whole request before any payment; a batch with no wallet to answer is a 404.",
  request: {
    body: jsonBody(screenBatchRequestSchema, "The borrowers' wallets, and the paying lender's when it differs"),
  },
  ok: screenBatchResultSchema,
  errors: { 404: ["wallet_not_indexed"] },
  middleware: [someIndexed],
  payment: {
    ...walletRead,
    units: { name: "wallet", count: (input, c) => answerable(c, input.wallets as Address[]).length },
  },
});

/** The batch: the answerable wallets through the single screen's own code (all at once), in request order. */
export function screenBatchHandler(deps: ScreenDeps): RouteHandler<typeof screenBatchRoute, AppEnv> {
  return async (c) => {
    const { wallets } = c.req.valid("json");
    const answered = answerable(c, wallets);
    // Each result bills its own share: one unit of the per-wallet price (none on a waived call).
    const share = c.var.billing.then((billing) => ({
      ...billing,
      chargedUnits: billing.waived ? 0n : priceInUnits(PRICES.screenBatch, billing.token.decimals),
    }));
    const screened = await screenWallets(deps, answered, { baseUrl: new URL(c.req.url).origin, billing: share });
    const byWallet = new Map(answered.map((w, i) => [w, screened[i]!]));
    const results = wallets.map(
      (wallet) =>
        byWallet.get(wallet) ?? {
          walletAddress: wallet,
          error: {
            code: "wallet_not_indexed" as const,
            message: `This service indexes tracked wallets only, and ${wallet} is not one of them; not charged.`,
          },
        },
    );
    const failed = wallets.length - answered.length;
    const body: ScreenBatchResult = {
      status: "completed",
      results,
      answered: answered.length,
      failed,
      x402Billing: x402Billing(await c.var.billing),
    };
    // Each result was parsed by the single screen's schema already; the list is typed against the batch's.
    return c.json(body, 200);
  };
}
