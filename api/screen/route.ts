import type { RouteHandler } from "@hono/zod-openapi";
import type { IndexTarget } from "../../config/target.ts";
import type { IndexDb } from "../db.ts";
import { declareRoute, jsonBody } from "../http/declare.ts";
import type { AppEnv } from "../http/env.ts";
import { x402Billing } from "../payments/billing.ts";
import type { WalletAssessor } from "../wallet/assess.ts";
import { indexedWallet } from "../wallet/indexed.ts";
import { recentReports, validReport } from "../wallet/queries.ts";
import { toLenderScreenResult } from "./response.ts";
import { lenderScreenResultSchema, screenRequestSchema } from "./schema.ts";

export const screenRoute = declareRoute("screen", {
  method: "post",
  path: "/api/lender/screen",
  tags: ["Lender"],
  summary: "Screen a borrower's wallet",
  description: "The LenderScreenResult of the service interface: trust, scores, income, loan capacity and passport status, from the indexed chain.",
  request: { body: jsonBody(screenRequestSchema, "The borrower's wallet, and the paying lender's when it differs") },
  ok: lenderScreenResultSchema,
  errors: { 404: ["wallet_not_indexed"] },
  middleware: [indexedWallet],
});

export type ScreenDeps = { db: IndexDb; target: Pick<IndexTarget, "tokens" | "reporters">; assessor: WalletAssessor };

/** The screen itself, after validation and payment (exported so benchmarks can time it unpaid). */
export function screenHandler({ db, target, assessor }: ScreenDeps): RouteHandler<typeof screenRoute, AppEnv> {
  return async (c) => {
    const { walletAddress } = c.req.valid("json");
    // The passport lookup does not depend on the assessment: both run at once.
    const [assessment, reports] = await Promise.all([assessor.assess(walletAddress), recentReports(db, walletAddress)]);
    const report = validReport(reports, assessment.asOf.timestamp);
    const result = toLenderScreenResult(assessment, {
      target,
      baseUrl: new URL(c.req.url).origin,
      report,
      billing: x402Billing(c.var.billing),
    });
    return c.json(lenderScreenResultSchema.parse(result), 200);
  };
}
