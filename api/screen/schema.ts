import { z } from "zod";
import { addressSchema, addressString } from "../../config/addresses.ts";
import { x402BillingSchema } from "../payments/billing.ts";
import { sanctionsViewSchema } from "../sanctions/view.ts";

const walletAddress = addressString;

export const screenRequestSchema = z.object({
  walletAddress: addressSchema.describe("The borrower's wallet"),
  callerAddress: addressSchema.optional().describe("The paying lender's wallet, when it is not the borrower"),
});

/** LenderScreenResult exactly as the service interface defines it, plus what lenders ask peers for. */
export const lenderScreenResultSchema = z
  .object({
    status: z.literal("completed"),
    walletAddress: walletAddress,
    screenedAt: z.iso.datetime(),
    trust: z.object({ isTrustworthy: z.boolean() }).strict(),
    recommendation: z.enum(["approve", "review", "decline"]),
    recommendationRationale: z.string(),
    scores: z
      .object({
        financialHealth: z.number().min(0).max(100),
        reputation: z.number().min(0).max(100),
        reputationCategory: z.enum(["excellent", "good", "fair", "poor", "very poor"]),
      })
      .loose(),
    income: z
      .object({
        label: z
          .string()
          .describe("none | irregular | recurring monthly | recurring biweekly | recurring weekly | business revenue"),
        monthlyEstimateUsd: z.number(),
        verifiedMonthlyUsd: z.number(),
        weeklyConsistencyPct: z.number(),
        recurringIncome: z.boolean(),
        recurringPayers: z.array(
          z.object({ payer: z.string(), cadence: z.string(), payments: z.number(), medianUsd: z.number() }),
        ),
        threeMonthInflowUsd: z.number(),
        threeMonthOutflowUsd: z.number(),
        threeMonthNetFlowUsd: z.number(),
        excludedInflowUsd: z.object({ dust: z.number(), cycled: z.number(), returned: z.number(), self: z.number() }),
      })
      .partial()
      .loose(),
    lending: z
      .object({
        recommendedMinUsd: z.number(),
        recommendedMaxUsd: z.number(),
        confidence: z.enum(["low", "medium", "high"]),
        riskCategory: z.enum(["low", "medium", "high"]),
        stablecoinBalanceUsd: z.number(),
        walletAgeMonths: z.number(),
      })
      .partial()
      .loose(),
    signals: z.object({ positive: z.array(z.string()), concerns: z.array(z.string()) }).partial(),
    sanctions: sanctionsViewSchema,
    whatLendersAlreadySee: z.object({
      balances: z.array(z.object({ token: z.string(), symbol: z.string(), balanceUsd: z.number() })),
      stablecoinBalanceUsd: z.number(),
      transactionCount: z.number(),
      walletAgeDays: z.number(),
      firstActiveAt: z.iso.datetime().nullable(),
      lastActiveAt: z.iso.datetime().nullable(),
    }),
    whatServiceAdds: z.object({
      incomeProof: z.string(),
      stability: z.string(),
      spendingDiscipline: z.string(),
      counterpartyDiversity: z.string(),
      loanCapacity: z.string(),
    }),
    verification: z
      .object({
        hasOnchainPassport: z.boolean(),
        reportId: z.string().nullable(),
        verifyUrl: z.string().nullable(),
        onchainReporterContract: z.string(),
      })
      .partial()
      .loose(),
    cached: z.boolean(),
    x402Billing: x402BillingSchema.partial().loose(),
    modelVersion: z.string(),
    dataAsOf: z.object({ block: z.number(), time: z.iso.datetime() }),
    thinFile: z.object({ thinFile: z.boolean(), reason: z.string().nullable() }),
    topFactors: z.array(z.object({ score: z.string(), factor: z.string(), points: z.number() })),
  })
  .loose();

export type LenderScreenResult = z.infer<typeof lenderScreenResultSchema>;
