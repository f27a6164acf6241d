import { relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * Seconds a file takes in a full run (2026-11-25, two cores, estimated from single runs), for files
 * without a time in vitest's cache (a fresh checkout: CI after npm ci). Only the order matters. Unlisted files count
 * as DEFAULT_DB_SECONDS under test/db (an indexer each) and DEFAULT_SECONDS elsewhere.
 */
const RECORDED_SECONDS: Record<string, number> = {
  "test/launcher.test.ts": 125,
  "test/db/restart.test.ts": 110,
  "test/db/ledger-restart.test.ts": 100,
  "test/mainnet-rehearsal.test.ts": 100,
  "test/db/passports.test.ts": 90,
  "test/startup.test.ts": 80,
  "test/db/index-readiness.test.ts": 80,
  "test/db/replicas.test.ts": 80,
  "test/db/deferred-settlement.test.ts": 60,
  "test/db/x402.test.ts": 55,
  "test/db/screen-batch.test.ts": 55,
  "test/db/screen.test.ts": 50,
  "test/db/shutdown.test.ts": 50,
  "test/db/requests.test.ts": 50,
  "test/db/statement.test.ts": 50,
  "test/db/data.test.ts": 50,
  "test/db/chat.test.ts": 50,
  "test/db/aggregates.test.ts": 45,
  "test/db/reorg.test.ts": 40,
};
const DEFAULT_DB_SECONDS = 30;
const DEFAULT_SECONDS = 5;

/**
 * Longest files first across the three projects, so that the two workers finish together. vitest's
 * own order runs one project after another (unit, with the launcher's four minutes, last) and, without
 * a cache, larger files first within each.
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
    return [...files].sort((a, b) => order.get(b)! - order.get(a)!);
  }
}
