import type { IndexDb } from "../../api/db.ts";
import { openIndexDb } from "../../harness/index-db.ts";
import type { DatabaseSlot } from "./indexer.ts";

/**
 * The API's read path over the slot's indexed tables for the length of `fn` (harness/index-db.ts,
 * as bench:screen opens it). PGlite admits one process: stop the slot's indexer first.
 */
export async function withIndexDb<T>(slot: DatabaseSlot, fn: (db: IndexDb) => Promise<T>): Promise<T> {
  const { db, close } = await openIndexDb(slot);
  try {
    return await fn(db);
  } finally {
    await close();
  }
}
