import { writeFileSync } from "node:fs";
import { relative } from "node:path";
import type { Reporter, TestModule, TestSpecification, Vitest } from "vitest/node";

// A vitest reporter for npm run bench:suite: when each test file was queued and finished, and how
// many ran at once. vitest's own report times a file from its first test, not from its queueing,
// imports and beforeAll, so it cannot show where the workers sat idle (the run's tail).

/** How many of the last files to finish are listed. */
const TAIL_FILES = 8;

type Span = { file: string; queued: number; ended?: number };

export default class TimelineReporter implements Reporter {
  /** vitest.config.ts's maxWorkers: how many files can run at once. */
  private workers = 1;
  private started = 0;
  private readonly spans = new Map<string, Span>();

  onInit(vitest: Vitest): void {
    this.workers = vitest.config.maxWorkers;
  }

  onTestRunStart(_specifications: ReadonlyArray<TestSpecification>): void {
    this.started = performance.now();
  }

  onTestModuleQueued(module: TestModule): void {
    this.spans.set(key(module), { file: key(module), queued: this.now() });
  }

  onTestModuleEnd(module: TestModule): void {
    const span = this.spans.get(key(module));
    if (span) span.ended = this.now();
  }

  onTestRunEnd(): void {
    const spans = [...this.spans.values()].filter((s): s is Required<Span> => s.ended !== undefined);
    if (!spans.length) return;
    // bench/suite.ts reads them back to name the files running while the cores idled.
    if (process.env.SUITE_TIMELINE_FILE) writeFileSync(process.env.SUITE_TIMELINE_FILE, JSON.stringify(spans));
    const end = Math.max(...spans.map((s) => s.ended));
    // Seconds during which fewer files than workers were running, from the first queueing to the last end.
    const edges = spans.flatMap((s) => [
      [s.queued, 1],
      [s.ended, -1],
    ]);
    edges.sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!);
    const below = new Map<number, number>();
    let running = 0;
    let last = 0;
    for (const [t, change] of edges as [number, number][]) {
      if (running < this.workers) below.set(running, (below.get(running) ?? 0) + (t - last));
      running += change;
      last = t;
    }
    const lines = [...below]
      .sort((a, b) => a[0] - b[0])
      .map(([n, seconds]) => `${seconds.toFixed(0)} s with ${n} running`);
    console.log(
      `\nTimeline (timeline-reporter): ${spans.length} files from queued to finished, last at ${end.toFixed(0)} s; fewer than ${this.workers} at once: ${lines.join(", ") || "never"}`,
    );
    console.log(`  the last ${TAIL_FILES} to finish (queued at -> finished at, seconds from the run's start):`);
    for (const s of [...spans].sort((a, b) => b.ended - a.ended).slice(0, TAIL_FILES))
      console.log(`    ${s.queued.toFixed(0).padStart(5)} -> ${s.ended.toFixed(0).padStart(5)}  ${s.file}`);
  }

  private now(): number {
    return (performance.now() - this.started) / 1000;
  }
}

const key = (module: TestModule) => `${module.project.name} ${relative(process.cwd(), module.moduleId)}`;
