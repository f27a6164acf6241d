/**
 * Converts a token amount in smallest units to a USD number for the response edge. Amounts stay
 * bigint everywhere else; 6-decimal stablecoins are worth one USD per whole token.
 */
export function unitsToUsd(units: bigint, decimals = 6): number {
  const scale = 10n ** BigInt(decimals);
  const whole = units / scale;
  const fraction = units % scale;
  return Number(whole) + Number(fraction) / Number(scale);
}

/** USD rounded to cents: the amounts responses carry. */
export const usdCents = (units: bigint): number => Math.round(unitsToUsd(units) * 100) / 100;

/** "$3,400": whole dollars, for sentences written for people. */
export const formatUsd = (units: bigint): string => `$${Math.round(unitsToUsd(units)).toLocaleString("en-US")}`;

/** ISO 8601 time of a unix timestamp in seconds. */
export const isoFromSeconds = (seconds: number | bigint): string => new Date(Number(seconds) * 1000).toISOString();
