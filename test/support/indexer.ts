import { cpSync } from "node:fs";
import { inject } from "vitest";
import { type DatabaseSlot, databaseSlot as freshSlot } from "../../harness/indexer.ts";

// The harness is shared with the benchmarks (bench/ does not import from test/): harness/indexer.ts.
export * from "../../harness/indexer.ts";

/**
 * harness/indexer.ts's slot, whose PGlite databases (the index and the service store) start as
 * copies of the run's empty cluster (test/support/pglite-template.ts) rather than each running initdb.
 */
export function databaseSlot(...args: Parameters<typeof freshSlot>): DatabaseSlot {
  const slot = freshSlot(...args);
  const template = slot.kind === "pglite" ? inject("pgliteTemplate") : undefined;
  if (!template) return slot;
  return {
    ...slot,
    prepare: async () => {
      await slot.prepare();
      for (const dir of [slot.env.PGLITE_DIR!, slot.store.kind === "pglite" ? slot.store.directory : undefined])
        if (dir) cpSync(template, dir, { recursive: true });
    },
  };
}
