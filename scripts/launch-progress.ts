import { z } from "zod";
import type { Env } from "../config/env.ts";
import type { SeedingProgress } from "../devnet/devnet.ts";
import { reachableHost } from "./ponder-process.ts";
import { createProgress, type ProgressOptions } from "./progress.ts";

/** The devnet's seeding, in days of history (how many blocks there will be is not known before). */
export function seedingProgress(options: ProgressOptions = {}) {
  const progress = createProgress(
    { name: "Seeding", unit: "days", eventUnit: "transfers" },
    { windowMs: 10_000, ...options },
  );
  let last: SeedingProgress | undefined;
  return {
    onSeeding: (seeded: SeedingProgress) =>
      progress.update({ done: (last = seeded).days, total: seeded.ofDays, events: seeded.transfers }),
    finish: () => progress.finish(last && { done: last.ofDays, total: last.ofDays, events: last.transfers }),
    /** A line of the launcher's own while the bar is drawn. */
    log: (line: string) => progress.write(`${line}\n`),
  };
}

// The part of the service's /ready answer (api/indexing/state.ts) read here.
const block = z.object({ number: z.number() }).nullable();
const readyAnswer = z.object({ startBlock: z.number(), indexedBlock: block, headBlock: block });

/** Ponder's count of events indexed (every handler's), from its Prometheus text; null when it has none. */
export function completedEvents(metrics: string): number | null {
  let total: number | null = null;
  for (const line of metrics.split("\n")) {
    if (!/^ponder_indexing_completed_events[{ ]/.test(line)) continue;
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (Number.isFinite(value)) total = (total ?? 0) + value;
  }
  return total;
}

/**
 * The backfill, in blocks from the start block to the chain head, from what the launcher already
 * polls until the service is ready (the service's /ready: start block, indexed block, head), and
 * the events indexed from Ponder's /metrics on the data listener (DATA_HOST:DATA_PORT). Hand
 * `onStatus` and `stdout` to runPonder(), and call finish() once it is ready.
 */
export function backfillProgress(env: Pick<Env, "DATA_HOST" | "DATA_PORT">, options: ProgressOptions = {}) {
  const metricsUrl = `http://${reachableHost(env.DATA_HOST)}:${env.DATA_PORT}/metrics`;
  const progress = createProgress(
    { name: "Backfill", unit: "blocks", eventUnit: "events" },
    { windowMs: 60_000, ...options },
  );
  let figures: { done: number; total: number; events: number } | undefined;
  let events = 0;
  let reading: Promise<void> | undefined;
  const readEvents = (timeoutMs = 2_000) =>
    (reading ??= fetch(metricsUrl, { signal: AbortSignal.timeout(timeoutMs) })
      .then((res) => (res.ok ? res.text() : ""))
      .then((text) => void (events = completedEvents(text) ?? events))
      .catch(() => {}) // no data listener (DATA_PORT taken): blocks only
      .finally(() => (reading = undefined)));
  return {
    onStatus(answer: unknown) {
      const status = readyAnswer.safeParse(answer);
      if (!status.success) return;
      const { startBlock, indexedBlock, headBlock } = status.data;
      // The head cannot be read (RPC down): the last total stands.
      const total = headBlock ? Math.max(0, headBlock.number - startBlock) : figures?.total;
      if (total === undefined) return;
      void readEvents();
      figures = {
        done: indexedBlock ? Math.min(total, Math.max(0, indexedBlock.number - startBlock)) : 0,
        total,
        events,
      };
      progress.update(figures);
    },
    /**
     * The last line, with the events counted at the end: by a read of its own, not one begun before
     * the service was ready (a short backfill ends while that read is still out, and it counts 0).
     */
    async finish() {
      await reading;
      await readEvents(5_000);
      progress.finish(figures && { ...figures, events });
    },
    /** Ponder's output while a bar is drawn; undefined when not on a terminal, where Ponder writes to the same output itself. */
    stdout: (options.out ?? process.stdout).isTTY ? (chunk: Buffer) => progress.write(chunk) : undefined,
  };
}
