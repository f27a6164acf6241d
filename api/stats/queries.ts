import { count, sql, sum } from "ponder";
import { account, transfer } from "../../ponder.schema.ts";
import type { IndexDb } from "../db.ts";

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
export async function indexedHead(db: IndexDb, schema: string): Promise<{ blockNumber: bigint; timestamp: bigint } | null> {
  const result = await db.execute(sql`select latest_checkpoint from ${sql.identifier(schema)}._ponder_checkpoint limit 1`);
  const checkpoint = (result.rows[0] as { latest_checkpoint?: string } | undefined)?.latest_checkpoint;
  if (!checkpoint) return null;
  // Ponder's checkpoint: 10 digits of block timestamp, 16 of chain id, 16 of block number, ...
  return { timestamp: BigInt(checkpoint.slice(0, 10)), blockNumber: BigInt(checkpoint.slice(26, 42)) };
}
