import { z } from "zod";
import type { PaymentSettings } from "../../config/payments.ts";
import { exactUsd } from "../money.ts";
import { CREDIT_LIFETIME_MS } from "./credit-lifecycle.ts";

/** The least one purchase of credit may buy: 0.10 USD (micro-USD). The most is CREDIT_MAX_USD. */
export const CREDIT_MIN_MICRO_USD = 100_000n;
export const CREDIT_LIFETIME_DAYS = CREDIT_LIFETIME_MS / 86_400_000;

export const creditOfferSchema = z
  .object({
    buy: z
      .string()
      .describe("The route that sells credit, paid with one x402 payment settled before the credit exists"),
    minimumUsd: z.string(),
    maximumUsd: z.string(),
    lifetimeDays: z
      .number()
      .describe("Credit is spendable this long after its purchase; unused credit is not refunded"),
    spend: z.string().describe("How a call is paid from credit instead of a payment"),
  })
  .describe("Prepaid credit: pay once, call many (every paid route accepts it, except the purchase itself)");
export type CreditOffer = z.infer<typeof creditOfferSchema>;

/** What the 402 answers and GET /api/x402/config say of prepaid credit: one source for both. */
export const creditOffer = (settings: Pick<PaymentSettings, "creditMaxMicroUsd">): CreditOffer => ({
  buy: "POST /api/credit",
  minimumUsd: exactUsd(CREDIT_MIN_MICRO_USD),
  maximumUsd: exactUsd(settings.creditMaxMicroUsd),
  lifetimeDays: CREDIT_LIFETIME_DAYS,
  spend:
    "Send `Authorization: Bearer <creditToken>` (from the purchase), or SIGN-IN-WITH-X signed by the wallet that bought the credit, instead of a payment; `Payment-Identifier` makes a retry answer again without a second charge. Too little credit left: 402 credit_insufficient, pay per call.",
});
