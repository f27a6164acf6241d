/** The p-th percentile of xs (nearest rank). */
export const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
export const ms = (x: number) => `${x.toFixed(2)} ms`;
/** A progress line, stamped with the time of day. */
export const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);
