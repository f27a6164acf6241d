import { parseArgs } from "node:util";
import type { Hex } from "viem";
import { SIGNAL_NAMES } from "../api/wallet/signal-catalog.ts";
import { anvilDevAccount } from "../devnet/accounts.ts";
import { startTestDevnet } from "../harness/devnet.ts";
import { databaseSlot, startIndexer, waitForBlock } from "../harness/indexer.ts";
import {
  chainHead,
  cleanupOnExit,
  fmtMs,
  groupRssMb,
  log,
  paidHeader,
  pct,
  Recorder,
  type Replica,
  screenWallets,
  sleep,
  startReplica,
} from "../harness/traffic.ts";

// npm run bench:soak -- [--minutes 10] [--rate 20] [--wallets 300] [--pollers 16] [--poll-seconds 15] [--rounds 3] [--concurrency 4]
// One indexer (ponder start) and two API replicas (ponder serve, each with its own relayer key)
// on one Postgres, over a seeded devnet (anvil automining).
// (1) Unless --pollers 0: paid screens against replica A (--concurrency in flight) for
//     --poll-seconds: without pollers, with --pollers clients polling GET /api/stats on the same
//     replica once a second each, and in closed loops (as fast as answered), alternated for
//     --rounds rounds: p50 and throughput, and their ratios (issue 15, item 6).
// (2) Unless --minutes 0: mixed traffic at a fixed rate (--rate requests/s, open loop) spread
//     over both replicas: paid and unpaid screens, paid signals, free signal reads after a paid
//     screen, and the free routes. Errors, p50/p99 per route, and each process's RSS at the start,
//     after the first minute, and at the end.
// Free routes are rate limited per client address, and every request here comes from 127.0.0.1:
// the processes run with FREE_RATE_LIMIT_PER_MINUTE raised, as behind a proxy (docs/operations.md).
const { values } = parseArgs({
  options: {
    minutes: { type: "string", default: "10" },
    rate: { type: "string", default: "20" },
    wallets: { type: "string", default: "300" },
    pollers: { type: "string", default: "16" },
    "poll-seconds": { type: "string", default: "15" },
    rounds: { type: "string", default: "3" },
    concurrency: { type: "string", default: "4" },
  },
});
const minutes = Number(values.minutes);
const rate = Number(values.rate);
const pollers = Number(values.pollers);
const pollSeconds = Number(values["poll-seconds"]);
const concurrency = Number(values.concurrency);
const rounds = Number(values.rounds);

const { closers, closeAll } = cleanupOnExit();

const lines: string[] = [];
const report = (line = "") => lines.push(line);

try {
  log(`seeding a devnet (${values.wallets} background wallets)…`);
  const devnet = await startTestDevnet({ wallets: Number(values.wallets) });
  closers.push(() => devnet.stop());
  const { manifest } = devnet;
  const slot = databaseSlot("postgres");
  await slot.prepare();
  closers.push(() => slot.drop());
  const env = {
    DEVNET_MANIFEST: devnet.manifestPath,
    ...slot.env,
    LOG_LEVEL: "warn",
    FREE_RATE_LIMIT_PER_MINUTE: "1000000",
    VERIFY_RATE_LIMIT_PER_MINUTE: "100000",
  };
  const indexer = await startIndexer(env);
  closers.push(() => indexer.stop());
  await waitForBlock(indexer, await chainHead(manifest.rpcUrl), 600_000);
  log(`indexed ${manifest.population.transfers} transfers; starting two replicas`);
  // One relayer key per replica (anvil #6 and #7; the indexer's own API keeps the devnet's #4).
  const replicas: Replica[] = [];
  for (const [i, key] of [6, 7].entries()) {
    const replica = await startReplica(
      { ...env, X402_RELAYER_PRIVATE_KEY: anvilDevAccount(key).privateKey },
      slot.schema,
    );
    closers.push(() => replica.stop());
    replicas.push(replica);
    log(`replica ${"AB"[i]} on ${replica.url} (pid ${replica.pid}, relayer anvil #${key})`);
  }
  const wallets = screenWallets(manifest);
  const screenBody = (wallet: Hex, payer: Hex) => JSON.stringify({ walletAddress: wallet, callerAddress: payer });
  let n = 0;
  const paidScreen = async (recorder: Recorder, replica: Replica, route = "POST /api/lender/screen (paid)") => {
    const i = n++;
    const wallet = wallets[i % wallets.length]!;
    const paid = await paidHeader(manifest, i);
    const res = await recorder.time(route, 200, () =>
      fetch(`${replica.url}/api/lender/screen`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-payment": paid.header },
        body: screenBody(wallet, paid.payer),
      }),
    );
    return res ? { wallet, lender: i % manifest.lenders.length, replica } : undefined;
  };

  // (1) Paid screens with and without pollers of GET /api/stats.
  if (pollers > 0) {
    const [a] = replicas as [Replica, Replica];
    const screensFor = async (label: string) => {
      const recorder = new Recorder();
      const t0 = performance.now();
      const until = t0 + pollSeconds * 1000;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (performance.now() < until) await paidScreen(recorder, a, label);
        }),
      );
      const xs = recorder.times.get(label) ?? [];
      return {
        label,
        p50: pct(xs, 50),
        p99: pct(xs, 99),
        perSecond: xs.length / ((performance.now() - t0) / 1000),
        errors: recorder.totalErrors(),
        samples: recorder.samples,
      };
    };
    for (let i = 0; i < 20; i++) await paidScreen(new Recorder(), a); // warm up
    /** Paid screens while `pollers` clients poll GET /api/stats, each every `everyMs` (0: closed loop, as fast as answered). */
    const withPollers = async (label: string, everyMs: number) => {
      let polling = true;
      const polls = new Recorder();
      const loops = Array.from({ length: pollers }, async (_, k) => {
        await sleep((k * everyMs) / pollers); // spread over the interval
        while (polling) {
          const t0 = performance.now();
          await polls.time("GET /api/stats", 200, () => fetch(`${a.url}/api/stats`));
          if (everyMs) await sleep(Math.max(0, everyMs - (performance.now() - t0)));
        }
      });
      await sleep(Math.max(1000, everyMs));
      const pollsBefore = polls.times.get("GET /api/stats")?.length ?? 0;
      const pollStart = performance.now();
      const result = await screensFor(label);
      const stats = polls.times.get("GET /api/stats") ?? [];
      const pollRate = (stats.length - pollsBefore) / ((performance.now() - pollStart) / 1000);
      polling = false;
      await Promise.all(loops);
      return {
        ...result,
        polls: `${pollRate.toFixed(0)} GET /api/stats/s answered, p50 ${fmtMs(pct(stats, 50))}, p99 ${fmtMs(pct(stats, 99))}, errors ${polls.totalErrors()}`,
      };
    };
    // Alternated in rounds, since this machine's other load drifts: without, 1/s each, closed loop.
    type Phase = Awaited<ReturnType<typeof screensFor>> & { polls?: string };
    const phases: Phase[][] = [[], [], []];
    for (let round = 0; round < rounds; round++) {
      phases[0]!.push(await screensFor("without pollers"));
      phases[1]!.push(await withPollers(`${pollers} pollers, 1/s each`, 1000));
      phases[2]!.push(await withPollers(`${pollers} pollers, closed loop`, 0));
    }
    const mean = (xs: Phase[], pick: (p: Phase) => number) => xs.reduce((s, p) => s + pick(p), 0) / xs.length;
    report(
      `(1) paid screens on replica A, ${concurrency} in flight, ${pollSeconds} s per phase, ${rounds} rounds; ${pollers} clients polling GET /api/stats on the same replica`,
    );
    for (let round = 0; round < rounds; round++)
      for (const phase of phases) {
        const r = phase[round]!;
        report(
          `    round ${round + 1} ${r.label.padEnd(28)} p50 ${fmtMs(r.p50).padStart(9)}  p99 ${fmtMs(r.p99).padStart(9)}  ${r.perSecond.toFixed(1).padStart(6)} screens/s  errors ${r.errors}${r.samples.length ? ` (${r.samples[0]})` : ""}${r.polls ? `;  pollers: ${r.polls}` : ""}`,
        );
      }
    const base = { p50: mean(phases[0]!, (p) => p.p50), perSecond: mean(phases[0]!, (p) => p.perSecond) };
    report(`    mean without pollers: p50 ${fmtMs(base.p50)}, ${base.perSecond.toFixed(1)} screens/s`);
    for (const phase of phases.slice(1)) {
      const p50 = mean(phase, (p) => p.p50);
      const perSecond = mean(phase, (p) => p.perSecond);
      report(
        `    ${phase[0]!.label.padEnd(28)} mean p50 ${fmtMs(p50)}, ${perSecond.toFixed(1)} screens/s: p50 x${(p50 / base.p50).toFixed(3)}, throughput x${(perSecond / base.perSecond).toFixed(3)} (target: at most 10% slower: p50 <= x1.10, throughput >= x0.90)`,
      );
    }
    log(lines.join("\n"));
  }

  // (2) The soak: mixed traffic at a fixed rate on both replicas.
  if (minutes > 0) {
    const recorder = new Recorder();
    const screened: { wallet: Hex; lender: number; replica: Replica }[] = [];
    const processes = [
      { name: "indexer (ponder start)", pid: indexer.child.pid! },
      { name: "replica A (ponder serve)", pid: replicas[0]!.pid },
      { name: "replica B (ponder serve)", pid: replicas[1]!.pid },
      { name: "anvil", pid: devnet.anvil.pid },
    ];
    const rss = () => processes.map((p) => groupRssMb(p.pid));
    // Some screens first, so free signal reads have screens to follow from the start.
    for (let i = 0; i < 10; i++) {
      const s = await paidScreen(new Recorder(), replicas[i % 2]!);
      if (s) screened.push(s);
    }
    const mix = [
      "screen",
      "free",
      "signal-free",
      "unpaid",
      "signals",
      "free",
      "screen",
      "signal-free",
      "free",
      "free",
    ] as const;
    const free = ["/api/stats", "/api/x402/config", "/api/health/integrations", "/openapi.json"];
    let freeNext = 0;
    const send = async (i: number) => {
      const kind = mix[i % mix.length]!;
      const replica = replicas[i % 2]!;
      if (kind === "screen") {
        const s = await paidScreen(recorder, replica);
        if (s && screened.push(s) > 500) screened.shift();
      } else if (kind === "unpaid") {
        const wallet = wallets[i % wallets.length]!;
        await recorder.time("POST /api/lender/screen (unpaid: 402)", 402, () =>
          fetch(`${replica.url}/api/lender/screen`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: screenBody(wallet, manifest.lenders[0]!.address as Hex),
          }),
        );
      } else if (kind === "signals") {
        const wallet = wallets[i % wallets.length]!;
        const paid = await paidHeader(manifest, i);
        await recorder.time("GET /api/wallet/{a}/signals (paid)", 200, () =>
          fetch(`${replica.url}/api/wallet/${wallet}/signals`, { headers: { "x-payment": paid.header } }),
        );
      } else if (kind === "signal-free") {
        // Free to the payer of a recent screen of this wallet, on either replica (the ledger is shared).
        const s = screened[Math.floor(Math.random() * screened.length)]!;
        const paid = await paidHeader(manifest, s.lender);
        const signal = SIGNAL_NAMES[i % SIGNAL_NAMES.length];
        await recorder.time("GET .../signals/{signal} (free after)", 200, () =>
          fetch(`${replica.url}/api/wallet/${s.wallet}/signals/${signal}`, { headers: { "x-payment": paid.header } }),
        );
      } else {
        const path = free[freeNext++ % free.length]!;
        await recorder.time(`GET ${path}`, 200, () => fetch(`${replica.url}${path}`));
      }
    };
    const rssStart = rss();
    let rssMinute: number[] | undefined;
    // RSS every 10 s: one reading is mostly where the garbage collector happens to be.
    const rssSamples: { at: number; mb: number[] }[] = [{ at: 0, mb: rssStart }];
    let lastRss = performance.now();
    log(`soak: ${rate} requests/s for ${minutes} min over both replicas`);
    const t0 = performance.now();
    const end = t0 + minutes * 60_000;
    const inFlight = new Set<Promise<void>>();
    let i = 0;
    let skipped = 0;
    let lastLog = t0;
    while (performance.now() < end) {
      const due = t0 + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      if (inFlight.size >= 200) {
        skipped++; // the service is not keeping up: counted as an error below
      } else {
        const p = send(i).catch((error) => recorder.fail("client", (error as Error).message));
        inFlight.add(p);
        void p.finally(() => inFlight.delete(p));
      }
      i++;
      if (!rssMinute && performance.now() - t0 > 60_000) rssMinute = rss();
      if (performance.now() - lastRss > 10_000) {
        lastRss = performance.now();
        rssSamples.push({ at: lastRss - t0, mb: rss() });
      }
      if (performance.now() - lastLog > 60_000) {
        lastLog = performance.now();
        log(
          `  ${((lastLog - t0) / 60_000).toFixed(0)} min: ${i} requests sent, ${recorder.totalErrors()} errors, RSS ${rss()
            .map((x) => x.toFixed(0))
            .join(" / ")} MB`,
        );
      }
    }
    await Promise.all(inFlight);
    const elapsed = (performance.now() - t0) / 1000;
    const rssEnd = rss();
    const head = await chainHead(manifest.rpcUrl);
    const indexedLag =
      head -
      ((await (await fetch(`${indexer.url}/status`)).json()) as { celo: { block: { number: number } } }).celo.block
        .number;
    report();
    report(
      `(2) soak: ${i} requests in ${(elapsed / 60).toFixed(1)} min (${(i / elapsed).toFixed(1)}/s, open loop) over two replicas on one Postgres; ${head - manifest.headBlock} blocks mined meanwhile (settlements), indexer ${indexedLag} blocks behind at the end`,
    );
    report(recorder.table("    per route (both replicas):").replace(/\n/g, "\n    "));
    report(
      `    errors: ${recorder.totalErrors() + skipped} (target 0)${skipped ? `, of which ${skipped} requests not sent (200 in flight)` : ""}${recorder.samples.length ? `; first: ${recorder.samples.slice(0, 3).join(" | ")}` : ""}`,
    );
    report(`    RSS (MB, process group)          start   after 1 min        end   growth from start   from 1 min`);
    processes.forEach((p, k) => {
      const s = rssStart[k]!;
      const m = rssMinute?.[k] ?? Number.NaN;
      const e = rssEnd[k]!;
      report(
        `    ${p.name.padEnd(28)} ${s.toFixed(0).padStart(8)} ${m.toFixed(0).padStart(13)} ${e.toFixed(0).padStart(10)} ${`${(((e - s) / s) * 100).toFixed(1)}%`.padStart(19)} ${`${(((e - m) / m) * 100).toFixed(1)}%`.padStart(12)}`,
      );
    });
    const median = (xs: number[]) => pct(xs, 50);
    const firstMinute = rssSamples.filter((x) => x.at <= 60_000);
    const lastMinute = rssSamples.filter((x) => x.at >= elapsed * 1000 - 60_000);
    report(`    RSS median over 10 s samples (MB)  first minute   last minute   growth`);
    processes.forEach((p, k) => {
      const a = median(firstMinute.map((x) => x.mb[k]!));
      const b = median(lastMinute.map((x) => x.mb[k]!));
      report(
        `    ${p.name.padEnd(28)} ${a.toFixed(0).padStart(13)} ${b.toFixed(0).padStart(13)} ${`${(((b - a) / a) * 100).toFixed(1)}%`.padStart(8)}`,
      );
    });
    report(`    target: RSS growth under 10% (anvil is the test chain, holding every block mined)`);
  }
} finally {
  await closeAll();
}
console.log(`\nSoak benchmark (Postgres, two replicas + one indexer, anvil automining, 2 cores)\n${lines.join("\n")}`);
