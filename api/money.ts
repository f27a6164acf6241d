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
