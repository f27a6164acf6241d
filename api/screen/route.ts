import { Hono } from "hono";
import { CELO_NETWORK } from "../../config/celo.ts";
import type { IndexTarget } from "../../config/target.ts";
import type { IndexDb } from "../db.ts";
import { jsonBody } from "../http/validate.ts";
import type { WalletAssessor } from "../wallet/assess.ts";
import { latestValidReport } from "../wallet/queries.ts";
import { toLenderScreenResult } from "./response.ts";
import { lenderScreenResultSchema, screenRequestSchema } from "./schema.ts";

export type ScreenDeps = { db: IndexDb; target: Pick<IndexTarget, "tokens" | "reporters">; assessor: WalletAssessor };

/** POST /api/lender/screen: the LenderScreenResult for a borrower's wallet. */
export function screenRoutes({ db, target, assessor }: ScreenDeps) {
  return new Hono().post("/screen", async (c) => {
    const { walletAddress, callerAddress } = await jsonBody(c, screenRequestSchema);
    const assessment = await assessor.assess(walletAddress);
    const report = await latestValidReport(db, walletAddress, assessment.asOf.timestamp);
    const result = toLenderScreenResult(assessment, {
      target,
      baseUrl: new URL(c.req.url).origin,
      report,
      // Payments are not taken yet (x402 comes with the payments work): nothing was charged.
      billing: { chargedUsdt: "0.00", token: "none", chain: CELO_NETWORK, payer: callerAddress ?? walletAddress },
    });
    return c.json(lenderScreenResultSchema.parse(result));
  });
}
