/** Prometheus text format (Ponder's /metrics) as a map of `name{labels}` to value, and differences between two reads. */
export type Metrics = Map<string, number>;

function parseMetrics(text: string): Metrics {
  const out: Metrics = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const space = line.lastIndexOf(" ");
    const value = Number(line.slice(space + 1));
    if (Number.isFinite(value)) out.set(line.slice(0, space), value);
  }
  return out;
}

export async function readMetrics(dataUrl: string): Promise<Metrics> {
  try {
    const res = await fetch(`${dataUrl}/metrics`, { signal: AbortSignal.timeout(5_000) });
    return res.ok ? parseMetrics(await res.text()) : new Map();
  } catch {
    return new Map();
  }
}

/** after - before for every series whose name starts with `prefix` (counters, histogram sums and counts). */
function diff(before: Metrics, after: Metrics, prefix: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const [key, value] of after) if (key.startsWith(prefix)) out.set(key, value - (before.get(key) ?? 0));
  return out;
}

/** For a histogram: per label set (without `le`), the change in sum and count between two reads. */
export function histogramDelta(
  before: Metrics,
  after: Metrics,
  name: string,
): { labels: string; sum: number; count: number }[] {
  const sums = diff(before, after, `${name}_sum`);
  const rows: { labels: string; sum: number; count: number }[] = [];
  for (const [key, sum] of sums) {
    const labels = key.slice(`${name}_sum`.length);
    const count = (after.get(`${name}_count${labels}`) ?? 0) - (before.get(`${name}_count${labels}`) ?? 0);
    if (count > 0) rows.push({ labels, sum, count });
  }
  return rows.sort((a, b) => b.sum - a.sum);
}
