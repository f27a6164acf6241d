import pg from "pg";
import { openServiceStore } from "../api/store/store.ts";
import { startTestDevnet } from "./devnet.ts";
import { databaseSlot, POSTGRES_URL, startIndexer } from "./indexer.ts";

/**
 * What the payment benchmarks run on: a seeded devnet indexed into a Postgres database of its own,
 * a pool on the indexed schema, and the service store. `stop` undoes all of it (call it in a finally).
 */
export async function indexedPostgresDevnet(wallets: number) {
  const devnet = await startTestDevnet({ wallets, months: 13, slotHours: 24 });
  const slot = databaseSlot("postgres");
  await slot.prepare();
  const indexer = await startIndexer({ DEVNET_MANIFEST: devnet.manifestPath, ...slot.env });
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${slot.schema}_devnet`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 8, options: `-c search_path="${slot.schema}"` });
  pool.on("error", () => {});
  const store = await openServiceStore(slot.store);
  const stop = async () => {
    await store.close();
    await pool.end().catch(() => {});
    await indexer.stop();
    await slot.drop();
    await devnet.stop();
  };
  return { devnet, slot, indexer, pool, store, stop };
}
