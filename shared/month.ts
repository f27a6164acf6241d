/**
 * UTC calendar month of a unix timestamp, as "YYYY-MM" (sorts as text): the one month key. The
 * indexer stores it on each (daily) flow row (src/transfers.ts); the views, the API and the
 * benchmarks group by it.
 */
export function monthOf(timestamp: bigint | number): string {
  const date = new Date(Number(timestamp) * 1000);
  return `${date.getUTCFullYear()}-${String(date.getUTCMonth() + 1).padStart(2, "0")}`;
}
