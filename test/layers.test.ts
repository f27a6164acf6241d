import { spawnSync } from "node:child_process";
import { cruise } from "dependency-cruiser";
import extractDepcruiseOptions from "dependency-cruiser/config-utl/extract-depcruise-options";
import extractTSConfig from "dependency-cruiser/config-utl/extract-ts-config";
import { describe, expect, it } from "vitest";

// The layers of issue 23, as .dependency-cruiser.cjs states them (`npm run deps` prints the same).
const SOURCES = ["api", "src", "scripts", "config", "shared", "harness"];

describe("layers", () => {
  it("has no import cycle and breaks no layer rule of .dependency-cruiser.cjs", async () => {
    const options = await extractDepcruiseOptions("./.dependency-cruiser.cjs");
    const { output } = await cruise(SOURCES, { ...options, validate: true, outputType: "json" }, undefined, {
      tsConfig: extractTSConfig("tsconfig.json"),
    });
    const result = JSON.parse(output as string) as {
      summary: {
        totalCruised: number;
        violations: { rule: { name: string }; from: string; to: string; cycle?: { name: string }[] }[];
      };
    };
    const violations = result.summary.violations.map(
      (v) => `${v.rule.name}: ${v.from} → ${v.cycle?.length ? v.cycle.map((c) => c.name).join(" → ") : v.to}`,
    );
    expect(result.summary.totalCruised).toBeGreaterThan(100);
    expect(violations, violations.join("\n")).toEqual([]);
  }, 60_000);

  // Type-only imports are erased: what counts is what Node loads, so it is asked in a fresh process.
  it("loads the payment core without Hono or Ponder", () => {
    const script = `
      import { registerHooks } from "node:module";
      const loaded = [];
      registerHooks({ resolve: (specifier, context, next) => { const r = next(specifier, context); loaded.push(r.url); return r; } });
      await import("./api/payments/core.ts");
      console.log(JSON.stringify(loaded));`;
    const run = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      encoding: "utf8",
      env: { ...process.env, ENV_FILES: "ignore" },
    });
    expect(run.status, run.stderr).toBe(0);
    const loaded = JSON.parse(run.stdout.trim().split("\n").at(-1)!) as string[];
    expect(loaded.some((url) => url.includes("/api/payments/core.ts"))).toBe(true);
    expect(loaded.filter((url) => /\/node_modules\/(hono|@hono\/[^/]+|ponder)\//.test(url))).toEqual([]);
  }, 60_000);
});
