import { desc, eq, sql } from "drizzle-orm";
import { type StatementRecord, statement } from "../store/schema.ts";
import type { ServiceDb } from "../store/store.ts";

export type NewStatementRecord = Omit<StatementRecord, "createdAt">;

/** Records a statement made; the same statement made again (same CID) is dated anew. */
export async function recordStatement(store: ServiceDb, record: NewStatementRecord): Promise<void> {
  await store
    .insert(statement)
    .values(record)
    .onConflictDoUpdate({ target: statement.cid, set: { createdAt: sql`now()` } });
}

/** The wallet's latest statement, or undefined. */
export async function latestStatement(store: ServiceDb, wallet: string): Promise<StatementRecord | undefined> {
  const [row] = await store
    .select()
    .from(statement)
    .where(eq(statement.wallet, wallet))
    .orderBy(desc(statement.createdAt))
    .limit(1);
  return row;
}

/** The `statement` signal's value: what the wallet's latest statement is and when it was made. */
export function statementSignal(row: StatementRecord | undefined) {
  if (!row) return null;
  return {
    cid: row.cid,
    csvCid: row.csvCid,
    period: row.period,
    from: row.fromAt.toISOString(),
    to: row.toAt.toISOString(),
    block: Number(row.block),
    transfers: row.transfers,
    createdAt: row.createdAt.toISOString(),
    url: `/ipfs/${row.cid}`,
    csvUrl: `/ipfs/${row.csvCid}`,
  };
}
