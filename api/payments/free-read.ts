import { MAX_AGE_MS } from "../wallet/assess.ts";

/**
 * The free-read rule, as the one sentence the 402 answers, GET /api/x402/config, the OpenAPI
 * document and docs/payments.md all carry (a test holds the doc to it).
 */
export function freeReadRule(after: readonly { method: string; path: string }[]): string {
  const names = after.map((r) => `${r.method.toUpperCase()} ${r.path}`);
  const list = names.length > 1 ? `${names.slice(0, -1).join(", ")} or ${names.at(-1)}` : names[0];
  return (
    `Free to a payer who paid for ${list} about this wallet within the cache lifetime (${MAX_AGE_MS / 60_000} minutes): ` +
    "send a payment header as usual; it is verified to identify you and not settled."
  );
}
