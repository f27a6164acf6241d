import { z } from "zod";
import { addressSchema, addressString } from "../../config/addresses.ts";
import { x402BillingSchema } from "../payments/billing.ts";
import { lenderScreenResultSchema } from "./schema.ts";

/** At most this many wallets in one batch: 100 x 0.01 is the 1.00 USD a single authorization may carry. */
const MAX_BATCH_WALLETS = 100;

export const screenBatchRequestSchema = z.object({
  wallets: z
    .array(addressSchema)
    .min(1)
    .max(MAX_BATCH_WALLETS)
    // A wallet twice would be screened and paid for twice to the same answer: refused instead.
    .superRefine((wallets, ctx) => {
      const first = new Map<string, number>();
      wallets.forEach((wallet, i) => {
        const j = first.get(wallet);
        if (j === undefined) first.set(wallet, i);
        else ctx.addIssue({ code: "custom", path: [i], message: `the same wallet as wallets.${j}` });
      });
    })
    .describe(
      `The borrowers' wallets, 1 to ${MAX_BATCH_WALLETS}, each once (case does not matter); results come back in this order`,
    ),
  callerAddress: addressSchema.optional().describe("The paying lender's wallet: when given, it must be the payer"),
});

/** A wallet of the batch with no result, and why; it is not charged. */
const walletErrorSchema = z.object({
  walletAddress: addressString,
  error: z.object({ code: z.enum(["wallet_not_indexed"]), message: z.string() }),
});

export const screenBatchResultSchema = z.object({
  status: z.literal("completed"),
  results: z
    .array(z.union([lenderScreenResultSchema, walletErrorSchema]))
    .describe(
      "One entry per requested wallet, in request order: its LenderScreenResult (x402Billing: this wallet's share), or its error",
    ),
  answered: z.number().int().describe("Wallets with a LenderScreenResult: the units charged"),
  failed: z.number().int().describe("Wallets with an error: not charged"),
  x402Billing: x402BillingSchema.describe("What this call charged in all"),
});

export type ScreenBatchResult = z.infer<typeof screenBatchResultSchema>;
