import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

// `npm ci` installs exactly the committed lockfile and fails when it and package.json disagree;
// CI (.ci/run) and the deployment docs use it. This catches the drift before CI does: a
// dependency added to package.json without `npm install` rewriting the lockfile.
const pkg = JSON.parse(readFileSync("package.json", "utf8"));
const lock = JSON.parse(readFileSync("package-lock.json", "utf8"));
const root = lock.packages[""];

describe("package-lock.json", () => {
  it("declares the same dependencies as package.json, at the same versions", () => {
    expect(root.dependencies ?? {}).toEqual(pkg.dependencies ?? {});
    expect(root.devDependencies ?? {}).toEqual(pkg.devDependencies ?? {});
  });

  it("locks every installed package to the version package.json pins", () => {
    for (const [name, version] of Object.entries({ ...pkg.dependencies, ...pkg.devDependencies })) {
      if (!/^\d+\.\d+\.\d+$/.test(version as string)) continue; // a range (typescript ~5.9): npm resolves it
      expect(lock.packages[`node_modules/${name}`]?.version, name).toBe(version);
    }
  });

  it("keeps the other platforms' optional binaries, without which npm ci fails on them", () => {
    // anvil ships one package per platform; a lockfile written where optional entries were dropped
    // makes `npm ci` fail ("Missing: @foundry-rs/anvil-darwin-amd64 from lock file").
    const anvil = lock.packages["node_modules/@foundry-rs/anvil"];
    for (const platform of Object.keys(anvil.optionalDependencies ?? {})) {
      expect(lock.packages[`node_modules/${platform}`], platform).toBeDefined();
    }
    expect(Object.keys(anvil.optionalDependencies ?? {}).length).toBeGreaterThan(1);
  });
});
