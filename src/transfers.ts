import type { Context } from "ponder:registry";
import { flow, received } from "ponder:schema";
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
 * Folds one transfer into the (from, to, token, month) flow row: the only aggregate written per
 * transfer. Per-wallet figures are views over these rows (ponder.schema.ts).
 */
export async function addToFlow(db: Context["db"], t: TransferFact): Promise<void> {
  await db
    .insert(flow)
    .values({ from: t.from, to: t.to, token: t.token, month: monthOf(t.timestamp), total: t.value, transfers: 1, firstAt: t.timestamp, lastAt: t.timestamp })
    .onConflictDoUpdate((row) => ({ total: row.total + t.value, transfers: row.transfers + 1, lastAt: t.timestamp }));
}

/** Adds one transfer to its recipient's lifetime total. */
export async function addToReceived(db: Context["db"], t: TransferFact): Promise<void> {
  await db
    .insert(received)
    .values({ address: t.to, total: t.value })
    .onConflictDoUpdate((row) => ({ total: row.total + t.value }));
}
