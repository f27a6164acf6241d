import { z } from "zod";
import { addressSchema } from "../../config/addresses.ts";
import { x402BillingSchema } from "../payments/billing.ts";
import { attestationSchema } from "../wallet/attestation.ts";
import { dataAsOfSchema, walletDataSchema } from "../wallet/schema.ts";

/** What `fields` may name; without `fields` the answer has all of them. */
export const ANALYZE_FIELDS = [
  "financialHealthScore",
  "reputationScore",
  "incomeLabel",
  "loanRange",
  "summary",
  "attestation",
  "walletData",
] as const;
export type AnalyzeField = (typeof ANALYZE_FIELDS)[number];

export const analyzeRequestSchema = z.object({
  walletAddress: addressSchema.describe("The wallet to analyse"),
  callerAddress: addressSchema.optional().describe("The paying wallet, when it is not the analysed one"),
  fields: z.array(z.enum(ANALYZE_FIELDS)).min(1).optional().describe("Narrows the answer to these fields"),
});

export const analyzeResultSchema = z.object({
  walletAddress: z.string(),
  modelVersion: z.string(),
  dataAsOf: dataAsOfSchema,
  cached: z.boolean(),
  x402Billing: x402BillingSchema,
  financialHealthScore: z.number().min(0).max(100).optional(),
  reputationScore: z.number().min(0).max(100).optional(),
  incomeLabel: z.string().optional(),
  loanRange: z
    .object({
      minUsd: z.number(),
      maxUsd: z.number(),
      confidence: z.enum(["low", "medium", "high"]),
      currency: z.literal("USD"),
    })
    .optional(),
  summary: z.string().optional().describe("A paragraph written from the facts (a template, not a model)"),
  attestation: attestationSchema.nullable().optional().describe("The wallet's latest valid passport, or null"),
  walletData: walletDataSchema.optional(),
});
export type AnalyzeResult = z.infer<typeof analyzeResultSchema>;
