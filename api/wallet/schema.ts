import { z } from "zod";
import { addressSchema } from "../../config/addresses.ts";
import { x402BillingSchema } from "../payments/billing.ts";

/** Wallet routes take the wallet from the path. */
export const walletParams = z.object({
  address: addressSchema.describe("Wallet address, 0x followed by 40 hex characters"),
});

/** The latest indexed block the answer was computed at. */
export const dataAsOfSchema = z.object({ block: z.number().int(), time: z.iso.datetime() });

const cacheStatusSchema = z.object({
  cached: z.boolean(),
  cachedAt: z.iso.datetime(),
  expiresAt: z.iso.datetime(),
  invalidatedBy: z.string(),
});

const usd = z.number().describe("USD, rounded to cents");
const recurringPayer = z.object({
  payer: z.string(),
  cadence: z.string(),
  payments: z.number().int(),
  medianUsd: usd,
  monthlyUsd: usd,
});

/** walletData: everything the scores were computed from (docs/api.md). */
export const walletDataSchema = z.object({
  account: z
    .object({
      firstActiveAt: z.iso.datetime(),
      lastActiveAt: z.iso.datetime(),
      ageDays: z.number(),
      transfersIn: z.number().int(),
      transfersOut: z.number().int(),
    })
    .nullable(),
  balances: z.array(
    z.object({
      token: z.string(),
      symbol: z.string(),
      balanceUnits: z.string().describe("Integer smallest units"),
      balanceUsd: usd,
    }),
  ),
  monthly: z.array(
    z.object({
      month: z.string().describe("YYYY-MM (UTC)"),
      token: z.string(),
      symbol: z.string(),
      inflowUsd: usd,
      outflowUsd: usd,
      transfersIn: z.number().int(),
      transfersOut: z.number().int(),
      counterparties: z.number().int(),
      payers: z.number().int(),
      payees: z.number().int(),
    }),
  ),
  topCounterparties: z.array(
    z.object({
      counterparty: z.string(),
      receivedUsd: usd,
      sentUsd: usd,
      transfersIn: z.number().int(),
      transfersOut: z.number().int(),
      firstAt: z.iso.datetime(),
      lastAt: z.iso.datetime(),
    }),
  ),
  income: z.object({
    byMonth: z.array(z.object({ month: z.string(), incomeUsd: usd })),
    monthlyEstimateUsd: usd,
    verifiedMonthlyUsd: usd,
    weeklyConsistencyPct: z.number(),
    recurringPayers: z.array(recurringPayer),
    inflowUsd: z.record(z.string(), usd).describe("Inflow by kind: income, dust, cycled, returned, self"),
    dustInflows: z.number().int(),
    selfFundedWallets: z.number().int(),
  }),
});

/** What every paid wallet answer starts with. */
const walletAnswer = {
  walletAddress: z.string(),
  modelVersion: z.string(),
  dataAsOf: dataAsOfSchema,
  x402Billing: x402BillingSchema,
};

export const analysisSchema = z.object({ ...walletAnswer, cached: z.boolean(), walletData: walletDataSchema });

/** A signal's value: a number, flag, word, list or object, as its description says. */
const signalValueSchema = z.union([
  z.number(),
  z.boolean(),
  z.string(),
  z.null(),
  z.array(z.record(z.string(), z.unknown())),
  z.record(z.string(), z.unknown()),
]);

export const signalsSchema = z.object({
  ...walletAnswer,
  cache: cacheStatusSchema,
  signals: z.array(z.object({ name: z.string(), value: signalValueSchema, description: z.string() })),
  aliases: z.record(z.string(), z.string()).describe("Names the original service used, and the signal each reads"),
});

export const signalSchema = z.object({
  ...walletAnswer,
  name: z.string().describe("The signal read (an alias resolves to its signal)"),
  value: signalValueSchema,
  description: z.string(),
  cache: cacheStatusSchema,
  billing: z.object({ chargedUnits: z.string(), freeRead: z.boolean() }),
});

export const historySchema = z.object({
  ...walletAnswer,
  history: z.array(
    z.object({
      monthEnd: z.iso.datetime(),
      month: z.string(),
      financialHealth: z.number(),
      reputation: z.number(),
      recommendation: z.enum(["approve", "review", "decline"]),
      thinFile: z.boolean(),
    }),
  ),
});
