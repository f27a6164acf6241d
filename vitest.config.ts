import { defineConfig } from "vitest/config";

// Database-backed tests (test/db) run twice: against PGlite, the embedded default, and against
// Postgres (TEST_POSTGRES_URL, default the local server). Everything else runs once.
const timeouts = { testTimeout: 120_000, hookTimeout: 300_000 };
// Tests call the free routes far more often than a client would: their per-client limit is lifted
// (test/observability.test.ts sets its own low one). The indexers tests start inherit it.
const env = { FREE_RATE_LIMIT_PER_MINUTE: "1000000" };

export default defineConfig({
  test: {
    projects: [
      { test: { name: "unit", include: ["test/**/*.test.ts"], exclude: ["test/db/**"], env, ...timeouts } },
      { test: { name: "pglite", include: ["test/db/**/*.test.ts"], env: { ...env, TEST_DATABASE: "pglite" }, ...timeouts } },
      { test: { name: "postgres", include: ["test/db/**/*.test.ts"], env: { ...env, TEST_DATABASE: "postgres" }, ...timeouts } },
    ],
  },
});
