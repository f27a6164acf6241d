import type { RouteHandler } from "@hono/zod-openapi";
import type { Context } from "hono";
import { and, eq } from "ponder";
import type { Address } from "../../config/addresses.ts";
import type { IndexTarget } from "../../config/target.ts";
import { report } from "../../ponder.schema.ts";
import type { IndexDb } from "../db.ts";
import { declareRoute, jsonBody } from "../http/declare.ts";
import type { AppEnv } from "../http/env.ts";
import { ApiError } from "../http/errors.ts";
import { pinContent } from "../ipfs/content.ts";
import type { IpfsNode } from "../ipfs/node.ts";
import { isoFromSeconds as iso } from "../money.ts";
import { x402Billing } from "../payments/billing.ts";
import type { Claim, PaymentCore } from "../payments/core.ts";
import type { ServiceDb } from "../store/store.ts";
import { walletRequest } from "../payments/middleware.ts";
import type { WalletAssessor } from "../wallet/assess.ts";
import { indexedWallet } from "../wallet/indexed.ts";
import { canonicalBytes, drawReportId, passportDocument } from "./document.ts";
import { PublishError, type ReporterClient } from "./reporter.ts";
import { type ReportResult, reportRequestSchema, reportResultSchema } from "./schema.ts";
import { contentHashOf } from "./verify.ts";

/** The reason written on chain when a published passport's payment did not settle. */
export const UNPAID_REASON = "payment not settled";

/** Passports this process published and whose payment is being settled: what to undo if it is not. */
const published = new WeakMap<Context, { reportId: string; reporter: ReporterClient }>();

/**
 * Settlement refused after the passport was published: revoke it on chain, then the refusal is the
 * answer. When the outcome is unknown (settlement_pending), watch the ledger row and revoke if it
 * ends unpaid (the retry with the same payment gets the stored passport answer if it settles).
 */
async function revokeUnpaid(c: Context, { reply, claim, core }: { reply: { body: string }; claim: Claim; core: PaymentCore }) {
  const passport = published.get(c);
  if (!passport) return;
  const code = codeOf(reply.body);
  if (code === "settlement_pending") return void watchSettlement(core, claim, passport);
  await passport.reporter.exclusive(() => passport.reporter.revoke(passport.reportId, UNPAID_REASON));
  console.warn(`[passport] ${passport.reportId} revoked: its payment was not settled (${code})`);
}

function watchSettlement(core: PaymentCore, claim: Claim, passport: { reportId: string; reporter: ReporterClient }) {
  const deadline = Date.now() + 30 * 60_000;
  const tick = async () => {
    const row = await core.ledger.find(claim.key).catch(() => undefined);
    if (row && ["failed", "expired", "used_elsewhere"].includes(row.status)) {
      await passport.reporter.exclusive(() => passport.reporter.revoke(passport.reportId, UNPAID_REASON)).catch((e: Error) => console.error(`[passport] revoking ${passport.reportId}: ${e.message}`));
      return;
    }
    if (row?.status === "settled" || Date.now() > deadline) return;
    setTimeout(tick, 5_000).unref();
  };
  setTimeout(tick, 5_000).unref();
}

const codeOf = (body: string): string | undefined => {
  try {
    const parsed = JSON.parse(body);
    return parsed.code ?? parsed.error?.code;
  } catch {
    return undefined;
  }
};

export const reportRoute = declareRoute("report", {
  method: "post",
  path: "/api/agent/report",
  tags: ["Agent"],
  summary: "Issue a passport attested on chain",
  description:
    "Scores the wallet, pins the report document (RFC 8785 canonical JSON) in the service's IPFS node and attests its CID on the reporter contract (with its expiry and the link to the wallet's previous valid passport, which it supersedes). Money order: verify and claim the payment -> publish and wait for the receipt -> settle -> answer. A failed publication settles nothing; a settlement that fails after publishing revokes the passport on chain (reason \"payment not settled\") and the answer is the refusal.",
  request: { body: jsonBody(reportRequestSchema, "The wallet, the paying wallet when it differs, and the passport's lifetime in days") },
  ok: reportResultSchema,
  errors: { 404: ["wallet_not_indexed"], 503: ["passport_publish_failed", "reporter_unavailable", "ipfs_unavailable"] },
  middleware: [indexedWallet],
  payment: { ...walletRequest, onSettlementFailed: revokeUnpaid },
});

export type ReportDeps = {
  db: IndexDb;
  target: Pick<IndexTarget, "schema">;
  assessor: WalletAssessor;
  ipfs: Promise<IpfsNode>;
  reporter?: ReporterClient;
  /** The service store: the document's media type is recorded there, so GET /ipfs/{cid} serves it as JSON. */
  store?: Promise<ServiceDb>;
};

/** POST /api/agent/report, after validation and payment (verified and claimed, not settled yet). */
export function reportHandler({ db, assessor, ipfs, reporter, store }: ReportDeps): RouteHandler<typeof reportRoute, AppEnv> {
  return async (c) => {
    const body = c.req.valid("json");
    if (!reporter?.contract || !reporter.reporterAccount) throw new ApiError(503, "reporter_unavailable", "This service has no reporter configured (REPORTER_ADDRESS and REPORTER_PRIVATE_KEY): no passport can be issued; nothing was charged.");
    const billing = c.var.billing;
    const buyer = (billing?.payer ?? body.callerAddress ?? body.walletAddress).toLowerCase() as Address;
    const assessment = await assessor.assess(body.walletAddress);
    let node: IpfsNode;
    try {
      node = await ipfs;
    } catch (error) {
      throw new ApiError(503, "ipfs_unavailable", `The IPFS node is unavailable (${(error as Error).message}); nothing was charged.`);
    }

    // One publication at a time: the supersede link and the id are read from the chain just before sending.
    const issued = await reporter.exclusive(async () => {
      let reportId = "";
      let cid = "";
      try {
        const issuedAt = Math.max(await reporter.chainTime(), Math.floor(Date.now() / 1000));
        const expiresAt = issuedAt + body.expiresInDays * 86_400;
        const supersedes = await reporter.previousValid(assessment.facts.address, issuedAt);
        for (let draw = 0; ; draw++) {
          reportId = drawReportId();
          if (!(await reporter.exists(reportId))) break;
          if (draw > 8) throw new PublishError("could not draw a free report id", false);
        }
        const document = passportDocument(assessment, { reportId, buyer, issuedAt, expiresAt, supersedes, contract: reporter.contract!, chainId: reporter.chainId });
        try {
          const bytes = canonicalBytes(document);
          cid = store ? await pinContent(node, await store, bytes, "application/json") : await node.add(bytes);
        } catch (error) {
          throw new ApiError(503, "ipfs_unavailable", `The document could not be pinned (${(error as Error).message}); nothing was charged.`);
        }
        const tx = await reporter.publish({
          wallet: assessment.facts.address,
          buyer,
          reputationScore: document.scores.reputation,
          financialHealthScore: document.scores.financialHealth,
          loanCapacity: document.loanCapacity.attested,
          reportId,
          reportHash: cid,
          expiresAt: BigInt(expiresAt),
          supersedes: supersedes ?? "",
        });
        return { reportId, cid, document, tx };
      } catch (error) {
        if (error instanceof ApiError) throw error;
        const e = error as PublishError;
        // Sent but no receipt: if it is mined after all, it is revoked (it was never paid for).
        if (e.sent) reporter.revokeIfMined(e.sent, reportId, UNPAID_REASON);
        throw new ApiError(503, "passport_publish_failed", `The passport could not be published (${e.message}); nothing was charged.`, { reason: e.message });
      }
    });

    // Published: from here a failure must not leave a passport standing unpaid.
    try {
      published.set(c, { reportId: issued.reportId, reporter });
      const { document, tx } = issued;
      const [indexed] = await db
        .select({ reportId: report.reportId })
        .from(report)
        .where(and(eq(report.reporter, reporter.contract), eq(report.reportId, issued.reportId)))
        .limit(1);
      const result: ReportResult = {
        reportId: issued.reportId,
        walletAddress: document.walletAddress,
        buyer,
        scores: document.scores,
        loanCapacity: { minUsd: document.loanCapacity.minUsd, maxUsd: document.loanCapacity.maxUsd, confidence: document.loanCapacity.confidence, currency: "USD", attested: document.loanCapacity.attested },
        modelVersion: document.modelVersion,
        dataAsOf: document.dataAsOf,
        reportHash: issued.cid,
        ipfsCid: issued.cid,
        contentHash: contentHashOf(issued.cid)!,
        attestation: { contract: reporter.contract, chainId: reporter.chainId, transaction: tx.transaction, block: tx.block, status: indexed ? "confirmed" : "pending", publishedAt: iso(tx.publishedAt) },
        verifyUrl: `${new URL(c.req.url).origin}/api/agent/verify/${issued.reportId}`,
        issuedAt: document.issuedAt,
        expiresAt: document.expiresAt,
        supersedes: document.supersedes,
        x402Billing: x402Billing(billing),
      };
      return c.json(reportResultSchema.parse(result), 200);
    } catch (error) {
      await reporter.exclusive(() => reporter.revoke(issued.reportId, UNPAID_REASON)).catch(() => undefined);
      throw error;
    }
  };
}
