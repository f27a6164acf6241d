import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { ViteNodeServer } from "vite-node/server";
import { describe, expect, it } from "vitest";
import { createApp } from "../api/app.ts";
import {
  checkPonderVersion,
  installedPonderDirectory,
  installedPonderVersion,
  PONDER_VERSION,
} from "../api/host/ponder.ts";
import { KEPT_TRANSFORMS, keepTransforms } from "../api/host/ponder-build.ts";
import { PONDER_PRELOAD, ponderProcessEnv } from "../api/host/ponder-process.ts";
import { createLogger } from "../shared/log.ts";
import { settingsOnlyCore } from "./support/paid-app.ts";

/** The Vite that Ponder's build uses (the one its package resolves, which may not be vitest's). */
async function ponderVite(): Promise<typeof import("vite")> {
  const viteDirectory = dirname(
    createRequire(join(installedPonderDirectory()!, "package.json")).resolve("vite/package.json"),
  );
  return import(pathToFileURL(join(viteDirectory, "dist/node/index.js")).href);
}

// What lives under Ponder is in api/host/ponder.ts, written for one Ponder version; the app itself has no side effects.
describe("the Ponder host", () => {
  it("was written for the Ponder installed", () => {
    expect(installedPonderVersion()).toBe(PONDER_VERSION);
    expect(() => checkPonderVersion()).not.toThrow();
  });

  it("refuses another Ponder version, naming both and what to check", () => {
    expect(() => checkPonderVersion("0.18.0")).toThrow(
      new RegExp(
        `written for Ponder ${PONDER_VERSION.replace(/\./g, "\\.")}, but Ponder 0\\.18\\.0 is installed\\. Check .*http\\.createServer.*PONDER_COMMON.*SIGTERM`,
      ),
    );
  });

  it("leaves the process alone when the app is built: no server hook, no signal handler, no listener", () => {
    const createServer = http.createServer;
    const signals = [process.listenerCount("SIGTERM"), process.listenerCount("SIGINT")];
    const payments = settingsOnlyCore({ mode: "self", relayer: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8" });
    createApp({
      db: undefined as never,
      target: {
        network: "devnet",
        tokens: [],
        tracked: null,
        schema: "unused",
        reporters: [],
        database: { kind: "postgres", connectionString: "postgres://127.0.0.1:1/none" },
      } as never,
      payments,
      ipfs: undefined as never,
      logger: createLogger({ level: "silent" }),
      maxLagBlocks: 10,
    });
    expect(http.createServer).toBe(createServer);
    expect([process.listenerCount("SIGTERM"), process.listenerCount("SIGINT")]).toEqual(signals);
  });

  // api/host/ponder-build.ts: a Ponder start loads the libraries with Node, not through Vite.
  it("has Ponder's Vite read vite.config.ts, after which vite-node leaves library files to Node and still transforms ours", async () => {
    const ponder = installedPonderDirectory()!;
    const vite = await ponderVite();
    // The call Ponder's build makes (build/index.js), short of starting the server.
    const config = await vite.resolveConfig(
      { root: process.cwd(), publicDir: false, server: { hmr: false }, logLevel: "silent" },
      "serve",
    );
    expect(config.configFile).toBe(join(process.cwd(), "vite.config.ts"));

    const server = new ViteNodeServer({ config } as never);
    const ponderIndex = join(ponder, "dist/esm/index.js");
    expect(await server.shouldExternalize(ponderIndex)).toBe(ponderIndex);
    expect(await server.shouldExternalize(join(process.cwd(), "api/app.ts"))).toBe(false);
  });

  it("keeps what vite-node makes of our files between starts, and uses it only for the same bytes", async () => {
    const vite = await ponderVite();
    keepTransforms();
    const root = mkdtempSync(join(tmpdir(), "kept-transforms-"));
    const file = join(root, "a.ts");
    const kept = join(root, KEPT_TRANSFORMS);
    // A Ponder start: a Vite server and a ViteNodeServer of its own, nothing of the last one in memory.
    const start = async () => {
      const server = await vite.createServer({
        root,
        configFile: false,
        publicDir: false,
        logLevel: "silent",
        server: { hmr: false, watch: null },
      });
      try {
        return (await new ViteNodeServer(server as never).fetchModule(file, "ssr")).code ?? "";
      } finally {
        await server.close();
      }
    };
    try {
      writeFileSync(file, "export const x: number = 1;\n");
      const first = await start();
      expect(first).toContain("x = 1");
      expect(first).not.toContain(": number");
      const [entry] = readdirSync(kept);
      expect(readdirSync(kept)).toEqual([entry]);

      // Kept: the next start takes it as it is (marked here to tell it from a new transform).
      const keptFile = join(kept, entry!);
      const marked = JSON.parse(readFileSync(keptFile, "utf8"));
      writeFileSync(keptFile, JSON.stringify({ ...marked, code: `${marked.code}\n// kept` }));
      expect(await start()).toContain("// kept");

      // The file changed: transformed again, and kept beside the other.
      writeFileSync(file, "export const x: number = 2;\n");
      const changed = await start();
      expect(changed).toContain("x = 2");
      expect(changed).not.toContain("// kept");
      expect(readdirSync(kept)).toHaveLength(2);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  // api/host/event-loop-monitor.mjs: Ponder's metrics sample the event loop's delay every millisecond.
  it("keeps Ponder's metrics from waking its processes a thousand times a second: every Ponder process preloads what samples them every 10 ms", () => {
    const metrics = pathToFileURL(join(installedPonderDirectory()!, "dist/esm/internal/metrics.js")).href;
    // What Ponder makes at its start (bin/ponder.js), then half a second of nothing: how often the process woke.
    const script = `
      const { MetricsService } = await import(${JSON.stringify(metrics)});
      new MetricsService();
      const before = process.resourceUsage().voluntaryContextSwitches;
      await new Promise((resolve) => setTimeout(resolve, 500));
      console.log(process.resourceUsage().voluntaryContextSwitches - before);`;
    const wakes = (env: NodeJS.ProcessEnv) =>
      Number(execFileSync(process.execPath, ["--input-type=module", "-e", script], { env, encoding: "utf8" }));
    // About 450 and 50 on this machine kind: the bounds leave room for a busy machine either way.
    expect(wakes(process.env)).toBeGreaterThan(200);
    expect(wakes(ponderProcessEnv(process.env))).toBeLessThan(100);
    // npm run serve and dev:ponder exec ponder themselves: their scripts name the same module.
    const scripts = (JSON.parse(readFileSync("package.json", "utf8")) as { scripts: Record<string, string> }).scripts;
    const execPonder = Object.entries(scripts).filter(([, script]) => /\bexec ponder\b/.test(script));
    expect(execPonder.map(([name]) => name).sort()).toEqual(["dev:ponder", "serve"]);
    for (const [, script] of execPonder)
      expect(script).toContain(`--import=./${relative(process.cwd(), fileURLToPath(PONDER_PRELOAD))}`);
  });
});
