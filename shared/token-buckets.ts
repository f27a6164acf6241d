/**
 * Token buckets by key: `limit` takes per `windowMs`, refilled continuously, with a burst of
 * `limit`. `take(key)` answers 0 when allowed (and takes one), else the seconds until one is.
 * In memory, per API process.
 */
export function tokenBuckets(limit: number, windowMs: number, now: () => number = Date.now) {
  const buckets = new Map<string, { tokens: number; at: number }>();
  const ratePerMs = limit / windowMs;
  return {
    limit,
    take(key: string): number {
      const t = now();
      const b = buckets.get(key) ?? { tokens: limit, at: t };
      b.tokens = Math.min(limit, b.tokens + (t - b.at) * ratePerMs);
      b.at = t;
      buckets.set(key, b);
      if (b.tokens < 1) return Math.max(1, Math.ceil((1 - b.tokens) / ratePerMs / 1000));
      b.tokens -= 1;
      // Forget full buckets now and then, so the map holds only recent keys.
      if (buckets.size > 10_000)
        for (const [k, v] of buckets) if (v.tokens + (t - v.at) * ratePerMs >= limit) buckets.delete(k);
      return 0;
    },
  };
}
