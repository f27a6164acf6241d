import type { Address } from "../../config/addresses.ts";
import { MAX_AGE_MS } from "../wallet/max-age.ts";
import type { Ledger } from "./ledger/ledger.ts";
import type { PricedRoute } from "./priced-route.ts";

/** How long a paid call makes the free reads of that wallet free: the result cache lifetime. */
const FREE_READ_WINDOW_MS = MAX_AGE_MS;

/**
 * The free-read rule, as the one sentence the 402 answers, GET /api/x402/config, the OpenAPI
 * document and docs/payments.md all carry (a test holds the doc to it).
 */
export function freeReadRule(after: readonly { method: string; path: string }[]): string {
  const names = after.map((r) => `${r.method.toUpperCase()} ${r.path}`);
  const list = names.length > 1 ? `${names.slice(0, -1).join(", ")} or ${names.at(-1)}` : names[0];
  return (
    `Free to a payer who paid for ${list} (by payment or from prepaid credit) about this wallet within the cache lifetime (${FREE_READ_WINDOW_MS / 60_000} minutes): ` +
    "send a payment header as usual (it is verified to identify you and not settled), or send no payment and sign in as that payer with SIGN-IN-WITH-X or send its credit token (Authorization: Bearer)."
  );
}

/**
 * Whether `payer` paid for one of the routes `route` is free after, about `subject`, recently
 * enough (by a payment or from prepaid credit): the rule above, for a payer known by a payment
 * header, a sign-in or a credit token.
 */
export async function paidRecently(
  ledger: Pick<Ledger, "paidFor" | "credit">,
  route: Pick<PricedRoute, "freeRead">,
  payer: Address,
  subject: Address,
  now = Date.now(),
): Promise<boolean> {
  if (!route.freeRead) return false;
  const routes = [...route.freeRead.after];
  const since = new Date(now - FREE_READ_WINDOW_MS);
  // Paid by a payment, or from prepaid credit: either makes the read free.
  const [paid, spent] = await Promise.all([
    ledger.paidFor(payer, subject, routes, since),
    ledger.credit.paidFor(payer, subject, routes, since),
  ]);
  return paid || spent;
}
