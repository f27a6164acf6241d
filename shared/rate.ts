/**
 * The per-second rate of a count that grows (blocks indexed, transfers seeded), over the samples
 * of the last `windowMs`: recent enough to follow a speed that changes, long enough to smooth out
 * work that lands in batches. A count that stops growing brings the rate down to 0 within a window.
 */
export class SlidingRate {
  private samples: { at: number; value: number }[] = [];

  constructor(private readonly windowMs: number) {}

  add(value: number, at = Date.now()): void {
    // A count that went back (a restart, a crash recovery re-indexing) starts a new series.
    if (value < (this.samples.at(-1)?.value ?? -Infinity)) this.samples = [];
    // About 100 samples a window at most, however often it is fed: a sample close to the one
    // before the last replaces the last.
    const beforeLast = this.samples.at(-2);
    if (beforeLast && at - beforeLast.at < this.windowMs / 100) this.samples[this.samples.length - 1] = { at, value };
    else this.samples.push({ at, value });
    // One sample at or before the window's start is kept, so the rate spans the whole window.
    while (this.samples.length > 2 && this.samples[1]!.at <= at - this.windowMs) this.samples.shift();
  }

  /** Units a second over the window; null until two samples some time apart. */
  perSecond(): number | null {
    const first = this.samples[0];
    const last = this.samples.at(-1);
    if (!first || !last || last.at <= first.at) return null;
    return ((last.value - first.value) * 1000) / (last.at - first.at);
  }
}

/** Seconds to do `remaining` more at `perSecond`: 0 when nothing remains, null when the speed is unknown or nil. */
export function etaSeconds(remaining: number, perSecond: number | null): number | null {
  if (remaining <= 0) return 0;
  return perSecond && perSecond > 0 ? Math.ceil(remaining / perSecond) : null;
}
