import { Hono, type MiddlewareHandler } from "hono";
import { z } from "zod";
import { addressSchema } from "../../config/addresses.ts";
import type { IndexTarget } from "../../config/target.ts";
import type { IndexDb } from "../db.ts";
import { ApiError } from "../http/errors.ts";
import { type InputEnv, jsonInput } from "../http/validate.ts";
import { x402Billing } from "../payments/billing.ts";
import { paid, type PaidEnv, type PaymentDeps } from "../payments/guard.ts";
import { isoFromSeconds as iso, unitsToUsd } from "../money.ts";
import type { WalletAssessor } from "../wallet/assess.ts";
import { recentReports, validReport } from "../wallet/queries.ts";
import { walletData } from "../wallet/wallet-data.ts";
import { summaryOf } from "./summary.ts";

/** What `fields` may name; without `fields` the answer has all of them. */
export const ANALYZE_FIELDS = ["financialHealthScore", "reputationScore", "incomeLabel", "loanRange", "summary", "attestation", "walletData"] as const;
type Field = (typeof ANALYZE_FIELDS)[number];

export const analyzeRequestSchema = z.object({
  walletAddress: addressSchema,
  callerAddress: addressSchema.optional(),
  fields: z.array(z.string()).min(1).optional(),
});

type AnalyzeRequest = z.infer<typeof analyzeRequestSchema>;

export type AnalyzeDeps = { db: IndexDb; target: Pick<IndexTarget, "tokens">; assessor: WalletAssessor; payments: PaymentDeps };

/** An unknown `fields` entry is a 400 listing the allowed ones, before any payment is asked for. */
const knownFields: MiddlewareHandler<InputEnv<AnalyzeRequest>> = async (c, next) => {
  const unknown = (c.get("input").fields ?? []).filter((f) => !(ANALYZE_FIELDS as readonly string[]).includes(f));
  if (unknown.length) {
    throw new ApiError(400, "unknown_field", `Unknown field(s): ${unknown.join(", ")}. Allowed: ${ANALYZE_FIELDS.join(", ")}.`, { allowed: ANALYZE_FIELDS });
  }
  await next();
};

/** POST /api/agent/analyze: scores, income label, loan range, a summary, the attestation and walletData. */
export function analyzeRoutes({ db, target, assessor, payments }: AnalyzeDeps) {
  return new Hono<PaidEnv & InputEnv<AnalyzeRequest>>().post("/analyze", jsonInput(analyzeRequestSchema), knownFields, assessor.indexedOnly(), paid("analyze", payments), async (c) => {
    const body = c.get("input");
    const wanted = new Set<Field>((body.fields as Field[] | undefined) ?? ANALYZE_FIELDS);
    const [a, reports] = await Promise.all([assessor.assess(body.walletAddress), wanted.has("attestation") ? recentReports(db, body.walletAddress) : null]);
    const r = a.result;
    const out: Record<string, unknown> = {
      walletAddress: a.facts.address,
      modelVersion: r.modelVersion,
      dataAsOf: { block: a.asOf.block, time: iso(a.asOf.timestamp) },
      cached: a.cached,
      x402Billing: x402Billing(c.get("billing")),
    };
    if (wanted.has("financialHealthScore")) out.financialHealthScore = r.scores.financialHealth;
    if (wanted.has("reputationScore")) out.reputationScore = r.scores.reputation;
    if (wanted.has("incomeLabel")) out.incomeLabel = r.incomeLabel;
    if (wanted.has("loanRange")) out.loanRange = { minUsd: unitsToUsd(r.loan.minUnits), maxUsd: unitsToUsd(r.loan.maxUnits), confidence: r.loan.confidence, currency: "USD" };
    if (wanted.has("summary")) out.summary = summaryOf(a.facts.address, r);
    if (wanted.has("attestation")) {
      const report = validReport(reports ?? [], a.asOf.timestamp);
      out.attestation = report && {
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
    if (wanted.has("walletData")) out.walletData = await walletData(db, target, a);
    return c.json(out);
  });
}
