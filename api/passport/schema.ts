import { z } from "zod";
import { addressSchema } from "../../config/addresses.ts";
import { x402BillingSchema } from "../payments/billing.ts";
import { passportDocumentSchema } from "./document.ts";
import { parsePassportId } from "./passport-id.ts";

export const reportRequestSchema = z.object({
  walletAddress: addressSchema.describe("The wallet the passport is about"),
  callerAddress: addressSchema.optional().describe("The paying wallet (the buyer), when it is not the wallet itself"),
  expiresInDays: z
    .number()
    .int()
    .min(1)
    .max(365)
    .default(90)
    .describe("Days until the passport expires (1 to 365, default 90)"),
});

const attestationSchema = z.object({
  contract: z.string().describe("The reporter contract that attested it"),
  chainId: z.number(),
  transaction: z.string().nullable(),
  block: z.number().nullable(),
});

const scoresSchema = z.object({ financialHealth: z.number().min(0).max(100), reputation: z.number().min(0).max(100) });

export const reportResultSchema = z.object({
  reportId: z.string().describe("REP- and 10 characters of A-Z0-9"),
  walletAddress: z.string(),
  buyer: z.string(),
  scores: scoresSchema.extend({ reputationCategory: z.string() }),
  loanCapacity: z.object({
    minUsd: z.number(),
    maxUsd: z.number(),
    confidence: z.string(),
    currency: z.literal("USD"),
    attested: z.string().describe("The loanCapacity string on chain"),
  }),
  modelVersion: z.string(),
  dataAsOf: z.object({ block: z.number(), time: z.iso.datetime() }),
  reportHash: z.string().describe("What the chain attests: the document's IPFS CID"),
  ipfsCid: z.string(),
  contentHash: z.string().describe("0x sha256 of the canonical document (the CID's digest): verify accepts it too"),
  attestation: attestationSchema.extend({
    status: z.enum(["pending", "confirmed"]).describe("pending until the indexer has the event, confirmed after"),
    publishedAt: z.iso.datetime(),
  }),
  verifyUrl: z.string(),
  issuedAt: z.iso.datetime(),
  expiresAt: z.iso.datetime(),
  supersedes: z.string().nullable().describe("The wallet's previous valid passport, which this one replaces"),
  x402Billing: x402BillingSchema,
});
export type ReportResult = z.infer<typeof reportResultSchema>;

const PASSPORT_STATUSES = [
  "confirmed",
  "pending",
  "revoked",
  "expired",
  "superseded",
  "tampered",
  "not_found",
] as const;
export type PassportStatus = (typeof PASSPORT_STATUSES)[number];

export const verifyParams = z.object({
  id: z
    .string()
    .max(200)
    .regex(
      /^(REP-[A-Z0-9]{10}|0x[0-9a-fA-F]{64}|(?!0[xX])[A-Za-z0-9]{20,120})$/,
      "a REP- id, an IPFS CID or a 0x content hash",
    )
    // The pattern's CID shape lets through base-encoded strings that are no CID: only a parsed id is one.
    .refine((id) => parsePassportId(id) !== null, "not a REP- id, an IPFS CID or a 0x 32-byte hash")
    .describe(
      "A REP- id (REP-XXXXXXXXXX), the report's IPFS CID, or a 0x hash: the document's sha256, the reportHash itself, or keccak256 of the id",
    ),
});

export const verifyResultSchema = z.object({
  id: z.string().describe("What was asked for"),
  status: z.enum(PASSPORT_STATUSES),
  valid: z.boolean().describe("true only when confirmed and not expired"),
  reason: z.string().describe("Why the status is what it is, in a sentence"),
  reportId: z.string().nullable(),
  walletAddress: z.string().nullable(),
  buyer: z.string().nullable(),
  scores: scoresSchema.nullable().describe("As attested on chain"),
  loanCapacity: z.string().nullable().describe("As attested on chain"),
  report: passportDocumentSchema.nullable().describe("The pinned document, when this node holds it and it is intact"),
  reportHash: z.string().nullable(),
  ipfsCid: z.string().nullable(),
  contentHash: z.string().nullable(),
  integrity: z.object({
    checked: z
      .boolean()
      .describe("false when this node does not hold the content (e.g. a passport of the original OnchainReporter)"),
    contentMatchesCid: z.boolean().nullable(),
    attestationMatchesContent: z
      .boolean()
      .nullable()
      .describe("wallet, scores and id of the document equal the attestation"),
    detail: z.string().nullable(),
  }),
  attestation: attestationSchema
    .extend({
      time: z.iso.datetime().nullable(),
      attester: z.string().nullable().describe("The attesting reporter contract"),
    })
    .nullable(),
  source: z
    .enum(["reputation-reporter", "onchain-reporter"])
    .nullable()
    .describe("Our reporter, or the original OnchainReporter on Celo"),
  issuedAt: z.iso.datetime().nullable(),
  expiresAt: z.iso.datetime().nullable(),
  revokedAt: z.iso.datetime().nullable(),
  revocationReason: z.string().nullable(),
  supersedes: z.string().nullable(),
  supersededBy: z.string().nullable(),
  asOf: z
    .object({ block: z.number(), time: z.iso.datetime() })
    .nullable()
    .describe("The latest indexed block: expiry is judged against its time"),
  verifyUrl: z.string().nullable(),
  howToVerify: z.object({ contractCall: z.string(), ipfs: z.string().nullable() }).nullable(),
});
export type VerifyResult = z.infer<typeof verifyResultSchema>;
