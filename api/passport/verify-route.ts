import type { RouteHandler } from "@hono/zod-openapi";
import type { Context, MiddlewareHandler } from "hono";
import { readEnv } from "../../config/env.ts";
import type { IndexTarget } from "../../config/target.ts";
import { errorBodySchema } from "../../shared/errors.ts";
import type { IndexDb } from "../db.ts";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute } from "../http/declare.ts";
import { rateLimit } from "../http/rate-limit.ts";
import type { IpfsNode } from "../ipfs/node.ts";
import type { WalletAssessor } from "../wallet/assess.ts";
import { type HistoryPoint, scoreHistory } from "../wallet/history.ts";
import { badgeSvg, passportPage } from "./page.ts";
import { parsePassportId } from "./passport-id.ts";
import type { ReporterClient } from "./reporter.ts";
import { type VerifyResult, verifyParams, verifyResultSchema } from "./schema.ts";
import { notFound, verifyPassport } from "./verify.ts";

/** Verify, its page and its badge share one per-client limit (VERIFY_RATE_LIMIT_PER_MINUTE, default 60). */
let limiter: ReturnType<typeof rateLimit> | undefined;
const verifyRateLimit: MiddlewareHandler = (c, next) =>
  (limiter ??= rateLimit(readEnv().VERIFY_RATE_LIMIT_PER_MINUTE))(c, next);

export const verifyRoute = declareRoute("verify", {
  method: "get",
  path: "/api/agent/verify/{id}",
  tags: ["Agent"],
  summary: "Verify a passport",
  description:
    "Free. `{id}` is a REP- id, the report's IPFS CID, or a 0x hash (the document's sha256, a reportHash, or keccak256 of the id). The answer comes from the indexed attestation rows (never from a record of what this service issued): status confirmed | pending (on chain, not indexed yet) | revoked | expired (against the latest indexed block's time) | superseded | tampered (the pinned content does not hash to the CID, or its wallet and scores differ from the attestation) | not_found (404). `valid` is true only for confirmed. A browser (Accept: text/html) gets the same answer as a page; `/api/agent/verify/{id}/badge.svg` is a badge to embed. Limited per client: 429 `rate_limited` with Retry-After.",
  request: { params: verifyParams },
  ok: verifyResultSchema,
  errors: { 400: ["invalid_report_id"] },
  middleware: [verifyRateLimit],
  alsoAnswers: {
    404: {
      description: "No passport under this id: the same answer, with status not_found",
      schema: verifyResultSchema,
    },
    429: {
      description: "Too many verifications from this client (rate_limited); Retry-After says when to retry",
      schema: errorBodySchema,
    },
  },
});

export type VerifyDeps = {
  db: IndexDb;
  target: Pick<IndexTarget, "schema" | "reporters">;
  ipfs: Promise<IpfsNode>;
  reporter?: ReporterClient;
  assessor: WalletAssessor;
};

async function judge(deps: VerifyDeps, c: Context, id: string): Promise<VerifyResult> {
  const lookup = parsePassportId(id);
  // Only the badge gets here unvalidated: a non-id is its "not found".
  if (!lookup) return notFound(id, `"${id}" is not a REP- id, a CID or a 0x hash.`);
  return verifyPassport({ ...deps, baseUrl: origin(c) }, id, lookup);
}

const origin = (c: Context) => new URL(c.req.url).origin;
const wantsHtml = (c: Context) => /text\/html/i.test(c.req.header("accept") ?? "");

/** GET /api/agent/verify/{id}: JSON to API clients, the page to browsers. */
export function verifyHandler(deps: VerifyDeps): RouteHandler<typeof verifyRoute, AppEnv> {
  return async (c) => {
    const { id } = c.req.valid("param");
    const result = await judge(deps, c, id);
    const status = result.status === "not_found" ? 404 : 200;
    c.header("Vary", "Accept");
    c.header("Cache-Control", "no-store");
    if (wantsHtml(c)) {
      let history: HistoryPoint[] = [];
      if (result.walletAddress) {
        try {
          history = await scoreHistory(deps.db, deps.target, await deps.assessor.assess(result.walletAddress as never));
        } catch {
          // a wallet outside the index (tracked mode): the page goes without its chart
        }
      }
      return c.html(passportPage(result, history), status) as never;
    }
    // Built to its type by verifyPassport (the document in it already parsed): sent as it is, not parsed again.
    return status === 404 ? c.json(result, 404) : c.json(result, 200);
  };
}

export const BADGE_PATH = "/api/agent/verify/:id/badge.svg";

/** GET /api/agent/verify/{id}/badge.svg: the status as a small SVG to embed (same limit as verify). */
export function badgeHandler(deps: VerifyDeps): MiddlewareHandler<AppEnv> {
  return async (c) => {
    let allowed = false;
    const refused = await verifyRateLimit(c, async () => void (allowed = true));
    if (!allowed) return refused as Response;
    const id = c.req.param("id") ?? "";
    const result = await judge(deps, c, id);
    return c.body(badgeSvg(result.status, result.reportId), result.status === "not_found" ? 404 : 200, {
      "content-type": "image/svg+xml; charset=utf-8",
      "cache-control": "no-store",
    });
  };
}
