import { indexTotal } from "../../ponder.schema.ts";
import { type IndexDb, queryPrepared } from "../db.ts";
import { DAY } from "../scoring/facts.ts";

export type IndexedTotals = {
  wallets: number;
  transfers: { token: string; count: number; volume: bigint }[];
};

/**
 * The totals the transfer handler keeps in `index_total` (a handful of rows): no aggregation over
 * the transfers or the per-wallet views, so this costs the same on a 6.4M-transfer chain.
 */
export async function indexedTotals(db: IndexDb): Promise<IndexedTotals> {
  const rows = await db.select().from(indexTotal);
  const wallets = rows.find((r) => r.key === "wallets");
  return {
    wallets: Number(wallets?.count ?? 0n),
    transfers: rows
      .filter((r) => r.key.startsWith("transfers:"))
      .map((r) => ({ token: r.key.slice("transfers:".length), count: Number(r.count), volume: BigInt(r.volume) })),
  };
}

/** The last block the indexer has fully processed, from Ponder's own checkpoint row. */
export type IndexedHead = { blockNumber: bigint; timestamp: bigint };

export async function indexedHead(db: IndexDb, schema: string): Promise<IndexedHead | null> {
  const [row] = await queryPrepared<{ latest_checkpoint: string }>(
    db,
    `head:${schema}`,
    `select latest_checkpoint from "${schema}"._ponder_checkpoint limit 1`,
    [],
  );
  return row?.latest_checkpoint ? decodeCheckpoint(row.latest_checkpoint) : null;
}

/** Ponder's checkpoint: 10 digits of block timestamp, 16 of chain id, 16 of block number, ... */
export const decodeCheckpoint = (checkpoint: string): IndexedHead => ({
  timestamp: BigInt(checkpoint.slice(0, 10)),
  blockNumber: BigInt(checkpoint.slice(26, 42)),
});

/** SQL for the start of a window of `days` (a parameter) before the indexed head's time, read from the checkpoint inside the statement. */
export const windowStart = (schema: string, days: string) =>
  `(select substr(latest_checkpoint, 1, 10)::numeric from "${schema}"._ponder_checkpoint limit 1) - ${days}::numeric * ${DAY}`;
