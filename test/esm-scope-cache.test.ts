import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const hook = fileURLToPath(new URL("./support/esm-scope-cache.mjs", import.meta.url));

// npm test preloads the hook into every process it starts (scripts/test.sh): what the tests load
// must be what the service loads without it. With ESM_SCOPE_CACHE_CHECK=1 the hook asks Node too for
// each import it answers, and throws on any difference.
it("resolves every import it answers as Node does, for the packages an indexer loads", () => {
  const packages = ["ponder", "drizzle-orm/pg-core", "viem", "hono", "zod", "@electric-sql/pglite", "@x402/core"];
  const script = `for (const p of ${JSON.stringify(packages)}) await import(p);`;
  const run = spawnSync(process.execPath, ["--import", hook, "--input-type=module", "-e", script], {
    encoding: "utf8",
    env: { ...process.env, NODE_OPTIONS: "", ESM_SCOPE_CACHE_CHECK: "1" },
  });
  expect(run.status, run.stderr).toBe(0);
  const answered = Number(/esm-scope-cache: (\d+) imports answered/.exec(run.stderr)?.[1]);
  // drizzle-orm alone has hundreds of files: the hook is in use, not bypassed.
  expect(answered).toBeGreaterThan(500);
});
