import type { RouteHandler } from "@hono/zod-openapi";
import { readEnv } from "../../config/env.ts";
import type { IndexTarget } from "../../config/target.ts";
import { ApiError } from "../../shared/errors.ts";
import type { IndexDb } from "../db.ts";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute, jsonBody } from "../http/declare.ts";
import type { IpfsNode } from "../ipfs/node.ts";
import type { RemotePinning } from "../ipfs/remote-pinning.ts";
import { exactUsd, isoFromSeconds as iso } from "../money.ts";
import { x402Billing } from "../payments/billing.ts";
import type { ServiceDb } from "../store/store.ts";
import { indexedWallet } from "../wallet/indexed.ts";
import { IndexNotReady, STATEMENT_PERIODS } from "./data.ts";
import { makeStatement } from "./make.ts";
import { warmStatementPdf } from "./pdf.ts";
import { statementRequestSchema, statementResultSchema } from "./schema.ts";

export const statementRoute = declareRoute("statement", {
  method: "post",
  path: "/api/agent/statement",
  tags: ["Agent"],
  summary: "A wallet's transaction statement as a PDF pinned to IPFS",
  description:
    `The wallet's USDT and USDC transfers over ${STATEMENT_PERIODS.join(", ")} months (default 3M) counted back from the latest indexed block: ` +
    "a PDF (summary, month by month, every transfer; page numbers and how to verify on every page) and a CSV of the same rows, " +
    "both pinned on the service's IPFS node (and on the remote pinning service when configured) and served by GET /ipfs/{cid}. " +
    "The same data gives the same bytes, so the same CID.",
  request: { body: jsonBody(statementRequestSchema, "The wallet, and the period") },
  ok: statementResultSchema,
  errors: { 400: ["invalid_period"], 404: ["wallet_not_indexed"], 503: ["index_not_ready"] },
  middleware: [indexedWallet],
});

export type StatementRouteDeps = {
  db: IndexDb;
  target: Pick<IndexTarget, "schema" | "tokens">;
  ipfs: Promise<IpfsNode>;
  store?: Promise<ServiceDb>;
  /** Remote pinning; default from PINNING_SERVICE_URL / PINNING_SERVICE_TOKEN. */
  remotePinning?: RemotePinning | null;
  /** Render a made-up statement off the request path once the process is up; default from STATEMENT_WARMUP. */
  warmup?: boolean;
};

function remotePinningFromEnv(env = readEnv()): RemotePinning | undefined {
  return env.PINNING_SERVICE_URL ? { url: env.PINNING_SERVICE_URL, token: env.PINNING_SERVICE_TOKEN } : undefined;
}

export function statementHandler({
  db,
  target,
  ipfs,
  store,
  remotePinning,
  warmup = readEnv().STATEMENT_WARMUP === "on",
}: StatementRouteDeps): RouteHandler<typeof statementRoute, AppEnv> {
  const remote = remotePinning === undefined ? remotePinningFromEnv() : (remotePinning ?? undefined);
  // Off the request path, once per process: the first statement would otherwise run cold.
  if (warmup) setTimeout(() => void warmStatementPdf(), 1_000).unref();
  return async (c) => {
    const { walletAddress, period } = c.req.valid("json");
    if (!store) throw new Error("the statement route needs the service store");
    const made = await makeStatement(
      { db, target, ipfs: await ipfs, store: await store, remote },
      walletAddress,
      period,
    ).catch((error) => {
      if (error instanceof IndexNotReady)
        throw new ApiError(
          503,
          "index_not_ready",
          "Nothing is indexed yet: a statement needs the latest indexed block to count its period back from.",
        );
      throw error;
    });
    const { data } = made;
    const origin = new URL(c.req.url).origin;
    const sum = (f: (t: (typeof data.tokens)[number]) => bigint) => data.tokens.reduce((n, t) => n + f(t), 0n);
    const transfersIn = data.tokens.reduce((n, t) => n + t.transfersIn, 0);
    const result = {
      walletAddress,
      period: data.period,
      from: iso(data.from),
      to: iso(data.to),
      dataAsOf: { block: Number(data.asOf.block), time: iso(data.asOf.timestamp) },
      cid: made.pdf.cid,
      csvCid: made.csv.cid,
      size: made.pdf.size,
      sha256: made.pdf.sha256,
      csvSize: made.csv.size,
      csvSha256: made.csv.sha256,
      url: `${origin}/ipfs/${made.pdf.cid}`,
      csvUrl: `${origin}/ipfs/${made.csv.cid}`,
      transferCount: data.rows.length,
      transfersIn,
      transfersOut: data.rows.length - transfersIn,
      balances: data.tokens.map((t) => ({
        token: t.token.symbol,
        tokenAddress: t.token.address.toLowerCase(),
        openingUnits: t.opening.toString(),
        closingUnits: t.closing.toString(),
        inUnits: t.totalIn.toString(),
        outUnits: t.totalOut.toString(),
        netUnits: (t.totalIn - t.totalOut).toString(),
        openingUsd: exactUsd(t.opening, t.token.decimals),
        closingUsd: exactUsd(t.closing, t.token.decimals),
        transfersIn: t.transfersIn,
        transfersOut: t.transfersOut,
      })),
      totals: {
        openingUsd: exactUsd(sum((t) => t.opening)),
        closingUsd: exactUsd(sum((t) => t.closing)),
        inUsd: exactUsd(sum((t) => t.totalIn)),
        outUsd: exactUsd(sum((t) => t.totalOut)),
        netUsd: exactUsd(sum((t) => t.totalIn - t.totalOut)),
      },
      pinned: { local: true as const, ...(made.remote ? { remote: made.remote } : {}) },
      x402Billing: x402Billing(await c.var.billing),
    };
    return c.json(statementResultSchema.parse(result), 200);
  };
}
