import type { RouteHandler } from "@hono/zod-openapi";
import type { PublicClient } from "viem";
import type { IndexTarget } from "../../config/target.ts";
import type { IndexDb } from "../db.ts";
import { declareRoute } from "../http/declare.ts";
import type { AppEnv } from "../http/env.ts";
import { withTimeout } from "../http/timeout.ts";
import { isoFromSeconds as iso, unitsToUsd } from "../money.ts";
import { indexedHead, indexedTotals } from "./queries.ts";
import { type Stats, statsSchema } from "./schema.ts";

export const statsRoute = declareRoute("stats", {
  method: "get",
  path: "/api/stats",
  tags: ["Service"],
  summary: "What the indexer holds and how far behind it is",
  description: "Wallets and transfers indexed, per-token volume, the latest indexed block, the chain head and the lag. Free.",
  ok: statsSchema,
});

export type StatsDeps = {
  db: IndexDb;
  target: Pick<IndexTarget, "network" | "tokens" | "tracked" | "schema" | "reporters">;
  /** Reads the chain head; only the stats route talks to the RPC, never a screening path. */
  chain?: Pick<PublicClient, "getBlock">;
};

async function chainHead(chain: StatsDeps["chain"]) {
  if (!chain) return null;
  try {
    const block = await withTimeout(chain.getBlock({ blockTag: "latest" }), 2_000);
    return { number: block.number, timestamp: block.timestamp };
  } catch {
    return null;
  }
}

export function statsHandler({ db, target, chain }: StatsDeps): RouteHandler<typeof statsRoute, AppEnv> {
  return async (c) => {
    // Sequential on purpose: PGlite is a single connection.
    const totals = await indexedTotals(db);
    const indexed = await indexedHead(db, target.schema);
    const head = await chainHead(chain);
    const payments = await c.var.payments.ledger.outcomeCounts().catch(() => null);
    const stats: Stats = {
      network: target.network,
      chainId: 42220,
      indexing: { mode: target.tracked ? "tracked" : "all", trackedWallets: target.tracked?.size ?? null },
      wallets: totals.wallets,
      transfers: totals.transfers.reduce((n, t) => n + t.count, 0),
      tokens: target.tokens.map((token) => {
        const row = totals.transfers.find((t) => t.token === token.address);
        return { symbol: token.symbol, address: token.address, transfers: row?.count ?? 0, volumeUsd: unitsToUsd(row?.volume ?? 0n, token.decimals) };
      }),
      latestIndexedBlock: indexed && { number: Number(indexed.blockNumber), timestamp: Number(indexed.timestamp), time: iso(indexed.timestamp) },
      chainHead: head && { number: Number(head.number), timestamp: Number(head.timestamp), time: iso(head.timestamp) },
      lag:
        indexed && head
          ? {
              blocks: Math.max(0, Number(head.number - indexed.blockNumber)),
              seconds: Math.max(0, Number(head.timestamp - indexed.timestamp)),
            }
          : null,
      payments,
      generatedAt: new Date().toISOString(),
    };
    return c.json(statsSchema.parse(stats), 200);
  };
}
