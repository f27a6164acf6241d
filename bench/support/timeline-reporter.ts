import { writeFileSync } from "node:fs";
import { relative } from "node:path";
import type { Reporter, TestModule } from "vitest/node";

// A vitest reporter for npm run bench:suite: when each test file was queued and when it finished
// (epoch ms), written to SUITE_TIMELINE_FILE for bench/suite.ts to read. vitest's own report times
// a file from its first test, not from its queueing, imports and beforeAll.

export type Span = { file: string; queued: number; ended: number };

export default class TimelineReporter implements Reporter {
  private readonly queued = new Map<string, number>();
  private readonly spans: Span[] = [];

  onTestModuleQueued(module: TestModule): void {
    this.queued.set(key(module), Date.now());
  }

  onTestModuleEnd(module: TestModule): void {
    const queued = this.queued.get(key(module));
    if (queued !== undefined) this.spans.push({ file: key(module), queued, ended: Date.now() });
  }

  onTestRunEnd(): void {
    if (process.env.SUITE_TIMELINE_FILE) writeFileSync(process.env.SUITE_TIMELINE_FILE, JSON.stringify(this.spans));
  }
}

const key = (module: TestModule) => `${module.project.name} ${relative(process.cwd(), module.moduleId)}`;
