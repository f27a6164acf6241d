import type { Context } from "ponder:registry";
import { flow, indexTotal, received, walletSeen } from "ponder:schema";
import { zeroAddress } from "viem";
import type { Address } from "../config/addresses.ts";
import { monthOf } from "../shared/month.ts";

export type TransferFact = {
  token: Address;
  from: Address;
  to: Address;
  value: bigint;
  timestamp: bigint;
};

/**
 * Folds one transfer into the (from, to, token, day) flow row: the only aggregate written per
 * transfer. Per-wallet figures are views over these rows (ponder.schema.ts).
 *
 * `day` must stay exactly `block.timestamp / 86400n`, and `from`, `to`, `token` equal to the event's
 * fields: Ponder recognises those values in the key, so following the head it predicts the block's
 * flow rows and loads them in one query (node_modules/ponder/src/indexing-store/profile.ts) instead
 * of one lookup per transfer. `month` is not in the key: a UTC day lies in one UTC month.
 */
export async function addToFlow(db: Context["db"], t: TransferFact): Promise<void> {
  await db
    .insert(flow)
    .values({
      from: t.from,
      to: t.to,
      token: t.token,
      day: t.timestamp / 86400n,
      month: monthOf(t.timestamp),
      total: t.value,
      transfers: 1,
      firstAt: t.timestamp,
      lastAt: t.timestamp,
    })
    .onConflictDoUpdate((row) => ({ total: row.total + t.value, transfers: row.transfers + 1, lastAt: t.timestamp }));
}

/** Adds one transfer to its recipient's lifetime total. */
export async function addToReceived(db: Context["db"], t: TransferFact): Promise<void> {
  await db
    .insert(received)
    .values({ address: t.to, total: t.value })
    .onConflictDoUpdate((row) => ({ total: row.total + t.value }));
}

/**
 * Keeps the totals GET /api/stats reads: per token, transfers and volume; and the number of wallets
 * seen, counting each wallet (not the zero address; in tracked mode only tracked ones) once.
 */
export async function addToTotals(
  db: Context["db"],
  t: TransferFact,
  counts: (wallet: Address) => boolean,
): Promise<void> {
  await db
    .insert(indexTotal)
    .values({ key: `transfers:${t.token}`, count: 1n, volume: t.value })
    .onConflictDoUpdate((row) => ({ count: row.count + 1n, volume: row.volume + t.value }));
  let fresh = 0n;
  for (const wallet of new Set([t.from, t.to])) {
    if (wallet === zeroAddress || !counts(wallet)) continue;
    if (await db.insert(walletSeen).values({ address: wallet }).onConflictDoNothing()) fresh += 1n;
  }
  if (fresh > 0n)
    await db
      .insert(indexTotal)
      .values({ key: "wallets", count: fresh, volume: 0n })
      .onConflictDoUpdate((row) => ({ count: row.count + fresh }));
}
