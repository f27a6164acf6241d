import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ManifestInput } from "../config/manifest.ts";
import { type RpcProxy, startRpcProxy } from "./support/rpc-proxy.ts";

const dir = mkdtempSync(join(tmpdir(), "startup-"));
const address = (n: number) => `0x${n.toString(16).padStart(40, "0")}`;
const key = `0x${"11".repeat(32)}`;

/** A manifest that passes validation, pointing at `rpcUrl`. */
const manifest = (rpcUrl: string): ManifestInput => ({
  chainId: 42220,
  rpcUrl,
  apiUrl: "http://127.0.0.1:42069",
  createdAt: "2026-11-01T00:00:00.000Z",
  startBlock: 1,
  headBlock: 10,
  history: { from: "2025-09-01T00:00:00.000Z", to: "2026-11-01T00:00:00.000Z", months: 15 },
  tokens: {
    USDT: { address: address(1), name: "Tether USD", version: "1", symbol: "USDT", decimals: 6 },
    USDC: { address: address(2), name: "USDC", version: "2", symbol: "USDC", decimals: 6 },
  },
  reporter: { address: address(3), admin: address(4) },
  deployer: { address: address(4), privateKey: key },
  lenders: [{ label: "lender", address: address(5), privateKey: key }],
  service: {
    reporter: { address: address(6), privateKey: key },
    relayer: { address: address(7), privateKey: key },
    treasury: { address: address(8) },
  },
  personas: {},
  population: { seed: 1, wallets: 0, transfers: 0, blocks: 0, seconds: 0 },
});

const file = (name: string, content: string) => {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
};

/** Runs the indexer launcher and returns its exit code and what it printed. */
function startIndexer(env: Record<string, string>): Promise<{ code: number | null; stderr: string; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn("tsx", ["scripts/indexer.ts"], {
      env: {
        ...process.env,
        PGLITE_DIR: join(dir, "pglite"),
        DEVNET_MANIFEST: join(dir, "none.json"),
        PONDER_RPC_URL_42220: "",
        DATABASE_URL: "",
        X402_PAY_TO: "",
        X402_RELAYER_PRIVATE_KEY: "",
        X402_FACILITATOR_URL: "",
        SIGN_IN_ORIGIN: "",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * A port that refuses connections and goes on refusing: below the OS's ephemeral range (Linux:
 * 32768-60999), which it never hands out for port 0, and where no test binds a fixed port. A port
 * from freePort() is released at once, and in a full run another file's anvil or server took one
 * before the check connected (2026-11-28). Not port 1: fetch refuses to dial it ("bad port").
 */
async function refusingPort(): Promise<number> {
  const first = 20_000 + Math.floor(Math.random() * 10_000);
  for (let port = first; port < first + 100; port++) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect(port, "127.0.0.1");
      socket.once("connect", () => {
        socket.destroy();
        resolve(false);
      });
      socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code === "ECONNREFUSED"));
    });
    if (refused) return port;
  }
  throw new Error(`no port from ${first} refuses connections`);
}

// A bad start stops with clear lines naming every problem at once: no stack trace, no endless retries.
describe("a bad start", () => {
  let wrongChain: RpcProxy;
  let hanging: RpcProxy;
  let closedPort: number;

  beforeAll(async () => {
    wrongChain = await startRpcProxy("http://127.0.0.1:1", { chainId: 1 });
    hanging = await startRpcProxy("http://127.0.0.1:1", { hang: true });
    closedPort = await refusingPort();
  });
  afterAll(async () => {
    await wrongChain.close();
    await hanging.close();
  });

  const payments = {
    X402_PAY_TO: "0x000000000000000000000000000000000000dead",
    X402_FACILITATOR_URL: "http://127.0.0.1:1/facilitator",
    SIGN_IN_ORIGIN: "https://api.example.com",
  };
  const live = () => ({ PONDER_RPC_URL_42220: wrongChain.url, ...payments });
  const wrongChainId = /serves chain id 1, expected 42220/;
  // Every problem of a start is listed at once: one line when there is one, else a count and one line each.
  const cases: [string, () => Record<string, string>, RegExp[]][] = [
    [
      "a missing manifest",
      () => ({ DEVNET_MANIFEST: join(dir, "nope.json") }),
      [/Devnet manifest not found at .*nope\.json/],
    ],
    [
      "a manifest that is not JSON",
      () => ({ DEVNET_MANIFEST: file("corrupt.json", '{"chainId": 42220, "rpc') }),
      [/corrupt\.json is not valid JSON/],
    ],
    [
      "a manifest of the wrong shape",
      () => ({
        DEVNET_MANIFEST: file(
          "shape.json",
          JSON.stringify({ ...manifest("http://127.0.0.1:1"), tokens: { USDT: {} } }),
        ),
      }),
      [/shape\.json is invalid: tokens\.USDT\.address/],
    ],
    [
      "a manifest of another chain",
      () => ({
        DEVNET_MANIFEST: file("chain.json", JSON.stringify({ ...manifest("http://127.0.0.1:1"), chainId: 1 })),
      }),
      [/chain\.json is invalid: chainId/],
    ],
    [
      "an RPC that refuses connections",
      () => ({ DEVNET_MANIFEST: file("closed.json", JSON.stringify(manifest(`http://127.0.0.1:${closedPort}`))) }),
      [/RPC http:\/\/127\.0\.0\.1:\d+ does not answer \(ECONNREFUSED\)/],
    ],
    [
      "an RPC that never answers",
      () => ({ DEVNET_MANIFEST: file("hang.json", JSON.stringify(manifest(hanging.url))) }),
      [/does not answer \(.*timeout/i],
    ],
    [
      "a devnet RPC of the wrong chain id",
      () => ({ DEVNET_MANIFEST: file("wrong.json", JSON.stringify(manifest(wrongChain.url))) }),
      [wrongChainId],
    ],
    ["a live RPC of the wrong chain id", live, [wrongChainId]],
    [
      "live Celo with nothing but an RPC",
      () => ({ PONDER_RPC_URL_42220: wrongChain.url }),
      [
        /Set X402_PAY_TO/,
        /Payments cannot be settled: set X402_RELAYER_PRIVATE_KEY/,
        /Set SIGN_IN_ORIGIN to the public origin/,
        wrongChainId,
      ],
    ],
    [
      "live Celo with no way to settle payments",
      () => ({ ...live(), X402_FACILITATOR_URL: "" }),
      [/Payments cannot be settled: set X402_RELAYER_PRIVATE_KEY/, wrongChainId],
    ],
    [
      "live Celo without the public origin sign-ins name",
      () => ({ ...live(), SIGN_IN_ORIGIN: "" }),
      [/Set SIGN_IN_ORIGIN to the public origin/, wrongChainId],
    ],
    [
      "a treasury of the zero address",
      () => ({ ...live(), X402_PAY_TO: "0x0000000000000000000000000000000000000000" }),
      [/X402_PAY_TO is the zero address/, wrongChainId],
    ],
    // An invalid value is reported once: not again as a missing setting, nor through its default.
    [
      "a treasury that is not an address",
      () => ({ ...live(), X402_PAY_TO: "treasury" }),
      [/X402_PAY_TO is invalid: must be 0x/, wrongChainId],
    ],
    [
      "a live RPC URL that is not a URL",
      () => ({ PONDER_RPC_URL_42220: "celo-rpc" }),
      [/PONDER_RPC_URL_42220 is invalid: item 1: Invalid URL/],
    ],
    ["an unknown index mode", () => ({ ...live(), INDEX_MODE: "some" }), [/INDEX_MODE is invalid/, wrongChainId]],
    [
      "tracked mode without wallets",
      () => ({ ...live(), INDEX_MODE: "tracked" }),
      [/INDEX_MODE=tracked needs wallets/, wrongChainId],
    ],
    [
      "tracked wallets that are not addresses",
      () => ({ ...live(), INDEX_MODE: "tracked", TRACKED_WALLETS: "0x12,0x34" }),
      [/Tracked wallet "0x12" is not an address/, /Tracked wallet "0x34" is not an address/, wrongChainId],
    ],
  ];

  it.each(cases)("%s: every problem named, nothing else", async (_, env, messages) => {
    const { code, stderr, stdout } = await startIndexer(env());
    expect(code).toBe(1);
    const lines = stderr.split("\n").filter((l) => l.trim() && !l.startsWith("npm warn"));
    expect(lines[0]).toMatch(/^Cannot start: /);
    if (messages.length === 1) expect(lines, stderr).toHaveLength(1);
    else {
      expect(lines[0]).toBe(`Cannot start: ${messages.length} problems:`);
      expect(lines, stderr).toHaveLength(1 + messages.length);
    }
    for (const [i, message] of messages.entries()) expect(lines[messages.length === 1 ? 0 : i + 1]).toMatch(message);
    expect(stderr + stdout).not.toMatch(/\n\s+at /);
  });
});
