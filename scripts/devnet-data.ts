import { existsSync, rmSync } from "node:fs";
import pg from "pg";
import { chainAnchor } from "../api/store/schema.ts";
import {
  openServiceStore,
  type ServiceDb,
  type ServiceStoreLocation,
  serviceStoreLocation,
} from "../api/store/store.ts";
import { StartupError } from "../config/errors.ts";
import type { IndexTarget } from "../config/target.ts";
import { DEVNET_CHAIN_ID } from "../devnet/anvil.ts";
import { rpc } from "../devnet/rpc.ts";

type Block = { number: `0x${string}`; hash: string };

/**
 * Prepares a devnet's data before Ponder starts. The index is always rebuilt from the chain: the
 * devnet is where handlers and schema change (Ponder then refuses the old schema), a killed
 * indexer leaves its schema locked, and a devnet re-indexes in seconds. The service store (the
 * payment ledger: answers already paid for) is kept while the chain is the one it was kept on, so
 * a restarted indexer still answers a paid retry with its stored answer. A new chain (or a store
 * that recorded none) resets everything: the old chain's payments and rows would be lies.
 * The IPFS directory is never touched: content is named by its hash.
 */
export async function prepareDevnetData(
  target: IndexTarget,
  databaseUrl: string | undefined,
): Promise<"same chain" | "new chain"> {
  if (target.network !== "devnet") throw new Error("only devnet data is ever reset");
  const rpcUrl = target.rpcUrls[0]!;
  const store = serviceStoreLocation(target.database);
  const head = await rpc<Block>(rpcUrl, "eth_getBlockByNumber", ["latest", false]);
  const anchor = await recordedAnchor(store);
  const atAnchor =
    anchor &&
    (await rpc<Block | null>(rpcUrl, "eth_getBlockByNumber", [`0x${BigInt(anchor.blockNumber).toString(16)}`, false]));
  const sameChain = anchor !== undefined && atAnchor?.hash === anchor.blockHash;
  if (sameChain) await resetIndex(target);
  else await resetAll(target, databaseUrl);
  const recorded = { blockNumber: BigInt(head.number).toString(), blockHash: head.hash, recordedAt: new Date() };
  await withStore(store, (db) =>
    db
      .insert(chainAnchor)
      .values({ chainId: DEVNET_CHAIN_ID, ...recorded })
      .onConflictDoUpdate({ target: chainAnchor.chainId, set: recorded }),
  );
  return sameChain ? "same chain" : "new chain";
}

async function withStore<T>(location: ServiceStoreLocation, fn: (db: ServiceDb) => Promise<T>): Promise<T> {
  const store = await openServiceStore(location);
  try {
    return await fn(store.db);
  } finally {
    await store.close();
  }
}

/** The block the store recorded, or undefined when there is no store yet (or one from before anchors). */
async function recordedAnchor(location: ServiceStoreLocation) {
  if (location.kind === "pglite" && !existsSync(location.directory)) return undefined;
  try {
    return (await withStore(location, (db) => db.select().from(chainAnchor)))[0];
  } catch (error) {
    if ((error as { code?: string }).code === "3D000") return undefined; // no devnet database yet
    throw new StartupError(`Cannot read the service store of the devnet (${(error as Error).message}).`);
  }
}

/** Drops the indexer's data only. PGlite: its directory (the store has its own). Postgres: every schema of the devnet database but the store's. */
async function resetIndex(target: IndexTarget): Promise<void> {
  if (target.database.kind === "pglite") return rmSync(target.database.directory, { recursive: true, force: true });
  const devnetDb = devnetDatabaseName(target.database.connectionString);
  await withClient(
    target.database.connectionString,
    `Cannot reset the index in the devnet database ${devnetDb}`,
    async (client) => {
      // An indexer still connected (a killed one may not be gone yet) would hold its tables' locks.
      await client.query(
        "select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()",
      );
      const { rows } = await client.query<{ name: string }>(
        "select nspname as name from pg_namespace where nspname not in ('service', 'public', 'information_schema') and nspname not like 'pg\\_%'",
      );
      for (const { name } of rows) await client.query(`drop schema "${name}" cascade`);
    },
  );
}

/** A new chain: the devnet's PGlite directories, or its whole `<name>_devnet` database, go. */
async function resetAll(target: IndexTarget, databaseUrl: string | undefined): Promise<void> {
  if (target.database.kind === "pglite") {
    rmSync(target.database.directory, { recursive: true, force: true });
    const store = serviceStoreLocation(target.database);
    if (store.kind === "pglite") rmSync(store.directory, { recursive: true, force: true });
    return;
  }
  const devnetDb = devnetDatabaseName(target.database.connectionString);
  await withClient(
    databaseUrl!,
    `Cannot prepare the devnet database ${devnetDb} next to DATABASE_URL`,
    async (client) => {
      await client.query(`drop database if exists "${devnetDb}" with (force)`);
      await client.query(`create database "${devnetDb}"`);
    },
  );
}

function devnetDatabaseName(connectionString: string): string {
  const name = decodeURIComponent(new URL(connectionString).pathname.slice(1));
  if (!name.endsWith("_devnet")) throw new Error(`refusing to reset ${name}: not a devnet database`);
  return name;
}

async function withClient(
  connectionString: string,
  failure: string,
  fn: (client: pg.Client) => Promise<void>,
): Promise<void> {
  const client = new pg.Client({ connectionString });
  try {
    await client.connect();
    await fn(client);
  } catch (error) {
    throw new StartupError(`${failure} (${(error as Error).message}).`);
  } finally {
    await client.end().catch(() => {});
  }
}
