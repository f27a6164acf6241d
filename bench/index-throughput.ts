import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { startTestDevnet } from "../harness/devnet.ts";
import { databaseSlot, startIndexer, type TestDatabase, waitFor } from "../harness/indexer.ts";

// npm run bench:index -- [--transfers 200000] [--wallets 2000] [--db pglite|postgres] [--rounds 1]
// Backfill throughput and peak memory of this indexer (aggregates maintained per transfer) against
// a minimal insert-only ERC-20 Ponder indexer, over the same seeded devnet, in the same run.
const { values } = parseArgs({
  options: {
    transfers: { type: "string", default: "200000" },
    wallets: { type: "string", default: "2000" },
    db: { type: "string", default: "pglite" },
    rounds: { type: "string", default: "1" },
  },
});

const started = performance.now();
const devnet = await startTestDevnet({
  wallets: Number(values.wallets),
  transfers: Number(values.transfers),
  months: 15,
  slotHours: 6,
});
const total = devnet.manifest.population.transfers;
console.log(
  `devnet: ${total} transfers, ${devnet.manifest.population.wallets} background wallets, ${devnet.manifest.headBlock} blocks, seeded in ${((performance.now() - started) / 1000).toFixed(1)} s`,
);

type Result = { name: string; seconds: number; perSecond: number; peakMb: number };

async function backfill(name: string, root: string | undefined): Promise<Result> {
  const slot = databaseSlot(values.db as TestDatabase);
  await slot.prepare();
  const indexer = await startIndexer(
    { DEVNET_MANIFEST: devnet.manifestPath, PONDER_LOG_LEVEL: "info", ...slot.env },
    { root },
  );
  try {
    const line = await waitFor(
      `${name} backfill`,
      async () =>
        indexer
          .output()
          .split("\n")
          .find((l) => l.includes("Completed backfill indexing")),
      indexer,
      1_800_000,
    );
    const seconds = (JSON.parse(line) as { duration: number }).duration / 1000;
    // VmHWM: the process's peak resident memory so far.
    const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${indexer.child.pid}/status`, "utf8"));
    return { name, seconds, perSecond: total / seconds, peakMb: Number(hwm?.[1] ?? 0) / 1024 };
  } finally {
    await indexer.stop();
    await slot.drop();
  }
}

const results: Result[] = [];
for (let round = 0; round < Number(values.rounds); round++) {
  results.push(await backfill("baseline (insert-only)", "bench/baseline"));
  results.push(await backfill("this indexer", undefined));
}
await devnet.stop();

console.log(`\nbackfill of ${total} transfers on ${values.db} (2 cores):`);
console.log("indexer                   seconds   transfers/s   peak RSS MB");
for (const r of results)
  console.log(
    `${r.name.padEnd(24)} ${r.seconds.toFixed(1).padStart(8)} ${Math.round(r.perSecond).toString().padStart(13)} ${Math.round(r.peakMb).toString().padStart(13)}`,
  );
const mean = (name: string, pick: (r: Result) => number) => {
  const own = results.filter((r) => r.name === name);
  return own.reduce((s, r) => s + pick(r), 0) / own.length;
};
const ratio = mean("this indexer", (r) => r.perSecond) / mean("baseline (insert-only)", (r) => r.perSecond);
console.log(`\nthroughput ratio (this / baseline): ${ratio.toFixed(2)} (target >= 0.80)`);
console.log(
  `memory ratio (this / baseline): ${(mean("this indexer", (r) => r.peakMb) / mean("baseline (insert-only)", (r) => r.peakMb)).toFixed(2)}`,
);
