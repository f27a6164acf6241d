import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import pg from "pg";
import { createPublicClient, type Hex, http } from "viem";
import { generatePrivateKey } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reputationReporterAbi } from "../abis/ReputationReporter.ts";
import { CELO_ONCHAIN_REPORTER, CELO_TOKENS, celoChain, SANCTIONS_ORACLE } from "../config/celo.ts";
import { checkConfig, type Finding } from "../config/check.ts";
import { reputationReporterArtifact } from "../contracts/artifacts.ts";
import { anvilDevAccount } from "../devnet/accounts.ts";
import { type Anvil, startAnvil } from "../devnet/anvil.ts";
import { devnetClients } from "../devnet/chain.ts";
import { freePort } from "../devnet/ports.ts";
import { POSTGRES_URL } from "../harness/indexer.ts";
import { waitForReceipt } from "../shared/receipt.ts";

// Anvil's well-known dev accounts (public keys, never real funds): the parts they play here.
const deployer = anvilDevAccount(0);
const reporterKey = anvilDevAccount(3);
const relayer = anvilDevAccount(4);
const treasury = anvilDevAccount(5);
const notAReporter = anvilDevAccount(6);
const deployedReporter = anvilDevAccount(7);
/** A key with no CELO at all. */
const emptyKey = generatePrivateKey();

type Run = { code: number | null; stdout: string; stderr: string };

/** Runs a script of this repository with tsx, in `cwd`, with `env` over the suite's environment (ENV_FILES=ignore included). */
function runScript(script: string, args: string[], env: Record<string, string>, cwd = process.cwd()): Promise<Run> {
  return new Promise((done) => {
    const child = spawn("tsx", [resolve(script), ...args], {
      cwd,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
    // tsx not on PATH (vitest run directly, not through npm test): a failure that says so, not a hang.
    child.on("error", (error) => {
      clearTimeout(timer);
      done({ code: null, stdout, stderr: `${stderr}${error.message}` });
    });
  });
}

// Every variable the check reads, set blank (unset) unless a case sets it: nothing of the suite's environment leaks in.
const blank = Object.fromEntries(
  [
    "PONDER_RPC_URL_42220",
    "DATABASE_URL",
    "X402_PAY_TO",
    "X402_RELAYER_PRIVATE_KEY",
    "X402_FACILITATOR_URL",
    "SIGN_IN_ORIGIN",
    "REPORTER_ADDRESS",
    "REPORTER_START_BLOCK",
    "SANCTIONS_START_BLOCK",
    "REPORTER_PRIVATE_KEY",
    "REPORTER_DEPLOYER_PRIVATE_KEY",
    "ONCHAIN_REPORTER_ADDRESS",
    "CELO_START_BLOCK",
    "INDEX_MODE",
    "TRACKED_WALLETS",
    "TRACKED_WALLETS_FILE",
    "DATABASE_SCHEMA",
    "PGLITE_DIR",
    "HOST",
  ].map((k) => [k, ""]),
);

describe("npm run check:config: every problem of a configuration in one run", () => {
  const stops: (() => Promise<void>)[] = [];
  let celo: Anvil;
  let otherChain: Anvil;
  let ours: `0x${string}`;
  let deployBlock: bigint;
  let closedPort: number;
  /** A configuration for live Celo (an anvil at chain 42220 standing in) with nothing wrong. */
  let good: Record<string, string>;
  /** The test server runs without autovacuum (CI's does: conf.d/90-ci.conf), asked directly: then every check of it warns so. */
  let autovacuumOff: boolean;
  const AUTOVACUUM_OFF =
    /^autovacuum is off on Postgres at postgresql:\/\/postgres@127\.0\.0\.1:5432\/test: the payment ledger's statistics are never refreshed/;
  /** A finding of the test server's own settings, not of the configuration under test. */
  const ofTheServer = (f: Finding) => autovacuumOff && AUTOVACUUM_OFF.test(f.message);

  beforeAll(async () => {
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    const { rows } = await client.query<{ autovacuum: string }>("show autovacuum").finally(() => client.end());
    autovacuumOff = rows[0]!.autovacuum !== "on";
    // Each process is registered for stopping the moment it exists: afterAll stops it whatever fails after.
    const started = (anvil: Anvil) => {
      stops.push(anvil.stop);
      return anvil;
    };
    [celo, otherChain, closedPort] = await Promise.all([
      startAnvil().then(started),
      startAnvil({ chainId: 31337 }).then(started),
      freePort(),
    ]);
    const { publicClient, walletClient } = devnetClients(celo.rpcUrl, deployer.privateKey);
    // Code where Celo's tokens and the original OnchainReporter live, so that only what a case breaks is wrong.
    for (const address of [
      CELO_TOKENS.USDT.address,
      CELO_TOKENS.USDC.address,
      CELO_ONCHAIN_REPORTER,
      SANCTIONS_ORACLE,
    ]) {
      await publicClient.request({ method: "anvil_setCode" as never, params: [address, "0x00"] as never });
    }
    const receipt = await waitForReceipt(publicClient, {
      hash: await walletClient.deployContract({ ...reputationReporterArtifact, args: [reporterKey.address] }),
      pollingInterval: 50,
    });
    ours = receipt.contractAddress!.toLowerCase() as `0x${string}`;
    deployBlock = receipt.blockNumber;
    good = {
      ...blank,
      PONDER_RPC_URL_42220: celo.rpcUrl,
      CELO_START_BLOCK: "0",
      DATABASE_URL: POSTGRES_URL,
      X402_PAY_TO: treasury.address,
      X402_RELAYER_PRIVATE_KEY: relayer.privateKey,
      SIGN_IN_ORIGIN: "https://api.example.com",
      REPORTER_ADDRESS: ours,
      REPORTER_START_BLOCK: String(deployBlock),
      REPORTER_PRIVATE_KEY: reporterKey.privateKey,
      SANCTIONS_START_BLOCK: "0",
    };
  });

  afterAll(async () => {
    for (const stop of stops.reverse()) await stop().catch(() => {});
  });

  const check = (env: Record<string, string>) => checkConfig({ source: env, devnet: "running" });
  const at = (findings: Finding[], level: Finding["level"]) =>
    findings.filter((f) => f.level === level).map((f) => f.message);

  it("a good configuration: every check ok, nothing to warn about but a server without autovacuum", async () => {
    const { findings, target } = await check(good);
    expect(at(findings, "error")).toEqual([]);
    expect(at(findings, "warn")).toEqual(autovacuumOff ? [expect.stringMatching(AUTOVACUUM_OFF)] : []);
    expect(findings.map((f) => f.check)).toEqual(
      expect.arrayContaining([
        "environment",
        "network",
        "postgres",
        "rpc",
        "tokens",
        "reporter",
        "treasury",
        "relayer",
      ]),
    );
    expect(at(findings, "ok").join("\n")).toContain(`${reporterKey.address} holds the reporter role on ${ours}`);
    expect(target?.reporterStartBlock).toBe(0); // CELO_START_BLOCK 0 is earlier than the deployment
  });

  // Each broken setting alone: the level and the message it gets.
  const cases: [string, () => Record<string, string>, Finding["level"], RegExp][] = [
    ["no treasury", () => ({ X402_PAY_TO: "" }), "error", /^Set X402_PAY_TO to the treasury address/],
    [
      "the zero address as treasury",
      () => ({ X402_PAY_TO: "0x0000000000000000000000000000000000000000" }),
      "error",
      /^X402_PAY_TO is the zero address/,
    ],
    [
      "a treasury that is not an address",
      () => ({ X402_PAY_TO: "treasury" }),
      "error",
      /^X402_PAY_TO is invalid: must be 0x followed by 40 hex characters$/,
    ],
    [
      "no relayer key nor facilitator",
      () => ({ X402_RELAYER_PRIVATE_KEY: "" }),
      "error",
      /^Payments cannot be settled: set X402_RELAYER_PRIVATE_KEY .* or X402_FACILITATOR_URL/,
    ],
    [
      "no public origin for sign-ins",
      () => ({ SIGN_IN_ORIGIN: "" }),
      "error",
      /^Set SIGN_IN_ORIGIN to the public origin/,
    ],
    [
      "an RPC of another chain among the URLs",
      () => ({ PONDER_RPC_URL_42220: `${celo.rpcUrl},${otherChain.rpcUrl}` }),
      "error",
      /^RPC http:\/\/127\.0\.0\.1:\d+ serves chain id 31337, expected 42220 \(Celo\)\.$/,
    ],
    [
      "an RPC that does not answer",
      () => ({ PONDER_RPC_URL_42220: `http://127.0.0.1:${closedPort}/key-in-the-path` }),
      "error",
      /^RPC http:\/\/127\.0\.0\.1:\d+\/… does not answer \(ECONNREFUSED\)\.$/,
    ],
    [
      "an unreachable Postgres",
      () => ({ DATABASE_URL: `postgresql://postgres:secret@127.0.0.1:${closedPort}/test` }),
      "error",
      /^Cannot connect to Postgres at postgresql:\/\/postgres@127\.0\.0\.1:\d+\/test \(.*ECONNREFUSED.*\)\.$/,
    ],
    [
      "a relayer with no gas",
      () => ({ X402_RELAYER_PRIVATE_KEY: emptyKey }),
      "warn",
      /^the relayer key's address 0x[0-9a-f]{40} holds 0 CELO, below 0\.1 CELO: settlements fail until it is funded$/,
    ],
    [
      "a reporter key without the reporter role",
      () => ({ REPORTER_PRIVATE_KEY: notAReporter.privateKey }),
      "error",
      new RegExp(
        `^The reporter key.s address ${notAReporter.address} does not hold the reporter role on 0x[0-9a-f]{40}: grant it`,
      ),
    ],
    [
      "a reporter address with no contract",
      () => ({ REPORTER_ADDRESS: treasury.address }),
      "error",
      /^No contract at REPORTER_ADDRESS 0x[0-9a-f]{40} on http:\/\/127\.0\.0\.1:\d+: deploy ours/,
    ],
    [
      "a reporter address that is not a reporter",
      () => ({ REPORTER_ADDRESS: CELO_TOKENS.USDT.address }),
      "error",
      /does not answer isReporter\(\): is REPORTER_ADDRESS our ReputationReporter/,
    ],
    [
      "no reporter at all",
      () => ({ REPORTER_ADDRESS: "", REPORTER_START_BLOCK: "", REPORTER_PRIVATE_KEY: "" }),
      "warn",
      /^REPORTER_ADDRESS and REPORTER_PRIVATE_KEY unset: passports cannot be published/,
    ],
    [
      "our reporter's start block unset",
      () => ({ REPORTER_START_BLOCK: "" }),
      "warn",
      /^REPORTER_START_BLOCK unset: our reporter is indexed from CELO_START_BLOCK only/,
    ],
    [
      "the sanctions oracle's start block unset",
      () => ({ SANCTIONS_START_BLOCK: "" }),
      "warn",
      /^SANCTIONS_START_BLOCK unset: the sanctions oracle is indexed from CELO_START_BLOCK only, so a wallet not seen listed is reported as inconclusive/,
    ],
    [
      "a start block past the head",
      () => ({ CELO_START_BLOCK: "99999999" }),
      "warn",
      /^CELO_START_BLOCK 99999999 is past the chain head/,
    ],
    [
      "a tracked wallet that is not an address",
      () => ({ INDEX_MODE: "tracked", TRACKED_WALLETS: `${treasury.address},0x12` }),
      "error",
      /^Tracked wallet "0x12" is not an address/,
    ],
  ];

  it.each(cases)("%s", async (_, broken, level, message) => {
    const { findings } = await check({ ...good, ...broken() });
    const problems = findings.filter((f) => f.level !== "ok" && !ofTheServer(f));
    expect(problems, JSON.stringify(problems, null, 1)).toHaveLength(1);
    expect(problems[0]!.level).toBe(level);
    expect(problems[0]!.message).toMatch(message);
  });

  it("the settlement worker off on PGlite: an error (no other process can settle its queue)", async () => {
    const { findings } = await check({ ...good, DATABASE_URL: "", X402_SETTLEMENT_WORKER: "off" });
    expect(at(findings, "error")).toEqual([expect.stringMatching(/^X402_SETTLEMENT_WORKER=off without DATABASE_URL/)]);
    expect(at((await check({ ...good, X402_SETTLEMENT_WORKER: "off" })).findings, "error")).toEqual([]);
  });

  it("no sanctions oracle at its address while SANCTIONS_START_BLOCK is set: an error", async () => {
    const { publicClient } = devnetClients(celo.rpcUrl, deployer.privateKey);
    const setCode = (code: string) =>
      publicClient.request({ method: "anvil_setCode" as never, params: [SANCTIONS_ORACLE, code] as never });
    await setCode("0x");
    try {
      const { findings } = await check(good);
      expect(at(findings, "error")).toEqual([
        expect.stringMatching(/^No sanctions oracle at 0x40c57923924b5c5c5455c48d93317139addac8fb on http:/),
      ]);
    } finally {
      await setCode("0x00");
    }
  });

  /** Everything that can be wrong together, and what each is reported as. */
  const allBroken = () => ({
    ...good,
    X402_PAY_TO: "",
    SIGN_IN_ORIGIN: "",
    LOG_LEVEL: "loud",
    PONDER_RPC_URL_42220: `${celo.rpcUrl},${otherChain.rpcUrl}`,
    DATABASE_URL: `postgresql://postgres:secret@127.0.0.1:${closedPort}/test`,
    X402_RELAYER_PRIVATE_KEY: emptyKey,
    REPORTER_PRIVATE_KEY: notAReporter.privateKey,
    INDEX_MODE: "tracked",
    TRACKED_WALLETS: "0x12",
  });
  const allReported: [Finding["level"], RegExp][] = [
    ["error", /^LOG_LEVEL is invalid/],
    ["error", /^Tracked wallet "0x12" is not an address/],
    ["error", /^Set X402_PAY_TO/],
    ["error", /^Set SIGN_IN_ORIGIN/],
    ["error", /^Cannot connect to Postgres at /],
    ["error", /serves chain id 31337, expected 42220/],
    ["error", /does not hold the reporter role/],
    ["warn", /^the relayer key's address .* holds 0 CELO/],
  ];

  it("all of them at once: one run lists every one", async () => {
    const { findings } = await check(allBroken());
    const problems = findings.filter((f) => f.level !== "ok");
    expect(
      problems.map((p) => `${p.level} ${p.message}`),
      JSON.stringify(problems, null, 1),
    ).toHaveLength(allReported.length);
    for (const [level, message] of allReported)
      expect(
        problems.some((p) => p.level === level && message.test(p.message)),
        String(message),
      ).toBe(true);
  });

  it("the command prints each check, what npm start would run, exits 1, and never a key or a password", async () => {
    const run = await runScript("scripts/check-config.ts", [], allBroken());
    expect(run.code, run.stderr).toBe(1);
    const lines = run.stdout.split("\n");
    for (const [level, message] of allReported)
      expect(
        lines.some((l) => l.trimStart().startsWith(level) && message.test(l.replace(/^\s*\w+\s+[\w-]+: /, ""))),
        String(message),
      ).toBe(true);
    expect(run.stdout).toMatch(/^ {2}ok +rpc: http:\/\/127\.0\.0\.1:\d+ answers: chain 42220$/m);
    expect(run.stdout).toMatch(/What `npm start` would run/);
    expect(run.stdout).toMatch(/^ {2}database +Postgres postgresql:\/\/postgres@127\.0\.0\.1:\d+\/test$/m);
    expect(run.stdout).toMatch(/^ {2}command +ponder start --schema reputation --port 42069$/m);
    expect(run.stdout).toMatch(/^7 errors, 1 warning: `npm start` would stop\.$/m);
    for (const secret of [emptyKey, notAReporter.privateKey, "secret"])
      expect(run.stdout + run.stderr).not.toContain(secret);
    expect(run.stdout + run.stderr).not.toContain(emptyKey.slice(2));
  });

  it("a good configuration: exit 0, and the word error nowhere", async () => {
    const run = await runScript("scripts/check-config.ts", [], good);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).not.toMatch(/\berror\b/i);
    expect(run.stdout).toMatch(autovacuumOff ? /^Ready to start \(1 warning\)\.$/m : /^Ready to start\.$/m);
    if (autovacuumOff) expect(run.stdout).toMatch(/autovacuum is off on Postgres at /);
    expect(run.stdout).toMatch(new RegExp(`^  reporters +${CELO_ONCHAIN_REPORTER}, ${ours}$`, "m"));
    expect(run.stdout).not.toContain(relayer.privateKey.slice(2));
  });
});

describe("npm run reporter:deploy", () => {
  let celo: Anvil;
  const stops: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    celo = await startAnvil();
    stops.push(celo.stop);
  });
  afterAll(async () => {
    for (const stop of stops.reverse()) await stop().catch(() => {});
  });

  const live = () => ({
    ...blank,
    PONDER_RPC_URL_42220: celo.rpcUrl,
    REPORTER_DEPLOYER_PRIVATE_KEY: deployer.privateKey,
    REPORTER_PRIVATE_KEY: deployedReporter.privateKey,
  });

  it("deploys on chain 42220, grants the reporter role, prints the address and the deployment block, and writes them into .env", async () => {
    const dir = mkdtempSync(join(tmpdir(), "reporter-deploy-"));
    writeFileSync(
      join(dir, ".env"),
      "# the operator's file\nPONDER_RPC_URL_42220=https://celo.example\n# REPORTER_ADDRESS=\nSIGN_IN_ORIGIN=https://api.example.com\n",
    );
    const run = await runScript("scripts/reporter-deploy.ts", ["--write-env"], live(), dir);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const address = /^REPORTER_ADDRESS=(0x[0-9a-f]{40})$/m.exec(run.stdout)?.[1] as `0x${string}`;
    const block = BigInt(/^REPORTER_START_BLOCK=(\d+)$/m.exec(run.stdout)![1]!);

    // The chain agrees: the contract is there from that block on, its admin is the deployer, the reporter key holds the role.
    const client = createPublicClient({ chain: celoChain(celo.rpcUrl), transport: http(celo.rpcUrl) });
    const read = <F extends "isReporter" | "admin">(functionName: F, args?: readonly [Hex]) =>
      client.readContract({ address, abi: reputationReporterAbi, functionName, args } as never);
    expect(await read("isReporter", [deployedReporter.address])).toBe(true);
    expect(await read("isReporter", [deployer.address])).toBe(false);
    expect(String(await read("admin")).toLowerCase()).toBe(deployer.address);
    expect(await client.getCode({ address, blockNumber: block })).toBeTruthy();
    expect(await client.getCode({ address, blockNumber: block - 1n })).toBeUndefined();

    expect(readFileSync(join(dir, ".env"), "utf8")).toBe(
      `# the operator's file\nPONDER_RPC_URL_42220=https://celo.example\nREPORTER_ADDRESS=${address}\nSIGN_IN_ORIGIN=https://api.example.com\nREPORTER_START_BLOCK=${block}\n`,
    );
    expect(run.stdout + run.stderr).not.toContain(deployer.privateKey.slice(2));
    expect(run.stdout + run.stderr).not.toContain(deployedReporter.privateKey.slice(2));
  });

  it("names every missing setting at once, and never deploys a second reporter over REPORTER_ADDRESS", async () => {
    const run = await runScript("scripts/reporter-deploy.ts", [], {
      ...live(),
      REPORTER_DEPLOYER_PRIVATE_KEY: "",
      REPORTER_PRIVATE_KEY: "",
      REPORTER_ADDRESS: treasury.address,
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /^3 problems:\n {2}- Set REPORTER_DEPLOYER_PRIVATE_KEY.*\n {2}- Set REPORTER_PRIVATE_KEY.*\n {2}- REPORTER_ADDRESS is set already/,
    );
    expect(run.stderr).not.toMatch(/\n\s+at /);
  });

  it("refuses a chain other than 42220", async () => {
    const other = await startAnvil({ chainId: 31337 });
    stops.push(other.stop);
    const run = await runScript("scripts/reporter-deploy.ts", [], { ...live(), PONDER_RPC_URL_42220: other.rpcUrl });
    expect(run.code).toBe(1);
    expect(run.stderr.trim()).toMatch(
      /^RPC http:\/\/127\.0\.0\.1:\d+ serves chain id 31337, expected 42220 \(Celo\): nothing deployed\.$/,
    );
  });
});
