import { inject } from "vitest";
import { type DatabaseSlot, databaseSlot as freshSlot, POSTGRES_URL } from "../../harness/indexer.ts";

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
