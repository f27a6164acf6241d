import http from "node:http";
import { describe, expect, it } from "vitest";
import { createApp } from "../api/app.ts";
import { checkPonderVersion, installedPonderVersion, PONDER_VERSION } from "../api/host/ponder.ts";
import { createLogger } from "../shared/log.ts";
import { settingsOnlyCore } from "./support/paid-app.ts";

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
});
