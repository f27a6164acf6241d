import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { type Hex, zeroAddress } from "viem";
import type { Manifest } from "../config/manifest.ts";
import { killOnExit, stopProcessGroup } from "../devnet/anvil.ts";
import { freePort } from "../devnet/ports.ts";
import { rpc } from "../devnet/rpc.ts";
import { ponderChildEnv } from "./indexer.ts";
import { signAuthorization, specHeader } from "./payments.ts";

// What the load benchmarks (bench/realtime.ts, bench/soak.ts) share: API replicas, per-route
// latency figures, resident memory of a process group, and how far the indexer is behind.

export const pct = (xs: number[], p: number) =>
  xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]! : Number.NaN;
export const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);

import { firstLine, sleep } from "../shared/async.ts";

export { sleep };
export const fmtMs = (x: number) => (Number.isFinite(x) ? `${x.toFixed(1)} ms` : "-");

/** Latencies and outcomes per route label. */
/**
 * What a benchmark started, stopped on the way out in reverse order, Ctrl-C (SIGINT/SIGTERM)
 * included: push a stopper when something starts, call closeAll() at the end.
 */
export function cleanupOnExit() {
  const closers: (() => Promise<unknown>)[] = [];
  const closeAll = async () => {
    while (closers.length) await closers.pop()!().catch((error) => log(`cleanup: ${(error as Error).message}`));
  };
  for (const signal of ["SIGINT", "SIGTERM"] as const)
    process.once(signal, () => {
      log(`${signal}: stopping everything this benchmark started…`);
      void closeAll().finally(() => process.exit(130));
    });
  return { closers, closeAll };
}

export class Recorder {
  readonly times = new Map<string, number[]>();
  readonly errors = new Map<string, number>();
  readonly samples: string[] = [];

  ok(route: string, ms: number) {
    let xs = this.times.get(route);
    if (!xs) this.times.set(route, (xs = []));
    xs.push(ms);
  }

  fail(route: string, what: string) {
    this.errors.set(route, (this.errors.get(route) ?? 0) + 1);
    if (this.samples.length < 10) this.samples.push(`${route}: ${what}`);
  }

  totalErrors() {
    return [...this.errors.values()].reduce((a, b) => a + b, 0);
  }

  /** Times one request; `expect` is the status that counts as success. */
  async time(route: string, expect: number, send: () => Promise<Response>): Promise<Response | undefined> {
    const t0 = performance.now();
    try {
      const res = await send();
      const body = await res.arrayBuffer();
      const ms = performance.now() - t0;
      if (res.status === expect) {
        this.ok(route, ms);
        return res;
      }
      this.fail(route, `${res.status} ${Buffer.from(body).toString().slice(0, 200)}`);
    } catch (error) {
      this.fail(route, firstLine(error));
    }
    return undefined;
  }

  table(title: string): string {
    const lines = [
      title,
      `${"route".padEnd(40)} ${"n".padStart(7)} ${"errors".padStart(7)} ${"p50".padStart(10)} ${"p99".padStart(10)} ${"max".padStart(10)}`,
    ];
    const routes = new Set([...this.times.keys(), ...this.errors.keys()]);
    for (const route of [...routes].sort()) {
      const xs = this.times.get(route) ?? [];
      lines.push(
        `${route.padEnd(40)} ${String(xs.length).padStart(7)} ${String(this.errors.get(route) ?? 0).padStart(7)} ${fmtMs(pct(xs, 50)).padStart(10)} ${fmtMs(pct(xs, 99)).padStart(10)} ${fmtMs(xs.length ? Math.max(...xs) : Number.NaN).padStart(10)}`,
      );
    }
    return lines.join("\n");
  }
}

/** Resident memory (MB) of every process in `pid`'s process group (a ponder process and anything it spawned). */
export function groupRssMb(pid: number): number {
  let kb = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // Fields after the command name (which may hold spaces): state ppid pgrp …
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[2]) !== pid) continue;
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${entry}/status`, "utf8"));
      kb += Number(m?.[1] ?? 0);
    } catch {
      /* gone meanwhile */
    }
  }
  return kb / 1024;
}

export type Replica = { url: string; dataUrl: string; pid: number; output: () => string; stop: () => Promise<void> };

/**
 * An API replica: `ponder serve` over the schema an indexer writes (Postgres only), in its own
 * process group, on ports from the OS. `env` is the indexer's (same database, schema, manifest)
 * plus what differs per replica (its own relayer key).
 */
export async function startReplica(env: Record<string, string>, schema: string): Promise<Replica> {
  const port = await freePort();
  const dataPort = await freePort();
  const child = spawn("ponder", ["serve", "--schema", schema, "--port", String(port), "--log-format", "json"], {
    env: ponderChildEnv(env, dataPort),
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  killOnExit(child);
  let output = "";
  child.stdout?.on("data", (d: Buffer) => (output = (output + d.toString()).slice(-200_000)));
  child.stderr?.on("data", (d: Buffer) => (output = (output + d.toString()).slice(-200_000)));
  const url = `http://127.0.0.1:${port}`;
  const replica: Replica = {
    url,
    dataUrl: `http://127.0.0.1:${dataPort}`,
    pid: child.pid!,
    output: () => output,
    stop: () => stopProcessGroup(child, 25_000),
  };
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`replica exited (${child.exitCode}):\n${output.slice(-3000)}`);
    try {
      if ((await fetch(`${url}/api/x402/config`)).ok) return replica;
    } catch {
      /* not listening yet */
    }
    await sleep(250);
  }
  await replica.stop();
  throw new Error(`replica did not answer within 120 s:\n${output.slice(-3000)}`);
}

/** The block Ponder has indexed through (its own /status, which costs nothing). */
async function indexedBlock(apiUrl: string): Promise<number | null> {
  try {
    const res = await fetch(`${apiUrl}/status`, { signal: AbortSignal.timeout(2_000) });
    if (!res.ok) return null;
    const status = (await res.json()) as Record<string, { block?: { number: number } | null }>;
    return status.celo?.block?.number ?? null;
  } catch {
    return null;
  }
}

export async function chainHead(rpcUrl: string): Promise<number> {
  return Number(BigInt(await rpc<Hex>(rpcUrl, "eth_blockNumber")));
}

/** Samples head - indexed every `everyMs` until stopped. */
export function sampleLag(rpcUrl: string, apiUrl: string, everyMs = 250) {
  const lags: number[] = [];
  let missed = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const t0 = performance.now();
      const [head, indexed] = await Promise.all([chainHead(rpcUrl).catch(() => null), indexedBlock(apiUrl)]);
      if (head === null || indexed === null) missed++;
      else lags.push(head - indexed);
      await sleep(Math.max(0, everyMs - (performance.now() - t0)));
    }
  })();
  return {
    lags,
    stop: async () => {
      running = false;
      await loop;
      return { lags, missed };
    },
  };
}

/** A lender's signed screen payment (the service interface's X-PAYMENT), for one request. */
export async function paidHeader(manifest: Manifest, i: number): Promise<{ header: string; payer: Hex }> {
  const lender = manifest.lenders[i % manifest.lenders.length]!;
  const token = manifest.tokens.USDT;
  const signed = await signAuthorization(lender.privateKey as Hex, token, {
    to: manifest.service.treasury.address as Hex,
  });
  return { header: specHeader(signed, token.address as Hex), payer: lender.address as Hex };
}

/** Indexed wallets to screen: the personas (always indexed). */
export function screenWallets(manifest: Manifest): Hex[] {
  return Object.values(manifest.personas)
    .map((p) => p.address as Hex)
    .filter((a) => a !== zeroAddress);
}
