import { z } from "zod";

const blockRef = z.object({
  number: z.number().int(),
  timestamp: z.number().int(),
  time: z.iso.datetime(),
});

/** GET /api/stats: what the indexer holds and how far behind the chain it is. */
export const statsSchema = z.object({
  network: z.enum(["celo", "devnet"]),
  chainId: z.number().int(),
  indexing: z.object({
    mode: z.enum(["all", "tracked"]),
    trackedWallets: z.number().int().nullable(),
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
      settling: z.number().int(),
      settled: z.number().int(),
      failed: z.number().int(),
      waived: z.number().int(),
      expired: z.number().int(),
      used_elsewhere: z.number().int(),
      reconciled: z.number().int().describe("Rows whose outcome was decided from the chain's state (reconciliation)"),
    })
    .nullable()
    .describe("Payments in the ledger by outcome (docs/payments.md); null when the service store does not answer"),
  generatedAt: z.iso.datetime(),
});
export type Stats = z.infer<typeof statsSchema>;
