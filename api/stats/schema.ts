import { z } from "zod";
import { indexStatusSchema } from "../indexing/state.ts";

const blockRef = z.object({
  number: z.number().int(),
  timestamp: z.number().int(),
  time: z.iso.datetime(),
});

/** GET /api/stats: what the indexer holds and how far behind the chain it is. */
export const statsSchema = z.object({
  network: z.enum(["celo", "devnet"]),
  chainId: z.number().int(),
  indexing: indexStatusSchema.extend({
    mode: z.enum(["all", "tracked"]),
    trackedWallets: z.number().int().nullable(),
    transfersPerSecond: z
      .number()
      .nullable()
      .describe(
        "Transfers indexed a second over the last minute of calls to this route (null until it has been called twice)",
      ),
  }),
  wallets: z.number().int().describe("Wallets with at least one indexed transfer"),
  transfers: z.number().int().describe("Indexed Transfer logs across all tokens"),
  tokens: z.array(
    z.object({
      symbol: z.string(),
      address: z.string(),
      transfers: z.number().int(),
      volumeUsd: z.number().describe("Sum of transferred amounts, in USD at the edge of the API"),
    }),
  ),
  latestIndexedBlock: blockRef.nullable(),
  chainHead: blockRef.nullable().describe("Null when the RPC does not answer"),
  lag: z.object({ blocks: z.number().int(), seconds: z.number().int() }).nullable(),
  payments: z
    .object({
      pending: z.number().int(),
      queued: z
        .number()
        .int()
        .describe("Deferred payments answered and waiting for the settlement worker (X402_SETTLEMENT=deferred)"),
      settling: z.number().int(),
      settled: z.number().int(),
      failed: z.number().int(),
      waived: z.number().int(),
      expired: z.number().int(),
      used_elsewhere: z.number().int(),
      reconciled: z.number().int().describe("Rows whose outcome was decided from the chain's state (reconciliation)"),
      deferredExpired: z
        .number()
        .int()
        .describe("Deferred payments answered but not settled before their validBefore: the service's loss"),
      owedUnits: z
        .string()
        .describe(
          "Debts: deferred answers whose settlement failed by the payer's doing (cancelled, balance moved), not paid again; smallest units",
        ),
    })
    .nullable()
    .describe("Payments in the ledger by outcome (docs/payments.md); null when the service store does not answer"),
  served: z
    .object({
      screens: z.number().int().describe("POST /api/lender/screen answers paid for (settled or waived)"),
      analyses: z.number().int().describe("POST /api/agent/analyze and GET /api/wallet/{address}/analysis"),
      reports: z.number().int().describe("POST /api/agent/report (passports published)"),
      statements: z.number().int().describe("POST /api/agent/statement"),
      byRoute: z.array(
        z.object({
          route: z.string(),
          calls: z.number().int(),
          free: z.number().int().describe("Of which waived (free reads)"),
        }),
      ),
      revenue: z.array(
        z.object({
          symbol: z.string(),
          address: z.string(),
          units: z.string().describe("Smallest token units settled"),
          usd: z.number(),
        }),
      ),
      payers: z.number().int().describe("Distinct wallets that settled at least one payment"),
    })
    .nullable()
    .describe(
      "Paid calls answered and revenue, from the payment ledger (at most a few seconds old); null when the service store does not answer",
    ),
  generatedAt: z.iso.datetime(),
});
export type Stats = z.infer<typeof statsSchema>;
