import type { RouteHandler } from "@hono/zod-openapi";
import type { Context } from "hono";
import { and, eq } from "ponder";
import type { Address } from "../../config/addresses.ts";
import type { IndexTarget } from "../../config/target.ts";
import { report } from "../../ponder.schema.ts";
import { ApiError } from "../../shared/errors.ts";
import { log } from "../../shared/log.ts";
import type { IndexDb } from "../db.ts";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute, jsonBody, routeName } from "../http/declare.ts";
import { walletRequest } from "../http/payment.ts";
import { pinContent } from "../ipfs/content.ts";
import type { IpfsNode } from "../ipfs/node.ts";
import { isoFromSeconds as iso } from "../money.ts";
import { x402Billing } from "../payments/billing.ts";
import type { Resolution } from "../payments/ledger/ledger.ts";
import type { PaymentRow } from "../store/schema.ts";
import type { ServiceDb } from "../store/store.ts";
import type { WalletAssessor } from "../wallet/assess.ts";
import { indexedWallet } from "../wallet/indexed.ts";
import { canonicalBytes, drawReportId, passportDocument, REPORT_ID } from "./document.ts";
import { PublishError, type ReporterClient } from "./reporter.ts";
import { type ReportResult, reportRequestSchema, reportResultSchema } from "./schema.ts";
import { contentHashOf } from "./verify.ts";

/** The reason written on chain when a published passport's payment did not settle. */
export const UNPAID_REASON = "payment not settled";

/** Passports this process published and whose payment is being settled: what to undo if it is not. */
const published = new WeakMap<Context, { reportId: string; reporter: ReporterClient }>();

/**
 * The one rule: a passport whose payment did not settle is revoked on chain ("payment not settled").
 * Two ways lead here, both idempotent: the request's own refusal (below) and the payment
 * reconciler's verdict on an outcome that was unknown (`revokeUnpaidReports`), which survives a restart.
 */
async function revokeUnpaid(reporter: ReporterClient, reportId: string, why: string | undefined): Promise<void> {
  if (await reporter.revokeOnce(reportId, UNPAID_REASON))
    log.warn(`[passport] ${reportId} revoked: its payment was not settled (${why ?? "refused"})`);
}

/**
 * Settlement refused after the passport was published: revoke it, then the refusal is the answer.
 * An unknown outcome (settlement_pending) is left to the payment reconciler, which reads it from the
 * chain (at the next sweep, or when the payer retries) and calls `revokeUnpaidReports` if it is not settled.
 */
async function revokeRefused(c: Context, { reply }: { reply: { body: string } }) {
  const passport = published.get(c);
  const code = codeOf(reply.body);
  if (!passport || code === "settlement_pending") return;
  await revokeUnpaid(passport.reporter, passport.reportId, code);
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
  request: {
    body: jsonBody(
      reportRequestSchema,
      "The wallet, the paying wallet when it differs, and the passport's lifetime in days",
    ),
  },
  ok: reportResultSchema,
  errors: { 404: ["wallet_not_indexed"], 503: ["passport_publish_failed", "reporter_unavailable", "ipfs_unavailable"] },
  middleware: [indexedWallet],
  // A passport is an on-chain publication: never answered before it is paid, in either settlement mode.
  payment: { ...walletRequest, onSettlementFailed: revokeRefused, settleFirst: true },
});

/**
 * The payment reconciler's hook (PaymentDeps.onOutcome): a report payment whose outcome, read from
 * the chain, is not `settled` (failed, expired, used_elsewhere) revokes the passport its stored
 * answer names. Only rows that reached settlement have an answer: earlier ones published nothing
 * that stands (a failed handler revokes its own passport).
 */
export function revokeUnpaidReports(reporter: ReporterClient | undefined) {
  const name = routeName(reportRoute);
  return async (row: Pick<PaymentRow, "route" | "responseBody" | "reference">, outcome: Resolution): Promise<void> => {
    if (outcome.status === "settled" || row.route !== name || !reporter?.contract) return;
    const reportId = row.reference ?? reportIdOf(row.responseBody);
    if (reportId) await revokeUnpaid(reporter, reportId, `${outcome.status}: ${outcome.failure}`);
  };
}

const reportIdOf = (body: string | null): string | undefined => {
  try {
    const id = body && JSON.parse(body).reportId;
    return typeof id === "string" && REPORT_ID.test(id) ? id : undefined;
  } catch {
    return undefined;
  }
};

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
export function reportHandler({
  db,
  assessor,
  ipfs,
  reporter,
  store,
}: ReportDeps): RouteHandler<typeof reportRoute, AppEnv> {
  return async (c) => {
    const body = c.req.valid("json");
    if (!reporter?.contract || !reporter.reporterAccount)
      throw new ApiError(
        503,
        "reporter_unavailable",
        "This service has no reporter configured (REPORTER_ADDRESS and REPORTER_PRIVATE_KEY): no passport can be issued; nothing was charged.",
      );
    const billing = await c.var.billing;
    const buyer = (billing?.payer ?? body.callerAddress ?? body.walletAddress).toLowerCase() as Address;
    const assessment = await assessor.assess(body.walletAddress);
    let node: IpfsNode;
    try {
      node = await ipfs;
    } catch (error) {
      throw new ApiError(
        503,
        "ipfs_unavailable",
        `The IPFS node is unavailable (${(error as Error).message}); nothing was charged.`,
      );
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
        // Named in the ledger before it exists on chain: if the process dies before the answer is
        // stored, the reconciler still knows which passport an unpaid claim must revoke.
        await c.var.payments.reference(c.var.claim, reportId);
        const document = passportDocument(assessment, {
          reportId,
          buyer,
          issuedAt,
          expiresAt,
          supersedes,
          contract: reporter.contract!,
          chainId: reporter.chainId,
        });
        try {
          const bytes = canonicalBytes(document);
          cid = store ? await pinContent(node, await store, bytes, "application/json") : await node.add(bytes);
        } catch (error) {
          throw new ApiError(
            503,
            "ipfs_unavailable",
            `The document could not be pinned (${(error as Error).message}); nothing was charged.`,
          );
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
        throw new ApiError(
          503,
          "passport_publish_failed",
          `The passport could not be published (${e.message}); nothing was charged.`,
          { reason: e.message },
        );
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
        loanCapacity: {
          minUsd: document.loanCapacity.minUsd,
          maxUsd: document.loanCapacity.maxUsd,
          confidence: document.loanCapacity.confidence,
          currency: "USD",
          attested: document.loanCapacity.attested,
        },
        modelVersion: document.modelVersion,
        dataAsOf: document.dataAsOf,
        reportHash: issued.cid,
        ipfsCid: issued.cid,
        contentHash: contentHashOf(issued.cid)!,
        attestation: {
          contract: reporter.contract,
          chainId: reporter.chainId,
          transaction: tx.transaction,
          block: tx.block,
          status: indexed ? "confirmed" : "pending",
          publishedAt: iso(tx.publishedAt),
        },
        verifyUrl: `${new URL(c.req.url).origin}/api/agent/verify/${issued.reportId}`,
        issuedAt: document.issuedAt,
        expiresAt: document.expiresAt,
        supersedes: document.supersedes,
        x402Billing: x402Billing(billing),
      };
      return c.json(reportResultSchema.parse(result), 200);
    } catch (error) {
      await revokeUnpaid(reporter, issued.reportId, "the answer could not be made").catch(() => undefined);
      throw error;
    }
  };
}
