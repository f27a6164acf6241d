import type { RouteHandler } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import { parseUnits } from "viem";
import { ApiError } from "../../shared/errors.ts";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute, jsonBody } from "../http/declare.ts";
import { validatedInput } from "../http/payment.ts";
import { exactUsd } from "../money.ts";
import { x402Billing } from "../payments/billing.ts";
import { CREDIT_LIFETIME_MS } from "../payments/credit-lifecycle.ts";
import { CREDIT_LIFETIME_DAYS, CREDIT_MIN_MICRO_USD } from "../payments/credit-offer.ts";
import { hashCreditToken, mintCreditToken } from "../payments/credit-token.ts";
import { type CreditLot, keyId } from "../payments/ledger/ledger.ts";
import { PRICES } from "../payments/prices.ts";
import {
  creditStatementSchema,
  purchaseRequestSchema,
  purchaseResultSchema,
  tokenIssuedSchema,
  tokensRevokedSchema,
} from "./schema.ts";

const TAGS = ["Credit"];
const RECENT = 50;

const microUsdOf = (input: Record<string, unknown>) => parseUnits(String(input.amount), 6);

/** Before payment: an amount outside 0.10 .. CREDIT_MAX_USD is a 400, nothing charged. */
const checkAmount: MiddlewareHandler<AppEnv> = async (c, next) => {
  const amount = microUsdOf(validatedInput(c));
  const max = c.var.payments.settings.creditMaxMicroUsd;
  if (amount < CREDIT_MIN_MICRO_USD || amount > max)
    throw new ApiError(
      400,
      "credit_amount_out_of_range",
      `Buy between ${exactUsd(CREDIT_MIN_MICRO_USD)} and ${exactUsd(max)} USD of credit at once. Nothing was charged.`,
      { minimumUsd: exactUsd(CREDIT_MIN_MICRO_USD), maximumUsd: exactUsd(max) },
    );
  await next();
};

export const purchaseRoute = declareRoute("credit", {
  method: "post",
  path: "/api/credit",
  tags: TAGS,
  summary: "Buy prepaid credit with one payment",
  description:
    `One x402 payment of \`amount\` (0.10 to CREDIT_MAX_USD, default 50.00; the 402 names this request's price), settled on chain before the credit exists. ` +
    "Then every other paid route can be paid from the credit instead of a payment each: send `Authorization: Bearer <creditToken>`, or SIGN-IN-WITH-X signed by the paying wallet. " +
    `Credit is spendable for ${CREDIT_LIFETIME_DAYS} days after its purchase; unused credit is not refunded. This route itself is paid with x402 only.`,
  request: { body: jsonBody(purchaseRequestSchema, "How much credit to buy") },
  ok: purchaseResultSchema,
  errors: { 400: ["credit_amount_out_of_range"] },
  middleware: [checkAmount],
  payment: {
    subject: () => undefined,
    caller: () => undefined,
    units: { name: "cent of credit", count: (input) => Number(microUsdOf(input) / PRICES.credit) },
    // The credit exists only once its payment settled: never answered before that, in any mode.
    settleFirst: true,
    buysCredit: true,
  },
});

/**
 * The lot is written before the payment settles and is spendable only once its ledger row is
 * settled (the reconciler's verdict included): a purchase that fails grants nothing, with no undo.
 */
export const purchaseHandler: RouteHandler<typeof purchaseRoute, AppEnv> = async (c) => {
  const { claim, payments } = c.var;
  const billing = await c.var.billing;
  const credit = payments.ledger.credit;
  const amount = microUsdOf(c.req.valid("json"));
  const expiresAt = new Date(Date.now() + CREDIT_LIFETIME_MS);
  await credit.addLot(claim.key, amount, expiresAt);
  const token = mintCreditToken();
  await credit.issueToken(billing.payer, hashCreditToken(token));
  // A rerun of a purchase already settled (its answer was lost) finds its own lot in the balance.
  const balance = (await credit.balance(billing.payer)) + (claim.paid ? 0n : amount);
  return c.json(
    {
      credit: {
        purchased: exactUsd(amount),
        balance: exactUsd(balance),
        expiresAt: expiresAt.toISOString(),
        purchase: keyId(claim.key),
      },
      creditToken: token,
      x402Billing: x402Billing(billing),
    },
    200,
  );
};

export const creditStatementRoute = declareRoute("creditRead", {
  method: "get",
  path: "/api/credit",
  tags: TAGS,
  summary: "Your credit: balance, purchases, spending (signed in)",
  description:
    "The signed-in wallet's spendable balance, its purchases (each with its payment's ledger reference and status), what it spent by day and route, and its latest calls paid from credit. Free; SIGN-IN-WITH-X required.",
  ok: creditStatementSchema,
  owner: true,
});

const lotStatus = (lot: CreditLot, now: number) =>
  lot.status === "settled"
    ? lot.expiresAt.getTime() > now
      ? "spendable"
      : "expired"
    : lot.status === null || ["failed", "expired", "used_elsewhere"].includes(lot.status)
      ? "not_paid"
      : "settling";

export const creditStatementHandler: RouteHandler<typeof creditStatementRoute, AppEnv> = async (c) => {
  const owner = c.var.owner;
  const credit = c.var.payments.ledger.credit;
  const [balance, lots, spending, recent] = await Promise.all([
    credit.balance(owner),
    credit.lots(owner),
    credit.spending(owner),
    credit.recent(owner, RECENT),
  ]);
  const now = Date.now();
  return c.json(
    {
      owner,
      balance: exactUsd(balance),
      purchases: lots.map((lot) => ({
        purchase: `${lot.token}:${lot.payer}:${lot.nonce}`,
        transaction: lot.transaction,
        amount: exactUsd(BigInt(lot.amount)),
        remaining: exactUsd(BigInt(lot.remaining)),
        purchasedAt: lot.createdAt.toISOString(),
        expiresAt: lot.expiresAt.toISOString(),
        status: lotStatus(lot, now),
      })),
      spending: spending.map((s) => ({ ...s, amount: exactUsd(s.amount) })),
      recent: recent.map((s) => ({
        reference: s.id,
        route: s.route,
        subject: s.subject,
        amount: exactUsd(BigInt(s.amount)),
        at: s.createdAt.toISOString(),
      })),
    },
    200,
  );
};

export const reissueTokenRoute = declareRoute("creditToken", {
  method: "post",
  path: "/api/credit/token",
  tags: TAGS,
  summary: "Revoke your credit tokens and issue a new one (signed in)",
  description:
    "Every earlier credit token of the signed-in wallet is refused from this answer on; the new one spends the same balance. Free; SIGN-IN-WITH-X required.",
  ok: tokenIssuedSchema,
  owner: true,
});

export const reissueTokenHandler: RouteHandler<typeof reissueTokenRoute, AppEnv> = async (c) => {
  const credit = c.var.payments.ledger.credit;
  const revoked = await credit.revokeTokens(c.var.owner);
  const token = mintCreditToken();
  await credit.issueToken(c.var.owner, hashCreditToken(token));
  return c.json({ creditToken: token, revoked }, 200);
};

export const revokeTokensRoute = declareRoute("creditRevoke", {
  method: "delete",
  path: "/api/credit/token",
  tags: TAGS,
  summary: "Revoke your credit tokens (signed in)",
  description:
    "Every credit token of the signed-in wallet is refused from this answer on (a stolen token spends nothing more). The balance stays, spendable signed in or with a token issued later. Free; SIGN-IN-WITH-X required.",
  ok: tokensRevokedSchema,
  owner: true,
});

export const revokeTokensHandler: RouteHandler<typeof revokeTokensRoute, AppEnv> = async (c) =>
  c.json({ revoked: await c.var.payments.ledger.credit.revokeTokens(c.var.owner) }, 200);
