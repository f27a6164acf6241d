/** UTC calendar month of a unix timestamp, as "YYYY-MM" (sorts as text). */
export function monthOf(timestamp: bigint | number): string {
  const date = new Date(Number(timestamp) * 1000);
  return `${date.getUTCFullYear()}-${String(date.getUTCMonth() + 1).padStart(2, "0")}`;
}
