import type { Context } from "ponder:registry";
import { account, accountMonth, balance, counterparty } from "ponder:schema";
import type { Address } from "../config/addresses.ts";
import { monthOf } from "./month.ts";

export type TransferFact = {
  token: Address;
  from: Address;
  to: Address;
  value: bigint;
  blockNumber: bigint;
  timestamp: bigint;
};

type Side = {
  wallet: Address;
  other: Address;
  direction: "in" | "out";
};

/**
 * Folds one transfer into one wallet's aggregates (account, balance, counterparty, month). Called
 * once per indexed side of a transfer; a self-transfer is two sides of the same wallet.
 */
export async function applyTransferSide(db: Context["db"], t: TransferFact, side: Side): Promise<void> {
  const isIn = side.direction === "in";
  const inValue = isIn ? t.value : 0n;
  const outValue = isIn ? 0n : t.value;
  const inCount = isIn ? 1 : 0;
  const outCount = isIn ? 0 : 1;
  const month = monthOf(t.timestamp);

  await db
    .insert(account)
    .values({
      address: side.wallet,
      firstAt: t.timestamp,
      lastAt: t.timestamp,
      firstBlock: t.blockNumber,
      lastBlock: t.blockNumber,
      transfersIn: inCount,
      transfersOut: outCount,
    })
    .onConflictDoUpdate((row) => ({
      lastAt: t.timestamp,
      lastBlock: t.blockNumber,
      transfersIn: row.transfersIn + inCount,
      transfersOut: row.transfersOut + outCount,
    }));

  const balanceRow = await db
    .insert(balance)
    .values({
      address: side.wallet,
      token: t.token,
      balance: inValue - outValue,
      totalIn: inValue,
      totalOut: outValue,
      transfersIn: inCount,
      transfersOut: outCount,
      firstAt: t.timestamp,
      lastAt: t.timestamp,
    })
    .onConflictDoUpdate((row) => ({
      balance: row.balance + inValue - outValue,
      totalIn: row.totalIn + inValue,
      totalOut: row.totalOut + outValue,
      transfersIn: row.transfersIn + inCount,
      transfersOut: row.transfersOut + outCount,
      lastAt: t.timestamp,
    }));

  // The pair row as it was before this transfer tells whether the counterparty is new this month.
  // Copy the fields: Ponder's cache updates the row object it hands to the update function in place.
  let before: Pick<typeof counterparty.$inferSelect, "lastAt" | "lastInAt" | "lastOutAt"> | undefined;
  await db
    .insert(counterparty)
    .values({
      address: side.wallet,
      counterparty: side.other,
      token: t.token,
      totalIn: inValue,
      totalOut: outValue,
      transfersIn: inCount,
      transfersOut: outCount,
      firstAt: t.timestamp,
      lastAt: t.timestamp,
      firstInAt: isIn ? t.timestamp : null,
      lastInAt: isIn ? t.timestamp : null,
      firstOutAt: isIn ? null : t.timestamp,
      lastOutAt: isIn ? null : t.timestamp,
    })
    .onConflictDoUpdate((row) => {
      before = { lastAt: row.lastAt, lastInAt: row.lastInAt, lastOutAt: row.lastOutAt };
      return {
        totalIn: row.totalIn + inValue,
        totalOut: row.totalOut + outValue,
        transfersIn: row.transfersIn + inCount,
        transfersOut: row.transfersOut + outCount,
        lastAt: t.timestamp,
        ...(isIn
          ? { firstInAt: row.firstInAt ?? t.timestamp, lastInAt: t.timestamp }
          : { firstOutAt: row.firstOutAt ?? t.timestamp, lastOutAt: t.timestamp }),
      };
    });

  const seenThisMonth = (at: bigint | null | undefined) => at != null && monthOf(at) === month;
  const newCounterparty = seenThisMonth(before?.lastAt) ? 0 : 1;
  const newPayer = isIn && !seenThisMonth(before?.lastInAt) ? 1 : 0;
  const newPayee = !isIn && !seenThisMonth(before?.lastOutAt) ? 1 : 0;

  await db
    .insert(accountMonth)
    .values({
      address: side.wallet,
      token: t.token,
      month,
      inflow: inValue,
      outflow: outValue,
      transfersIn: inCount,
      transfersOut: outCount,
      counterparties: newCounterparty,
      payers: newPayer,
      payees: newPayee,
      closingBalance: balanceRow.balance,
    })
    .onConflictDoUpdate((row) => ({
      inflow: row.inflow + inValue,
      outflow: row.outflow + outValue,
      transfersIn: row.transfersIn + inCount,
      transfersOut: row.transfersOut + outCount,
      counterparties: row.counterparties + newCounterparty,
      payers: row.payers + newPayer,
      payees: row.payees + newPayee,
      closingBalance: balanceRow.balance,
    }));
}
