import type { Address } from "../../config/addresses.ts";
import type { IndexTarget } from "../../config/target.ts";
import type { IndexDb } from "../db.ts";
import { type Billing, x402Billing } from "../payments/billing.ts";
import type { WalletAssessor } from "../wallet/assess.ts";
import { recentReportsOf, validReport } from "../wallet/queries.ts";
import { toLenderScreenResult } from "./response.ts";
import { type LenderScreenResult, lenderScreenResultSchema } from "./schema.ts";

export type ScreenDeps = { db: IndexDb; target: Pick<IndexTarget, "tokens" | "reporters">; assessor: WalletAssessor };

/**
 * The LenderScreenResult of each wallet, in the order given: the single screen (one wallet) and the
 * batch (each answerable wallet) are this one function. Every read covers all the wallets at once.
 * `baseUrl` prefixes the passport's verify link; `billing` is what each wallet's screen charged,
 * awaited once the reads are done (a read-only route's price may still be being taken meanwhile).
 */
export async function screenWallets(
  { db, target, assessor }: ScreenDeps,
  wallets: readonly Address[],
  call: { baseUrl: string; billing: Billing | Promise<Billing> },
): Promise<LenderScreenResult[]> {
  // The passport lookup does not depend on the assessment: both run at once.
  const [assessments, reports] = await Promise.all([assessor.assessMany(wallets), recentReportsOf(db, wallets)]);
  const billing = x402Billing(await call.billing);
  return assessments.map((assessment, i) => {
    const report = validReport(reports.get(wallets[i]!)!, assessment.asOf.timestamp);
    return lenderScreenResultSchema.parse(
      toLenderScreenResult(assessment, { target, baseUrl: call.baseUrl, report, billing }),
    );
  });
}
