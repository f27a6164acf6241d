import { z } from "zod";
import type { Address } from "../../config/addresses.ts";
import { CELO_NETWORK, type TokenInfo } from "../../config/celo.ts";
import { exactUsd } from "../money.ts";

/** What the handler may say about the payment that let it run. */
export type Billing = {
  chargedUnits: bigint;
  token: TokenInfo;
  payer: Address;
  waived: boolean;
  /** Paid from prepaid credit: the balance left after this call (micro-USD). */
  creditLeft?: bigint;
};

/** A call that runs free (a free read, a sign-in grant): nothing charged, in the first accepted token. */
export const freeBilling = (tokens: readonly TokenInfo[], payer: Address): Billing => ({
  chargedUnits: 0n,
  token: tokens[0]!,
  payer,
  waived: true,
});

/** `x402Billing` of every paid answer: what this call really charged. */
export const x402BillingSchema = z.object({
  chargedUsdt: z
    .string()
    .describe(
      'The amount taken, in USD to the token\'s 6 decimals, at least 2 shown ("0.01", "0.015"; "0.00" for a free read)',
    ),
  chargedUnits: z.string().describe("The amount taken, in the token's smallest units"),
  token: z.string(),
  tokenAddress: z.string(),
  chain: z.string(),
  payer: z.string(),
  creditLeft: z
    .string()
    .optional()
    .describe("Only when paid from prepaid credit (POST /api/credit): the credit left after this call, in USD"),
});

export function x402Billing(billing: Billing): z.infer<typeof x402BillingSchema> {
  return {
    chargedUsdt: exactUsd(billing.chargedUnits, billing.token.decimals),
    chargedUnits: billing.chargedUnits.toString(),
    token: billing.token.symbol,
    tokenAddress: billing.token.address,
    chain: CELO_NETWORK,
    payer: billing.payer,
    ...(billing.creditLeft === undefined ? {} : { creditLeft: exactUsd(billing.creditLeft, 6) }),
  };
}
