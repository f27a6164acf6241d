import { count, sum } from "ponder";
import { account, transfer } from "../../ponder.schema.ts";
import { type IndexDb, queryPrepared } from "../db.ts";

export type IndexedTotals = {
  wallets: number;
  transfers: { token: string; count: number; volume: bigint }[];
};

export async function indexedTotals(db: IndexDb): Promise<IndexedTotals> {
  const [wallets] = await db.select({ n: count() }).from(account);
  const perToken = await db
    .select({ token: transfer.token, count: count(), volume: sum(transfer.value) })
    .from(transfer)
    .groupBy(transfer.token);
  return {
    wallets: wallets?.n ?? 0,
    transfers: perToken.map((r) => ({ token: r.token, count: r.count, volume: BigInt(r.volume ?? 0) })),
  };
}

/** The last block the indexer has fully processed, from Ponder's own checkpoint row. */
export type IndexedHead = { blockNumber: bigint; timestamp: bigint };

export async function indexedHead(db: IndexDb, schema: string): Promise<IndexedHead | null> {
  const [row] = await queryPrepared<{ latest_checkpoint: string }>(db, `head:${schema}`, `select latest_checkpoint from "${schema}"._ponder_checkpoint limit 1`, []);
  const checkpoint = row?.latest_checkpoint;
  if (!checkpoint) return null;
  // Ponder's checkpoint: 10 digits of block timestamp, 16 of chain id, 16 of block number, ...
  return { timestamp: BigInt(checkpoint.slice(0, 10)), blockNumber: BigInt(checkpoint.slice(26, 42)) };
}
