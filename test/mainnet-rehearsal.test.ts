import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { ExactEvmScheme } from "@x402/evm";
import { decodePaymentResponseHeader, wrapFetchWithPaymentFromConfig } from "@x402/fetch";
import pg from "pg";
import { type Hex, sha256 } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { anvilDevAccount, DEVNET_ROLES } from "../devnet/accounts.ts";
import { killOnExit, stopProcessGroup } from "../devnet/anvil.ts";
import { freePort } from "../devnet/ports.ts";
import { type CeloStandin, startCeloStandin } from "../harness/celo-standin.ts";
import { POSTGRES_URL } from "../harness/indexer.ts";
import { tokenBalance } from "../harness/payments.ts";

// The mainnet rehearsal: docs/operations.md's "From nothing to a served deployment" walked as
// written, every shell line of it run in order, in a fresh copy of this checkout, from an empty
// Postgres database, against an anvil standing in for Celo (chain 42220, the dev token's code at
// the real USDT and USDC addresses, two months of history there, a block a second). Then a lender
// with the stock @x402/fetch client, which knows Celo's USDT and USDC and needs no spend controls:
// a paid screen, a passport verified through the other replica, a statement fetched from the
// other replica's /ipfs. Only the operator's own choices (the values typed into .env, each
// replica's relayer key) and the ports (free ones per run) come from the test.
const DOC = "docs/operations.md";
const SECTION = /<!-- mainnet-rehearsal:start -->([\s\S]*?)<!-- mainnet-rehearsal:end -->/;
const DOC_PORTS = { 42069: "indexer", 42070: "data", 42071: "replica-1", 42072: "replica-2" } as const;
/** Commands that keep running (an operator's terminal each): started in the background, waited for until /ready. */
const SERVING = /\bnpm (start|run (serve|indexer))\b/;
/** API replicas: the doc's consecutive replica lines (a terminal each) are started together, then waited for together. */
const REPLICA = /\bnpm run serve\b/;

/** The shell lines of the section, in order (comments and blank lines dropped). */
function rehearsalLines(markdown: string): string[] {
  const section = SECTION.exec(markdown)?.[1];
  if (!section) throw new Error(`${DOC} has no mainnet-rehearsal section`);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) =>
    m[1]!
      .split("\n")
      .map((line) => line.trim())
      .filter((line) => line && !line.startsWith("#")),
  );
}

/** This checkout's files (committed or not, ignored ones aside), copied; node_modules linked. */
function operatorCheckout(): string {
  const dir = mkdtempSync(join(tmpdir(), "rehearsal-"));
  const files = execFileSync("git", ["ls-files", "-co", "--exclude-standard"], { encoding: "utf8" })
    .split("\n")
    .filter(Boolean);
  for (const file of files) {
    if (!existsSync(file)) continue; // ignored files (.env, .env.local) are not listed
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    copyFileSync(file, join(dir, file));
  }
  symlinkSync(resolve("node_modules"), join(dir, "node_modules"));
  return dir;
}

/** Sets KEY=value in a .env file: an existing line (commented out or not) is replaced, else appended. */
function setEnvValue(file: string, key: string, value: string): void {
  const lines = readFileSync(file, "utf8").split("\n");
  const at = lines.findIndex((line) => new RegExp(`^#?\\s*${key}=`).test(line));
  if (at >= 0) lines[at] = `${key}=${value}`;
  else lines.push(`${key}=${value}`);
  writeFileSync(file, lines.join("\n"));
}

type Run = { code: number | null; output: string };
type Service = { name: string; url: string; child: ChildProcess; output: () => string };

describe("mainnet rehearsal: docs/operations.md walked as written, against a Celo stand-in", () => {
  let celo: CeloStandin;
  let checkout: string;
  const database = `rehearsal_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const databaseUrl = Object.assign(new URL(POSTGRES_URL), { pathname: `/${database}` }).toString();
  const ports = new Map<string, number>();
  const runs: { line: string; run: Run }[] = [];
  const services: Service[] = [];
  /** Every doc line's process group (the ones run to completion too): afterAll stops whatever still runs. */
  const shells: ChildProcess[] = [];
  /** The last test's refused restart, started as soon as the walk is done (it waits on nothing the paid tests do). */
  let refusal: Promise<Run> | undefined;
  // The lender: anvil dev key #1 (public knowledge), holding the stand-in's USDT and USDC.
  const lender = privateKeyToAccount(DEVNET_ROLES.lenders[0]!.privateKey as Hex);

  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    await client.query(sql).finally(() => client.end());
  };
  const localize = (line: string) =>
    line.replace(/\b4207[0-2]\b|\b42069\b/g, (port) =>
      String(ports.get(DOC_PORTS[Number(port) as keyof typeof DOC_PORTS])!),
    );
  const shellEnv = () => ({
    ...process.env,
    // The operator's shell: none of the suite's settings leak into what .env decides.
    FREE_RATE_LIMIT_PER_MINUTE: "",
    TEST_DATABASE: "",
    ENV_FILES: "",
    // Each replica's own relayer key, which the doc's replica lines name (anvil dev keys #6 and #7).
    REPLICA_1_RELAYER_KEY: anvilDevAccount(6).privateKey,
    REPLICA_2_RELAYER_KEY: anvilDevAccount(7).privateKey,
  });

  /** A doc line run by bash in the checkout, in its own process group (stopped by the tests), its output collected. */
  function shell(line: string) {
    const child = spawn("bash", ["-c", line], {
      cwd: checkout,
      env: shellEnv(),
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    killOnExit(child);
    shells.push(child);
    let output = "";
    child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
    return { child, output: () => output };
  }

  function run(line: string, timeoutMs = 120_000): Promise<Run> {
    return new Promise((resolvePromise) => {
      const { child, output } = shell(line);
      const timer = setTimeout(() => void stopProcessGroup(child, 1_000), timeoutMs);
      child.on("exit", (code) => {
        clearTimeout(timer);
        resolvePromise({ code, output: output() });
      });
    });
  }

  async function serve(line: string): Promise<Service> {
    const port = Number(/PORT=(\d+)/.exec(line)?.[1] ?? ports.get("indexer"));
    const { child, output } = shell(line);
    const service = { name: line, url: `http://127.0.0.1:${port}`, child, output };
    services.push(service);
    const deadline = Date.now() + 240_000;
    while (Date.now() < deadline) {
      if (child.exitCode !== null)
        throw new Error(`\`${line}\` exited with ${child.exitCode}:\n${output().slice(-3000)}`);
      const ready = await fetch(`${service.url}/ready`).then(
        (r) => r.ok,
        () => false,
      );
      if (ready) return service;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`\`${line}\` not ready in 240 s:\n${output().slice(-3000)}`);
  }

  beforeAll(async () => {
    for (const name of Object.values(DOC_PORTS)) ports.set(name, await freePort());
    // Two months of history (the personas' and two background wallets'): nothing below depends on
    // more, and every month more is about 600 transfers for the indexer to backfill.
    [celo] = await Promise.all([
      startCeloStandin({ months: 2, wallets: 2, transfers: 40 }),
      admin(`create database "${database}"`),
    ]);
    checkout = operatorCheckout();

    // The operator's walk: each line of the section in order. Where the doc says to fill in .env,
    // the operator's values go in (the test's only part in it besides ports).
    const replicas: Promise<Service>[] = [];
    for (const raw of rehearsalLines(readFileSync(DOC, "utf8"))) {
      const line = localize(raw);
      if (REPLICA.test(line)) {
        replicas.push(serve(line));
        continue;
      }
      await Promise.all(replicas.splice(0));
      if (SERVING.test(line)) {
        await serve(line);
        continue;
      }
      const result = await run(line);
      runs.push({ line, run: result });
      if (result.code !== 0) throw new Error(`\`${line}\` exited with ${result.code}:\n${result.output}`);
      if (/^cp \.env\.example \.env$/.test(line)) {
        const env = join(checkout, ".env");
        const values: Record<string, string> = {
          PONDER_RPC_URL_42220: celo.rpcUrl,
          DATABASE_URL: databaseUrl,
          CELO_START_BLOCK: String(celo.history.startBlock),
          X402_PAY_TO: celo.accounts.treasury.address,
          X402_RELAYER_PRIVATE_KEY: celo.accounts.relayer.privateKey,
          REPORTER_PRIVATE_KEY: celo.accounts.reporter.privateKey,
          REPORTER_DEPLOYER_PRIVATE_KEY: celo.accounts.deployer.privateKey,
          SIGN_IN_ORIGIN: `http://127.0.0.1:${ports.get("indexer")}`,
          PORT: String(ports.get("indexer")),
          DATA_PORT: String(ports.get("data")),
        };
        for (const [key, value] of Object.entries(values)) setEnvValue(env, key, value);
      }
    }
    await Promise.all(replicas.splice(0));
    refusal = run(`CELO_START_BLOCK=${celo.history.startBlock + 1} PORT=${await freePort()} npm start`);
  }, 900_000);

  afterAll(async () => {
    await Promise.all(shells.map((child) => stopProcessGroup(child, 25_000)));
    await celo?.stop();
    await admin(`drop database if exists "${database}" with (force)`).catch(() => {});
    if (checkout) rmSync(checkout, { recursive: true, force: true });
  }, 120_000);

  const replica = (n: 1 | 2) => services.find((s) => s.url.endsWith(`:${ports.get(`replica-${n}`)}`))!;
  const payingFetch = () =>
    wrapFetchWithPaymentFromConfig(fetch, {
      schemes: [{ network: "eip155:42220", client: new ExactEvmScheme(lender) }],
    });
  const post = (url: string, body: unknown) =>
    payingFetch()(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  it("runs every command of the README's mainnet block, in the same order", () => {
    const readme = /## Running against Celo mainnet[\s\S]*?```sh\n([\s\S]*?)```/.exec(
      readFileSync("README.md", "utf8"),
    )![1]!;
    const commands = readme
      .split("\n")
      .map((line) => line.replace(/#.*/, "").trim())
      .filter(Boolean);
    const walked = rehearsalLines(readFileSync(DOC, "utf8"));
    expect(commands.length).toBeGreaterThan(2);
    expect(commands.map((c) => walked.indexOf(c))).toEqual(
      [...commands.map((c) => walked.indexOf(c))].sort((a, b) => a - b),
    );
    expect(commands.filter((c) => !walked.includes(c))).toEqual([]);
  });

  it("checks the whole configuration in one run, then deploys the reporter and writes it into .env", () => {
    const check = runs.find((r) => r.line.includes("check:config"));
    expect(check?.run.output).toMatch(/42220/);
    expect(check?.run.output).not.toMatch(/\berror\b/i);
    const env = readFileSync(join(checkout, ".env"), "utf8");
    expect(env).toMatch(/^REPORTER_ADDRESS=0x[0-9a-fA-F]{40}$/m);
    expect(env).toMatch(/^REPORTER_START_BLOCK=\d+$/m);
  });

  it("serves a lender's paid screen through a replica, paid by the stock x402 client in Celo's USDT or USDC", async () => {
    const treasury = () =>
      Promise.all(
        [celo.tokens.USDT, celo.tokens.USDC].map((token) =>
          tokenBalance(celo.rpcUrl, token.address as Hex, celo.accounts.treasury.address),
        ),
      );
    const before = await treasury();
    const res = await post(`${replica(1).url}/api/lender/screen`, {
      walletAddress: celo.personas.salaried!.address,
      callerAddress: lender.address,
    });
    const body = (await res.json()) as { walletAddress: string };
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.walletAddress.toLowerCase()).toBe(celo.personas.salaried!.address.toLowerCase());
    expect(decodePaymentResponseHeader(res.headers.get("payment-response")!).success).toBe(true);
    // Exactly 0.01 reached the treasury, in whichever of the two tokens the client chose.
    const after = await treasury();
    expect(after[0]! - before[0]! + (after[1]! - before[1]!)).toBe(10_000n);
  });

  it("issues a passport through one replica that the other verifies, its content checked against its CID", async () => {
    const res = await post(`${replica(1).url}/api/agent/report`, {
      walletAddress: celo.personas.salaried!.address,
      callerAddress: lender.address,
    });
    const passport = (await res.json()) as { reportId: string };
    expect(res.status, JSON.stringify(passport)).toBe(200);
    type Verified = {
      valid: boolean;
      report: unknown;
      integrity: { checked: boolean; contentMatchesCid: boolean | null };
    };
    const verify = async () =>
      (await (await fetch(`${replica(2).url}/api/agent/verify/${passport.reportId}`)).json()) as Verified;
    // Valid once the indexer has the attestation (a block a second): up to 60 s.
    let verified = await verify();
    for (let i = 0; i < 240 && !verified.valid; i++) {
      await new Promise((r) => setTimeout(r, 250));
      verified = await verify();
    }
    expect(verified.valid, JSON.stringify(verified)).toBe(true);
    expect(verified.report).not.toBeNull();
    expect(verified.integrity).toMatchObject({
      checked: true,
      contentMatchesCid: true,
      attestationMatchesContent: true,
    });
  });

  it("makes a statement through one replica that the other serves byte for byte from /ipfs", async () => {
    const res = await post(`${replica(1).url}/api/agent/statement`, {
      walletAddress: celo.personas.salaried!.address,
      callerAddress: lender.address,
    });
    const statement = (await res.json()) as { cid: string; size: number; sha256: string };
    expect(res.status, JSON.stringify(statement)).toBe(200);
    const pdf = await fetch(`${replica(2).url}/ipfs/${statement.cid}`);
    expect(pdf.status).toBe(200);
    const bytes = new Uint8Array(await pdf.arrayBuffer());
    expect(bytes.length).toBe(statement.size);
    expect(sha256(bytes).slice(2)).toBe(statement.sha256);
  });

  it("refuses to resume the index after CELO_START_BLOCK changed, in one line, exit 78", async () => {
    const result = await refusal!;
    expect(result.code, result.output).toBe(78);
    expect(result.output).toMatch(
      /Cannot start: CELO_START_BLOCK \(was \d+, now \d+\) changed since schema "reputation" was indexed/,
    );
  });
});
