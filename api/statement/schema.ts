import { z } from "zod";
import { addressSchema, addressString } from "../../config/addresses.ts";
import { x402BillingSchema } from "../payments/billing.ts";
import { DEFAULT_PERIOD, STATEMENT_PERIODS } from "./data.ts";

export const statementRequestSchema = z.object({
  walletAddress: addressSchema.describe("The wallet the statement is about"),
  period: z
    .enum(STATEMENT_PERIODS)
    .default(DEFAULT_PERIOD)
    .describe(
      `Months counted back from the latest indexed block: ${STATEMENT_PERIODS.join(", ")} (default ${DEFAULT_PERIOD})`,
    ),
  callerAddress: addressSchema.optional().describe("The paying wallet, when it is not the statement's wallet"),
});

const units = z.string().describe("Integer units of the token (6 decimals)");
const usd = z.string().describe("Exact amount in USD (6 decimals, at least 2 shown)");
const pin = z.object({
  cid: z.string(),
  name: z.string(),
  status: z.enum(["queued", "pinning", "pinned", "failed"]),
  requestId: z.string().optional(),
  error: z.string().optional(),
});

export const statementResultSchema = z.object({
  walletAddress: addressString,
  period: z.enum(STATEMENT_PERIODS),
  from: z.iso.datetime().describe("The period's first second (UTC), included"),
  to: z.iso.datetime().describe("The period's last second (UTC), included: the latest indexed block's time"),
  dataAsOf: z.object({ block: z.number().int(), time: z.iso.datetime() }),
  cid: z.string().describe("CID of the PDF (CIDv1, raw leaves, 1 MiB chunks)"),
  csvCid: z.string().describe("CID of the CSV of the same rows"),
  size: z.number().int().describe("Bytes of the PDF"),
  sha256: z.string().describe("SHA-256 of the PDF, hex"),
  csvSize: z.number().int(),
  csvSha256: z.string(),
  url: z.url().describe("Where to fetch the PDF: GET /ipfs/{cid} on this service"),
  csvUrl: z.url(),
  transferCount: z.number().int(),
  transfersIn: z.number().int(),
  transfersOut: z.number().int(),
  balances: z.array(
    z.object({
      token: z.string(),
      tokenAddress: z.string(),
      openingUnits: units,
      closingUnits: units,
      inUnits: units,
      outUnits: units,
      netUnits: units,
      openingUsd: usd,
      closingUsd: usd,
      transfersIn: z.number().int(),
      transfersOut: z.number().int(),
    }),
  ),
  totals: z
    .object({ openingUsd: usd, closingUsd: usd, inUsd: usd, outUsd: usd, netUsd: usd })
    .describe("All tokens together (both are 6-decimal USD stablecoins)"),
  pinned: z.object({
    local: z.literal(true).describe("Both files are pinned on the service's own IPFS node"),
    remote: z
      .object({ service: z.string(), ok: z.boolean(), pins: z.array(pin) })
      .optional()
      .describe(
        "Only when PINNING_SERVICE_URL is set: what the remote pinning service answered for each file (a failure is reported here, not fatal)",
      ),
  }),
  x402Billing: x402BillingSchema,
});

export type StatementResult = z.infer<typeof statementResultSchema>;
