import { z } from "zod";
import { x402BillingSchema } from "../payments/billing.ts";

export const purchaseRequestSchema = z.object({
  amount: z
    .string()
    .regex(/^\d{1,6}(\.\d{1,2})?$/, "must be USD with at most 2 decimals, e.g. 5.00")
    .describe("USD of credit to buy: 0.10 to CREDIT_MAX_USD (default 50.00), to the cent")
    .meta({ examples: ["5.00"] }),
});

const usd = (what: string) => z.string().describe(`${what}, in USD (6 decimals at most)`);

export const purchaseResultSchema = z.object({
  credit: z.object({
    purchased: usd("What this purchase bought"),
    balance: usd("The wallet's balance with this purchase"),
    expiresAt: z
      .string()
      .describe("When this purchase's credit stops being spendable (365 days); unused credit is not refunded"),
    purchase: z.string().describe("This purchase's ledger reference (token:payer:nonce of its payment)"),
  }),
  creditToken: z
    .string()
    .describe(
      "A bearer token for this wallet's credit (`Authorization: Bearer …`), shown only here. Every token of the wallet spends the same balance until the owner revokes them (DELETE /api/credit/token, signed in)",
    ),
  x402Billing: x402BillingSchema,
});

const lotSchema = z.object({
  purchase: z.string().describe("Ledger reference of the payment that bought it (token:payer:nonce)"),
  transaction: z.string().nullable(),
  amount: usd("Bought"),
  remaining: usd(
    "Left in this purchase. Credit a replica is spending right now (a lease, for seconds) is not counted here, and is in `balance`",
  ),
  purchasedAt: z.string(),
  expiresAt: z.string(),
  status: z
    .enum(["spendable", "settling", "expired", "not_paid"])
    .describe(
      "spendable: its payment settled and it has not expired; settling: its payment's outcome is not known yet; not_paid: its payment failed, nothing granted",
    ),
});

export const creditStatementSchema = z.object({
  owner: z.string(),
  balance: usd("Spendable now"),
  purchases: z.array(lotSchema).describe("Newest first"),
  spending: z
    .array(
      z.object({
        day: z.string().describe("UTC, YYYY-MM-DD"),
        route: z.string(),
        calls: z.number(),
        amount: usd("Spent"),
      }),
    )
    .describe("Calls paid from credit, by day (newest first) and route"),
  recent: z
    .array(
      z.object({
        reference: z.string().describe("The spend's ledger reference (the Credit-Spend header of its answer)"),
        route: z.string(),
        subject: z.string().nullable(),
        amount: usd("Spent"),
        at: z.string(),
      }),
    )
    .describe("The latest 50 calls paid from credit, newest first"),
});

export const tokenIssuedSchema = z.object({
  creditToken: z.string().describe("The new bearer token, shown only here"),
  revoked: z.number().describe("How many earlier tokens of this wallet were revoked (they are refused from now on)"),
});

export const tokensRevokedSchema = z.object({
  revoked: z.number().describe("How many tokens of this wallet were revoked (they are refused from now on)"),
});
