import type { RouteHandler } from "@hono/zod-openapi";
import type { IndexTarget } from "../../config/target.ts";
import { SlidingRate } from "../../shared/rate.ts";
import type { IndexDb } from "../db.ts";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute } from "../http/declare.ts";
import type { IndexState } from "../indexing/state.ts";
import { isoFromSeconds as iso, unitsToUsd } from "../money.ts";
import type { ServedTotals } from "../payments/ledger/ledger.ts";
import { indexedTotals } from "./queries.ts";
import { type Stats, statsSchema } from "./schema.ts";

export const statsRoute = declareRoute("stats", {
  method: "get",
  path: "/api/stats",
  tags: ["Service"],
  summary: "What the indexer holds and how far behind it is",
  description:
    "Where indexing stands (backfill done, current enough for paid routes, start block, blocks left, percent, speed in blocks and transfers a second, time left), wallets and transfers indexed, per-token volume, the latest indexed block, the chain head and the lag (from totals the indexer keeps: no aggregation over the transfers); payments by outcome, paid calls served by route, revenue per token and distinct payers (from the payment ledger, at most 2 s old). Cheap enough to poll every second. Free; limited per client (FREE_RATE_LIMIT_PER_MINUTE).",
  ok: statsSchema,
  rateLimited: true,
});

const ROUTE_GROUPS = {
  screens: ["POST /api/lender/screen"],
  analyses: ["POST /api/agent/analyze", "GET /api/wallet/{address}/analysis"],
  reports: ["POST /api/agent/report"],
  statements: ["POST /api/agent/statement"],
} as const;

/** How long the ledger's figures are reused: they are aggregates over the payment table, read at most this often per process. */
const LEDGER_STATS_TTL_MS = 2_000;

/**
 * `load()` shared: callers while it runs get its promise, and for `ttlMs` after it answered, its
 * answer. With a TTL of 0, concurrent callers share one call and nobody gets an old answer.
 */
function reuse<T>(ttlMs: number, load: () => Promise<T>): () => Promise<T> {
  let last: { done: number | null; value: Promise<T> } | undefined;
  return () => {
    if (!last || (last.done !== null && Date.now() - last.done > ttlMs)) {
      const entry: { done: number | null; value: Promise<T> } = { done: null, value: load() };
      entry.value.then(
        () => (entry.done = Date.now()),
        () => last === entry && (last = undefined),
      );
      last = entry;
    }
    return last.value;
  };
}

export type StatsDeps = {
  db: IndexDb;
  target: Pick<IndexTarget, "network" | "tokens" | "tracked" | "schema" | "reporters">;
  /** Where indexing stands: the indexed block from the database, the chain head shared by all callers. */
  index: IndexState;
};

export function statsHandler({ db, target, index }: StatsDeps): RouteHandler<typeof statsRoute, AppEnv> {
  let ledgerFigures: (() => Promise<[Stats["payments"], Stats["served"]]>) | undefined;
  // The backfill's speed in transfers, from the totals read by the calls of the last minute.
  const transferSpeed = new SlidingRate(60_000);
  const served = (totals: ServedTotals): Stats["served"] => {
    const calls = (routes: readonly string[]) =>
      totals.rows.filter((r) => routes.includes(r.route)).reduce((n, r) => n + r.calls, 0);
    const routes = [...new Set(totals.rows.map((r) => r.route))].sort();
    return {
      screens: calls(ROUTE_GROUPS.screens),
      analyses: calls(ROUTE_GROUPS.analyses),
      reports: calls(ROUTE_GROUPS.reports),
      statements: calls(ROUTE_GROUPS.statements),
      byRoute: routes.map((route) => ({
        route,
        calls: calls([route]),
        free: totals.rows.filter((r) => r.route === route && r.status === "waived").reduce((n, r) => n + r.calls, 0),
      })),
      revenue: target.tokens.map((token) => {
        const units = totals.rows
          .filter((r) => r.status === "settled" && r.token === token.address.toLowerCase())
          .reduce((n, r) => n + r.amount, 0n);
        return {
          symbol: token.symbol,
          address: token.address,
          units: units.toString(),
          usd: unitsToUsd(units, token.decimals),
        };
      }),
      payers: totals.payers,
    };
  };
  const build = async (): Promise<Stats> => {
    // Sequential on purpose: PGlite is a single connection, and the indexed block comes first, so
    // that the totals read after it include at least that block.
    const status = await index.status();
    const totals = await indexedTotals(db);
    const transfers = totals.transfers.reduce((n, t) => n + t.count, 0);
    transferSpeed.add(transfers);
    const transfersPerSecond = transferSpeed.perSecond();
    const { indexedBlock: indexed, headBlock: chainTip } = status;
    const [payments, servedFigures] = await ledgerFigures!();
    return {
      network: target.network,
      chainId: 42220,
      indexing: {
        mode: target.tracked ? "tracked" : "all",
        trackedWallets: target.tracked?.size ?? null,
        ...status,
        transfersPerSecond: transfersPerSecond === null ? null : Math.round(transfersPerSecond * 10) / 10,
      },
      wallets: totals.wallets,
      transfers,
      tokens: target.tokens.map((token) => {
        const row = totals.transfers.find((t) => t.token === token.address);
        return {
          symbol: token.symbol,
          address: token.address,
          transfers: row?.count ?? 0,
          volumeUsd: unitsToUsd(row?.volume ?? 0n, token.decimals),
        };
      }),
      latestIndexedBlock: indexed && { ...indexed, time: iso(indexed.timestamp) },
      chainHead: chainTip && { ...chainTip, time: iso(chainTip.timestamp) },
      lag:
        indexed && chainTip
          ? { blocks: status.lagBlocks!, seconds: Math.max(0, chainTip.timestamp - indexed.timestamp) }
          : null,
      payments,
      served: servedFigures,
      generatedAt: new Date().toISOString(),
    };
  };
  return async (c) => {
    const ledger = c.var.payments.ledger;
    ledgerFigures ??= reuse(LEDGER_STATS_TTL_MS, async () => [
      await ledger.outcomeCounts().catch(() => null),
      await ledger
        .servedTotals()
        .then(served)
        .catch(() => null),
    ]);
    return c.json(await build(), 200);
  };
}
