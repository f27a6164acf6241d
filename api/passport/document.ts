import { randomInt } from "node:crypto";
import canonicalize from "canonicalize";
import { z } from "zod";
import type { Address } from "../../config/addresses.ts";
import { isoFromSeconds as iso, usdRoundedToCents as usd } from "../money.ts";
import { monthlyIncomeEstimateUnits } from "../scoring/model.ts";
import type { Assessment } from "../wallet/assess.ts";

/** "REP-" then exactly 10 of [A-Z0-9]: the reporter contracts' id format. */
export const REPORT_ID = /^REP-[A-Z0-9]{10}$/;
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/** A fresh REP- id: 10 characters drawn uniformly (crypto RNG) from A-Z0-9. */
export function drawReportId(): string {
  return `REP-${Array.from({ length: 10 }, () => ALPHABET[randomInt(ALPHABET.length)]).join("")}`;
}

/** What the passport's document says; its canonical bytes are pinned in IPFS and their CID is attested on chain. */
export const passportDocumentSchema = z
  .object({
    type: z.literal("celo-wallet-reputation/passport"),
    version: z.literal(1),
    reportId: z.string(),
    walletAddress: z.string(),
    buyer: z.string(),
    scores: z.object({ financialHealth: z.number(), reputation: z.number(), reputationCategory: z.string() }),
    recommendation: z.enum(["approve", "review", "decline"]),
    income: z.object({
      label: z.string(),
      monthlyEstimateUsd: z.number(),
      verifiedMonthlyUsd: z.number(),
      weeklyConsistencyPct: z.number(),
    }),
    loanCapacity: z.object({
      minUsd: z.number(),
      maxUsd: z.number(),
      confidence: z.string(),
      riskCategory: z.string(),
      currency: z.literal("USD"),
      attested: z.string(),
    }),
    topFactors: z.array(z.object({ score: z.string(), factor: z.string(), points: z.number() })),
    signals: z.object({ positive: z.array(z.string()), concerns: z.array(z.string()) }),
    thinFile: z.object({ thinFile: z.boolean(), reason: z.string().nullable() }),
    modelVersion: z.string(),
    dataAsOf: z.object({ block: z.number(), time: z.string() }),
    issuedAt: z.string(),
    expiresAt: z.string(),
    supersedes: z.string().nullable(),
    reporter: z.object({ contract: z.string(), chainId: z.number() }),
  })
  .describe("The passport document: canonical JSON (RFC 8785) pinned in IPFS; its CID is the reportHash on chain");

export type PassportDocument = z.infer<typeof passportDocumentSchema>;

/** The loan range as the attestation's `loanCapacity` string: whole dollars, "1200-2800 USD". */
export const loanCapacityText = (minUsd: number, maxUsd: number) => `${Math.round(minUsd)}-${Math.round(maxUsd)} USD`;

export function passportDocument(
  a: Assessment,
  p: {
    reportId: string;
    buyer: Address;
    issuedAt: number;
    expiresAt: number;
    supersedes: string | null;
    contract: Address;
    chainId: number;
  },
): PassportDocument {
  const r = a.result;
  const s = r.signals;
  const minUsd = usd(r.loan.minUnits);
  const maxUsd = usd(r.loan.maxUnits);
  return {
    type: "celo-wallet-reputation/passport",
    version: 1,
    reportId: p.reportId,
    walletAddress: a.facts.address,
    buyer: p.buyer,
    scores: r.scores,
    recommendation: r.recommendation,
    income: {
      label: r.incomeLabel,
      monthlyEstimateUsd: usd(monthlyIncomeEstimateUnits(s)),
      verifiedMonthlyUsd: usd(s.verifiedMonthlyIncomeUnits),
      weeklyConsistencyPct: Math.round(s.weeklyConsistency * 100),
    },
    loanCapacity: {
      minUsd,
      maxUsd,
      confidence: r.loan.confidence,
      riskCategory: r.loan.riskCategory,
      currency: "USD",
      attested: loanCapacityText(minUsd, maxUsd),
    },
    topFactors: r.topFactors,
    signals: { positive: r.positive, concerns: r.concerns },
    thinFile: r.thinFile,
    modelVersion: r.modelVersion,
    dataAsOf: { block: a.asOf.block, time: iso(a.asOf.timestamp) },
    issuedAt: iso(p.issuedAt),
    expiresAt: iso(p.expiresAt),
    supersedes: p.supersedes,
    reporter: { contract: p.contract, chainId: p.chainId },
  };
}

/** RFC 8785 (JCS) canonical bytes: the same content always gives the same bytes, hence the same CID. */
export function canonicalBytes(document: unknown): Uint8Array {
  return new TextEncoder().encode(canonicalize(document)!);
}
