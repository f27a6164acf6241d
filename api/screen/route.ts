import { type Handler, Hono } from "hono";
import type { IndexTarget } from "../../config/target.ts";
import type { IndexDb } from "../db.ts";
import { type InputEnv, jsonInput } from "../http/validate.ts";
import { x402Billing } from "../payments/billing.ts";
import { paid, type PaidEnv, type PaymentDeps } from "../payments/guard.ts";
import type { WalletAssessor } from "../wallet/assess.ts";
import { recentReports, validReport } from "../wallet/queries.ts";
import { toLenderScreenResult } from "./response.ts";
import { lenderScreenResultSchema, type ScreenRequest, screenRequestSchema } from "./schema.ts";

export type ScreenDeps = { db: IndexDb; target: Pick<IndexTarget, "tokens" | "reporters">; assessor: WalletAssessor; payments: PaymentDeps };

/** POST /api/lender/screen: the LenderScreenResult for a borrower's wallet, paid per call. */
export function screenRoutes({ db, target, assessor, payments }: ScreenDeps) {
  return new Hono<PaidEnv & InputEnv<ScreenRequest>>().post(
    "/screen",
    jsonInput(screenRequestSchema),
    assessor.indexedOnly(),
    paid("screen", payments),
    screenHandler({ db, target, assessor }),
  );
}

/** The screen itself, after validation and payment (exported so benchmarks can time it unpaid). */
export function screenHandler({ db, target, assessor }: Omit<ScreenDeps, "payments">): Handler<PaidEnv & InputEnv<ScreenRequest>> {
  return async (c) => {
    const { walletAddress } = c.get("input");
    // The passport lookup does not depend on the assessment: both run at once.
    const [assessment, reports] = await Promise.all([assessor.assess(walletAddress), recentReports(db, walletAddress)]);
    const report = validReport(reports, assessment.asOf.timestamp);
    const result = toLenderScreenResult(assessment, {
      target,
      baseUrl: new URL(c.req.url).origin,
      report,
      billing: x402Billing(c.get("billing")),
    });
    return c.json(lenderScreenResultSchema.parse(result));
  };
}
