import { z } from "zod";
import { isoFromSeconds as iso } from "../money.ts";
import type { ValidReport } from "./queries.ts";

/** A wallet's passport as answers show it (analyze's `attestation`, chat's passport fact). */
export const attestationSchema = z.object({
  reportId: z.string(),
  reportHash: z.string(),
  reputationScore: z.number(),
  financialHealthScore: z.number(),
  loanCapacity: z.string(),
  publishedAt: z.iso.datetime(),
  expiresAt: z.iso.datetime().nullable(),
  reporterContract: z.string(),
});

export function attestationOf(report: ValidReport): z.infer<typeof attestationSchema> {
  return {
    reportId: report.reportId,
    reportHash: report.reportHash,
    reputationScore: report.reputationScore,
    financialHealthScore: report.financialHealthScore,
    loanCapacity: report.loanCapacity,
    publishedAt: iso(report.publishedAt),
    expiresAt: report.expiresAt === null ? null : iso(report.expiresAt),
    reporterContract: report.reporter,
  };
}
