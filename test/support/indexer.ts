import { once } from "node:events";
import { inject } from "vitest";
import { type DatabaseSlot, databaseSlot as freshSlot, type Indexer, POSTGRES_URL } from "../../harness/indexer.ts";

// The harness is shared with the benchmarks (bench/ does not import from test/): harness/indexer.ts.
export * from "../../harness/indexer.ts";

/**
 * harness/indexer.ts's slot, whose databases start as copies of the run's templates
 * (test/support/slot-templates.ts): Ponder's sync tables and the service store already migrated,
 * and on PGlite no initdb. `migrated: false`: a store no migration has touched (on PGlite, copies
 * of the empty cluster). A Postgres slot on a server of a test's own (a private cluster) starts empty.
 */
export function databaseSlot(
  kind?: Parameters<typeof freshSlot>[0],
  postgresUrl?: string,
  { migrated = true }: { migrated?: boolean } = {},
): DatabaseSlot {
  const [index, store] = migrated
    ? [inject("pgliteTemplate"), inject("pgliteStoreTemplate")]
    : [inject("pgliteEmpty"), inject("pgliteEmpty")];
  const postgres = migrated && (postgresUrl ?? POSTGRES_URL) === POSTGRES_URL ? inject("postgresTemplate") : undefined;
  return freshSlot(kind, postgresUrl, { pglite: index && store ? { index, store } : undefined, postgres });
}

/**
 * An indexer killed as a crash kills it (SIGKILL to its process group), once it has exited. Its
 * app's lock in the database (Ponder's `_ponder_meta` heartbeat, written every 10 s) is then dated
 * as a crashed app's is once Ponder's 25 s heartbeat timeout has passed (Ponder 0.17.7,
 * database/index.js: databaseHeartbeatTimeout, not configurable): the next start on the slot goes
 * through the same crash recovery at once instead of waiting the timeout out, idle, holding one
 * of the suite's workers.
 */
export async function crashIndexer(indexer: Indexer, slot: DatabaseSlot): Promise<void> {
  const { child } = indexer;
  const exit = child.exitCode === null && child.signalCode === null ? once(child, "exit") : undefined;
  process.kill(-child.pid!, "SIGKILL");
  await exit;
  await slot.read((query) =>
    query(`update _ponder_meta set value = jsonb_set(value, '{heartbeat_at}', '0') where key = 'app'`),
  );
}
