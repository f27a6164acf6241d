import { formatUnits } from "viem";
import type { StatementRow } from "./data.ts";

/** "1,234.50", "0.000001", "-12.00": exact to the token's decimals, at least 2 shown, thousands grouped. */
export function formatAmount(units: bigint, decimals: number): string {
  const [whole = "0", fraction = ""] = formatUnits(units < 0n ? -units : units, decimals).split(".");
  return `${units < 0n ? "-" : ""}${whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",")}.${fraction.padEnd(2, "0")}`;
}

/** "2026-04-15 09:30:00": UTC date and time of a unix timestamp. */
export const utcDateTime = (seconds: number) => new Date(seconds * 1000).toISOString().slice(0, 19).replace("T", " ");

/** "2026-04-15": UTC date of a unix timestamp. */
export const utcDate = (seconds: number) => new Date(seconds * 1000).toISOString().slice(0, 10);

/** "0x12345678…9abcdef0": enough of a transaction hash to find it. */
export const shortHash = (hash: string) => `${hash.slice(0, 10)}…${hash.slice(-8)}`;

/** The CSV beside the PDF: the same rows, one per line, amounts exact (decimal and integer units). */
export const CSV_HEADER = [
  "date_time_utc",
  "timestamp",
  "block",
  "tx_hash",
  "log_index",
  "direction",
  "wallet",
  "counterparty",
  "token",
  "token_address",
  "amount",
  "amount_units",
];

export function statementCsv(wallet: string, rows: readonly StatementRow[]): Uint8Array {
  const lines = [CSV_HEADER.join(",")];
  for (const r of rows) {
    lines.push(
      [
        utcDateTime(r.timestamp),
        r.timestamp,
        r.blockNumber,
        r.transactionHash,
        r.logIndex,
        r.direction,
        wallet,
        r.counterparty,
        r.token.symbol,
        r.token.address.toLowerCase(),
        formatUnits(r.value, r.token.decimals),
        r.value,
      ].join(","),
    );
  }
  return new TextEncoder().encode(`${lines.join("\r\n")}\r\n`);
}
