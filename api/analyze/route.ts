import type { RouteHandler } from "@hono/zod-openapi";
import type { IndexTarget } from "../../config/target.ts";
import type { IndexDb } from "../db.ts";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute, jsonBody } from "../http/declare.ts";
import { walletRead } from "../http/payment.ts";
import { isoFromSeconds as iso, unitsToUsd } from "../money.ts";
import { x402Billing } from "../payments/billing.ts";
import type { WalletAssessor } from "../wallet/assess.ts";
import { attestationOf } from "../wallet/attestation.ts";
import { indexedWallet } from "../wallet/indexed.ts";
import { recentReports, validReport } from "../wallet/queries.ts";
import { walletData } from "../wallet/wallet-data.ts";
import {
  ANALYZE_FIELDS,
  type AnalyzeField,
  type AnalyzeResult,
  analyzeRequestSchema,
  analyzeResultSchema,
} from "./schema.ts";
import { summaryOf } from "./summary.ts";

export const analyzeRoute = declareRoute("analyze", {
  method: "post",
  path: "/api/agent/analyze",
  tags: ["Agent"],
  summary: "Analyse a wallet",
  description: `Scores, income label, loan range, a summary, the attestation and walletData. \`fields\` narrows the answer to: ${ANALYZE_FIELDS.join(", ")}.`,
  request: {
    body: jsonBody(
      analyzeRequestSchema,
      "The wallet, the paying wallet when it differs, and optionally the fields wanted",
    ),
  },
  ok: analyzeResultSchema,
  errors: { 400: ["unknown_field"], 404: ["wallet_not_indexed"] },
  middleware: [indexedWallet],
  payment: walletRead,
  ownWalletFree: true,
});

export type AnalyzeDeps = { db: IndexDb; target: Pick<IndexTarget, "tokens">; assessor: WalletAssessor };

/** POST /api/agent/analyze, after validation and payment. */
export function analyzeHandler({ db, target, assessor }: AnalyzeDeps): RouteHandler<typeof analyzeRoute, AppEnv> {
  return async (c) => {
    const body = c.req.valid("json");
    const wanted = new Set<AnalyzeField>(body.fields ?? ANALYZE_FIELDS);
    const [a, reports] = await Promise.all([
      assessor.assess(body.walletAddress),
      wanted.has("attestation") ? recentReports(db, body.walletAddress) : null,
    ]);
    const r = a.result;
    const out: AnalyzeResult = {
      walletAddress: a.facts.address,
      modelVersion: r.modelVersion,
      dataAsOf: { block: a.asOf.block, time: iso(a.asOf.timestamp) },
      cached: a.cached,
      x402Billing: x402Billing(await c.var.billing),
    };
    if (wanted.has("financialHealthScore")) out.financialHealthScore = r.scores.financialHealth;
    if (wanted.has("reputationScore")) out.reputationScore = r.scores.reputation;
    if (wanted.has("incomeLabel")) out.incomeLabel = r.incomeLabel;
    if (wanted.has("loanRange"))
      out.loanRange = {
        minUsd: unitsToUsd(r.loan.minUnits),
        maxUsd: unitsToUsd(r.loan.maxUnits),
        confidence: r.loan.confidence,
        currency: "USD",
      };
    if (wanted.has("summary")) out.summary = summaryOf(a.facts.address, r);
    if (wanted.has("attestation")) {
      const report = validReport(reports ?? [], a.asOf.timestamp);
      out.attestation = report && attestationOf(report);
    }
    if (wanted.has("walletData")) out.walletData = await walletData(db, target, a);
    return c.json(out, 200);
  };
}
