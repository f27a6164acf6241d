import { relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * Seconds a file's tests take in a full run (2026-11-28, two cores, three files at a time; the slower
 * database's), for files without a time in vitest's cache (a fresh checkout: CI after npm ci). Only the
 * order matters. Unlisted files count as DEFAULT_DB_SECONDS under test/db (an indexer each) and
 * DEFAULT_SECONDS elsewhere.
 */
const RECORDED_SECONDS: Record<string, number> = {
  "test/launcher.test.ts": 74,
  "test/db/passports.test.ts": 64,
  "test/db/replicas.test.ts": 57,
  "test/mainnet-rehearsal.test.ts": 39,
  "test/db/index-readiness.test.ts": 36,
  "test/db/screen.test.ts": 35,
  "test/db/deferred-settlement.test.ts": 31,
  "test/db/screen-batch.test.ts": 29,
  "test/db/restart.test.ts": 27,
  "test/db/ledger-restart.test.ts": 27,
  "test/db/shutdown.test.ts": 26,
  "test/db/data.test.ts": 22,
  "test/startup.test.ts": 22,
  "test/db/x402.test.ts": 21,
  "test/db/statement.test.ts": 20,
  "test/db/reorg.test.ts": 19,
  "test/db/aggregates.test.ts": 18,
  "test/db/chain-freeze.test.ts": 17,
  "test/db/tracked.test.ts": 15,
  "test/db/mcp.test.ts": 14,
  "test/db/chat.test.ts": 14,
  "test/db/requests.test.ts": 13,
  "test/payments/credit.test.ts": 10,
  "test/db/service-store.test.ts": 10,
  "test/db/local-verify.test.ts": 9,
};
const DEFAULT_DB_SECONDS = 10;
const DEFAULT_SECONDS = 5;

/**
 * Files at least this long in a full run start first, whatever their project: a long file started late
 * would finish after the others (the launcher's, passports', replicas').
 */
const LONG_SECONDS = 40;

/**
 * The long files first, longest first, across the three projects, so that the workers finish
 * together; then the others by project, longest first within each. vitest keeps a worker for the
 * next file only when that file is of the same project (`isolate: false` shares a worker within a
 * project, never across): in one order across the projects, most files start in a new worker, whose
 * start loads the modules again (43 workers in a run of 94 files, 2026-12-02; grouped, about a dozen).
 * vitest's own order runs one project after another (unit, with the launcher's long file, last)
 * and, without a cache, larger files first within each.
 */
export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const seconds = (spec: TestSpecification) => {
      const cached = this.ctx.cache.getTestSpecificationResult(spec);
      if (cached?.duration) return cached.duration / 1000;
      const file = relative(this.ctx.config.root, spec.moduleId);
      return RECORDED_SECONDS[file] ?? (file.startsWith("test/db/") ? DEFAULT_DB_SECONDS : DEFAULT_SECONDS);
    };
    const order = new Map(files.map((spec) => [spec, seconds(spec)]));
    const longestFirst = [...files].sort((a, b) => order.get(b)! - order.get(a)!);
    const long = longestFirst.filter((spec) => order.get(spec)! >= LONG_SECONDS);
    const rest = longestFirst.filter((spec) => order.get(spec)! < LONG_SECONDS);
    // The projects in the order their longest remaining file comes.
    const projects = [...new Set(rest.map((spec) => spec.project.name))];
    return [...long, ...projects.flatMap((name) => rest.filter((spec) => spec.project.name === name))];
  }
}
