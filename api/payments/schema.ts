import { z } from "zod";
import { creditOfferSchema } from "./credit-offer.ts";

/** The 402 body: x402 v1 (`x402Version`, `error`, `accepts`) plus our stable `code`. */
export const paymentRequiredBodySchema = z.object({
  x402Version: z.literal(1),
  error: z.string().describe("Why payment is required, in a sentence (a string, as x402 clients expect)"),
  code: z.string().describe("Stable machine code, e.g. payment_required, invalid_signature, nonce_already_used"),
  details: z.unknown().optional(),
  accepts: z.array(
    z.object({
      scheme: z.string().describe("exact"),
      network: z.string().describe('"celo" (x402 v1 naming); the v2 PAYMENT-REQUIRED header says eip155:42220'),
      maxAmountRequired: z.string().describe("Price in the token's smallest unit"),
      resource: z.string(),
      description: z.string(),
      mimeType: z.string(),
      outputSchema: z.record(z.string(), z.unknown()),
      payTo: z.string(),
      maxTimeoutSeconds: z.number(),
      asset: z.string(),
      extra: z.record(z.string(), z.unknown()).describe("EIP-712 domain: name and version"),
    }),
  ),
  freeWhen: z.string().optional().describe("Single-signal reads: when the call is free"),
  credit: creditOfferSchema.optional(),
  extensions: z
    .record(z.string(), z.unknown())
    .optional()
    .describe(
      "x402 extensions, as in the PAYMENT-REQUIRED header: `payment-identifier` (optional idempotency id) everywhere, and `sign-in-with-x` (a fresh CAIP-122 challenge) where signing in makes the call free",
    ),
});
export type PaymentRequiredBody = z.infer<typeof paymentRequiredBodySchema>;

/** The x402 v2 PaymentRequired (the PAYMENT-REQUIRED header decoded; MCP tool results carry it as is). */
export const paymentRequiredV2Schema = z.object({
  x402Version: z.literal(2),
  error: z.string().optional().describe("Why payment is required, in a sentence"),
  code: z.string().optional().describe("This service's stable machine code, as in the HTTP 402 body"),
  resource: z.object({ url: z.string(), description: z.string().optional(), mimeType: z.string().optional() }),
  accepts: z.array(
    z.looseObject({
      scheme: z.string(),
      network: z.string().describe("CAIP-2: eip155:42220"),
      amount: z.string().describe("Price in the token's smallest unit"),
      asset: z.string(),
      payTo: z.string(),
      maxTimeoutSeconds: z.number(),
      extra: z.record(z.string(), z.unknown()).optional().describe("EIP-712 domain: name and version"),
    }),
  ),
  extensions: z.record(z.string(), z.unknown()).optional(),
});
