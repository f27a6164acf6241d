import { formatUnits } from "viem";

// USD amounts at the response edge, all from token units (bigint everywhere else). Stablecoins are
// worth one USD per whole token. Names say the precision: exact, to the cent, or whole dollars.

/** Dollars as a number, the nearest double to the exact amount (viem's `formatUnits`). */
export function unitsToUsd(units: bigint, decimals = 6): number {
  return Number(formatUnits(units, decimals));
}

/**
 * Dollars to the token's full precision, as a string with at least 2 decimals: what a payment
 * really charged. 6 decimals: 10000 -> "0.01", 15000 -> "0.015", 10001 -> "0.010001", 0 -> "0.00".
 */
export function exactUsd(units: bigint, decimals = 6): string {
  const [whole, fraction = ""] = formatUnits(units, decimals).split(".");
  return `${whole}.${fraction.padEnd(2, "0")}`;
}

/** Dollars rounded to the cent, as a number (12.35): the amounts responses carry. */
export const usdRoundedToCents = (units: bigint): number => Math.round(unitsToUsd(units) * 100) / 100;

/** "$3,400.5": dollars to the cent, for sentences written for people. */
export const formatUsdCents = (units: bigint): string => `$${usdRoundedToCents(units).toLocaleString("en-US")}`;

/** "$3,400": whole dollars, for sentences written for people. */
export const formatWholeUsd = (units: bigint): string => `$${Math.round(unitsToUsd(units)).toLocaleString("en-US")}`;

/** ISO 8601 time of a unix timestamp in seconds. */
export const isoFromSeconds = (seconds: number | bigint): string => new Date(Number(seconds) * 1000).toISOString();

/** The smaller of two amounts in smallest units. */
export const minUnits = (a: bigint, b: bigint): bigint => (a < b ? a : b);
