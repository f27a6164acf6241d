import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { IndexState } from "../api/indexing/state.ts";
import { backfillProgress, completedEvents } from "../scripts/launch-progress.ts";
import {
  barLine,
  createProgress,
  formatCount,
  formatDuration,
  formatPercent,
  formatRate,
  LINE_EVERY_MS,
  plainLine,
  renderBar,
  snapshot,
} from "../scripts/progress.ts";
import { etaSeconds, SlidingRate } from "../shared/rate.ts";

// Progress a person can watch (`npm start`'s seeding and backfill): the rate, the time left and the
// lines drawn from them. The launcher's own output is checked in test/launcher.test.ts.

const backfill = { name: "Backfill", unit: "blocks", eventUnit: "events" };

describe("sliding rate and time left", () => {
  it("measures units a second over the window, and forgets what is older", () => {
    const rate = new SlidingRate(10_000);
    expect(rate.perSecond()).toBeNull();
    rate.add(0, 0);
    expect(rate.perSecond()).toBeNull(); // one sample: no speed yet
    rate.add(100, 1_000);
    expect(rate.perSecond()).toBe(100);
    // A slower minute later: only the last 10 s (and the sample at their start) count.
    for (let t = 2_000; t <= 60_000; t += 1_000) rate.add(100 + (t - 1_000) / 100, t);
    expect(rate.perSecond()).toBeCloseTo(10);
  });

  it("falls to 0 when the count stops growing, and starts over when it goes back", () => {
    const rate = new SlidingRate(10_000);
    rate.add(0, 0);
    rate.add(500, 5_000);
    for (let t = 6_000; t <= 30_000; t += 1_000) rate.add(500, t);
    expect(rate.perSecond()).toBe(0);
    rate.add(200, 31_000); // a crash recovery: back to an earlier checkpoint
    expect(rate.perSecond()).toBeNull();
    rate.add(220, 32_000);
    expect(rate.perSecond()).toBe(20);
  });

  it("keeps a bounded number of samples however often it is fed", () => {
    const rate = new SlidingRate(10_000);
    for (let t = 0; t <= 100_000; t += 1) rate.add(t, t);
    expect((rate as unknown as { samples: unknown[] }).samples.length).toBeLessThanOrEqual(105);
    expect(rate.perSecond()).toBeCloseTo(1000);
  });

  it("estimates the time left from the speed: 0 when done, unknown without a speed", () => {
    expect(etaSeconds(1_000, 100)).toBe(10);
    expect(etaSeconds(1_001, 100)).toBe(11);
    expect(etaSeconds(0, null)).toBe(0);
    expect(etaSeconds(50, null)).toBeNull();
    expect(etaSeconds(50, 0)).toBeNull();
  });
});

describe("formatting", () => {
  it("formats counts, speeds, shares and durations for a reader", () => {
    expect(formatCount(1_204_000.7)).toBe("1,204,000");
    expect([formatRate(4_820.4), formatRate(37.4), formatRate(2.46)]).toEqual(["4,820", "37", "2.5"]);
    expect([
      formatPercent(0),
      formatPercent(0.1534),
      formatPercent(0.9999),
      formatPercent(1),
      formatPercent(1.2),
    ]).toEqual(["0.0%", "15.3%", "99.9%", "100.0%", "100.0%"]);
    expect([0, 42, 185, 3_600 + 12 * 60 + 30, 2 * 86_400 + 3 * 3_600].map(formatDuration)).toEqual([
      "0s",
      "42s",
      "3m 05s",
      "1h 12m",
      "2d 03h",
    ]);
  });

  it("draws a bar of the given width", () => {
    expect(renderBar(0.5, 10)).toBe("[█████░░░░░]");
    expect(renderBar(0, 4)).toBe("[░░░░]");
    expect(renderBar(1.5, 4)).toBe("[████]");
  });

  const midway = snapshot(
    backfill,
    { done: 1_204_000, total: 7_880_000, events: 412_300 },
    { unitsPerSecond: 1_000, eventsPerSecond: 2_310, elapsedSeconds: 1_204 },
  );

  it("takes the time left from the speed in units, and the events' speed as measured", () => {
    expect(midway).toMatchObject({
      fraction: 1_204_000 / 7_880_000,
      etaSeconds: 6_676,
      eventsPerSecond: 2_310,
      finished: false,
    });
    const done = snapshot(
      backfill,
      { done: 7_879_990, total: 7_880_000, events: 1_000_000 },
      { unitsPerSecond: 1_000, eventsPerSecond: 5, elapsedSeconds: 400, finished: true },
    );
    // Finished: all of it, and the mean speed over the whole run.
    expect(done).toMatchObject({ fraction: 1, etaSeconds: 0, eventsPerSecond: 2_500, finished: true });
  });

  it("writes the sentence a log shows", () => {
    expect(plainLine(midway)).toBe(
      "Backfill: 15.2% (1,204,000/7,880,000 blocks), 412,300 events (2,310/s), about 1h 51m left",
    );
    const seeding = snapshot(
      { name: "Seeding", unit: "days", eventUnit: "transfers" },
      { done: 3, total: 457, events: 10 },
      { unitsPerSecond: null, eventsPerSecond: null, elapsedSeconds: 0.2 },
    );
    expect(plainLine(seeding)).toBe("Seeding: 0.6% (3/457 days), 10 transfers");
    const done = snapshot(
      backfill,
      { done: 1_800, total: 1_800, events: 48_210 },
      { unitsPerSecond: null, eventsPerSecond: null, elapsedSeconds: 9.8, finished: true },
    );
    expect(plainLine(done)).toBe("Backfill: done, 1,800/1,800 blocks, 48,210 events in 10s (4,919/s)");
  });

  it("fits the terminal's line: the bar where there is room, never the last column", () => {
    const wide = barLine(midway, 120);
    expect(wide).toBe(
      "Backfill [█████░░░░░░░░░░░░░░░░░░░░░░░░░]  15.2%  1,204,000/7,880,000 blocks  412,300 events  2,310/s  1h 51m left",
    );
    // Narrower: the events counted go first, then the blocks, then the speed; the bar, the share and the time left stay.
    expect(barLine(midway, 80)).toBe("Backfill [██░░░░░░░░░]  15.2%  1,204,000/7,880,000 blocks  2,310/s  1h 51m left");
    expect(barLine(midway, 50)).toBe("Backfill [███░░░░░░░░░░░░░░░]  15.2%  1h 51m left");
    expect(barLine(midway, 30)).toBe("Backfill  15.2%  1h 51m left");
    for (const columns of [30, 50, 80, 120]) expect(barLine(midway, columns).length).toBeLessThan(columns);
  });
});

/** An output stream that keeps what is written, a terminal or not. */
const sink = (isTTY: boolean) => {
  const chunks: string[] = [];
  return {
    isTTY,
    columns: 100,
    write: (chunk: string) => (chunks.push(chunk), true),
    chunks,
    text: () => chunks.join(""),
  };
};

describe("progress reporter", () => {
  it("off a terminal: a JSON line at the first update, then one every 10 s, and the last", () => {
    const out = sink(false);
    let now = 0;
    const progress = createProgress(backfill, { out, now: () => now, windowMs: 60_000 });
    for (let s = 0; s <= 25; s++) {
      now = s * 1_000;
      progress.update({ done: s * 100, total: 10_000, events: s * 400 });
    }
    progress.finish();
    const lines = out
      .text()
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.done)).toEqual([
      0,
      (LINE_EVERY_MS / 1_000) * 100,
      2 * (LINE_EVERY_MS / 1_000) * 100,
      2_500,
    ]);
    expect(lines[1]).toMatchObject({
      level: 30,
      service: "celo-wallet-reputation",
      progress: "backfill",
      unit: "blocks",
      total: 10_000,
      percent: 10,
      events: 4_000,
      eventsPerSecond: 400,
      etaSeconds: 90,
      finished: false,
    });
    expect(lines[1].msg).toBe("Backfill: 10.0% (1,000/10,000 blocks), 4,000 events (400/s), about 1m 30s left");
    expect(lines[3]).toMatchObject({ finished: true, percent: 100, etaSeconds: 0, elapsedSeconds: 25 });
    expect(lines[3].msg).toMatch(/^Backfill: done, 2,500\/10,000 blocks, 10,000 events in 25s \(400\/s\)$/);
  });

  it("on a terminal: one line redrawn in place, cleared around a child's output, ended by the last", () => {
    const out = sink(true);
    let now = 0;
    const progress = createProgress(backfill, { out, now: () => now });
    progress.update({ done: 10, total: 100, events: 40 });
    now = 50;
    progress.update({ done: 11, total: 100, events: 44 }); // too soon to redraw
    now = 1_000;
    progress.update({ done: 20, total: 100, events: 80 });
    expect(out.chunks).toHaveLength(2);
    expect(out.chunks.every((c) => c.startsWith("\r") && c.endsWith("\x1b[K") && !c.includes("\n"))).toBe(true);
    expect(out.chunks[1]).toContain("20/100 blocks");

    progress.write("12:00:01 INFO  Indexed block range\n");
    expect(out.chunks.slice(2, 5)).toEqual(["\r\x1b[K", "12:00:01 INFO  Indexed block range\n", out.chunks[4]]);
    expect(out.chunks[4]).toContain("20/100 blocks"); // drawn again under the child's line
    progress.write("half a ");
    progress.write("line\n"); // no bar in the middle of a child's line
    expect(out.chunks.slice(5)).toEqual(["\r\x1b[K", "half a ", "line\n", expect.stringContaining("20/100 blocks")]);

    progress.finish();
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the bar ends with the terminal's erase-line escape, ESC [K
    expect(out.chunks.at(-1)).toMatch(/100\.0%.*in 1s\x1b\[K\n$/);
    progress.write("after\n");
    expect(out.chunks.at(-1)).toBe("after\n");
  });
});

describe("the launcher's backfill progress", () => {
  it("sums Ponder's indexed events over every handler", () => {
    const metrics = [
      "# HELP ponder_indexing_completed_events Number of events that have been processed",
      "# TYPE ponder_indexing_completed_events gauge",
      'ponder_indexing_completed_events{event="Stablecoin:Transfer"} 48210',
      'ponder_indexing_completed_events{event="ReputationReporter:ReportPublished"} 12',
      'ponder_indexing_completed_events_other{event="x"} 5', // another metric's name starting alike is not one
      'ponder_historical_total_blocks{chain="celo"} 1800',
    ].join("\n");
    expect(completedEvents(metrics)).toBe(48_222);
    expect(completedEvents("ponder_sync_block 3")).toBeNull();
  });

  it("counts the events of its last line by a read made at the end, not by one begun before the service was ready", async () => {
    // Ponder's /metrics: the read the first status starts is slow and sees no events yet; the next ones see the backfill's.
    let served = 0;
    const server = createServer((_, res) => {
      const events = served++ === 0 ? 0 : 42;
      setTimeout(
        () => res.end(`ponder_indexing_completed_events{event="Stablecoin:Transfer"} ${events}\n`),
        events ? 0 : 300,
      );
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const out = sink(false);
      const port = (server.address() as AddressInfo).port;
      const progress = backfillProgress({ DATA_HOST: "127.0.0.1", DATA_PORT: port }, { out });
      progress.onStatus({ startBlock: 100, indexedBlock: { number: 1_100 }, headBlock: { number: 1_100 } });
      await progress.finish();
      const last = JSON.parse(out.text().trim().split("\n").at(-1)!);
      expect(last).toMatchObject({ progress: "backfill", finished: true, events: 42 });
    } finally {
      server.close();
    }
  });

  it("reads the blocks from the start block to the head off the service's /ready answers", async () => {
    const out = sink(false);
    const progress = backfillProgress({ DATA_HOST: "127.0.0.1", DATA_PORT: 9 }, { out });
    expect(progress.stdout).toBeUndefined(); // not a terminal: Ponder writes to the same output itself
    progress.onStatus("Historical indexing is not complete."); // not the service's answer: ignored
    progress.onStatus({ startBlock: 100, indexedBlock: null, headBlock: null }); // no head yet: no total
    progress.onStatus({ startBlock: 100, indexedBlock: { number: 400 }, headBlock: { number: 1_100 } });
    await progress.finish();
    const lines = out
      .text()
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ progress: "backfill", done: 300, total: 1_000, percent: 30, events: 0 });
    expect(lines[1]).toMatchObject({ progress: "backfill", finished: true });
  });
});

describe("where indexing stands (IndexState)", () => {
  afterEach(() => void vi.useRealTimers());

  /** Ponder's checkpoint string: 10 digits of timestamp, 16 of chain id, 16 of block number, then the rest. */
  const checkpoint = (block: number) =>
    `${"1700000000"}${"42220".padStart(16, "0")}${String(block).padStart(16, "0")}${"0".repeat(33)}`;

  it("reports the start block, the blocks left and the speed they are indexed at", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    let indexed = 1_000;
    const db = {
      $client: {
        waitReady: true,
        query: async () => ({ rows: [{ ready: 0, latest: checkpoint(indexed), safe: checkpoint(indexed) }] }),
      },
    };
    const chain = { getBlock: async () => ({ number: 10_000n, timestamp: 1_800_000_000n }) };
    const state = new IndexState({
      db: db as never,
      target: { schema: "s", startBlock: 1_000 },
      chain: chain as never,
      maxLagBlocks: 10,
    });

    vi.setSystemTime(0);
    const first = await state.status();
    expect(first).toMatchObject({
      startBlock: 1_000,
      lagBlocks: 9_000,
      percent: 0,
      blocksPerSecond: null,
      etaSeconds: null,
      current: false,
    });
    indexed = 2_000;
    vi.setSystemTime(10_000);
    const second = await state.status();
    expect(second).toMatchObject({
      startBlock: 1_000,
      lagBlocks: 8_000,
      percent: 11.1,
      blocksPerSecond: 100,
      etaSeconds: 80,
    });
  });
});
