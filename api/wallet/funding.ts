import { zeroAddress } from "viem";
import type { Address } from "../../config/addresses.ts";
import type { WalletFacts } from "../scoring/facts.ts";
import { isSelfFunded } from "../scoring/rules.ts";

/** How many hops forward from a wallet its money is followed to find wallets it funded itself. */
export const FUNDING_HOPS = 6;
/**
 * A wallet with more outgoing flows (payee x token x month) than this is a business or an
 * exchange paying the public, not a relay of its owner's money: its payees are not followed. An
 * exchange pays tens of thousands of wallets; reading them all would cost more than a screen.
 */
export const MAX_TRACED_FLOWS = 1000;

/** What each of `members` paid each payee over its history, and everything that payee ever received. */
export type Outflow = { member: Address; payee: Address; total: bigint; flows: number; received: bigint };
export type OutflowReader = (members: Address[]) => Promise<Outflow[]>;

/**
 * The wallets `address` funded itself, found forward: each hop reads what the wallets found so far
 * paid out, and a payee joins when it is self-funded by them (rules.ts `isSelfFunded`: more than
 * half of everything it ever received came from them).
 * Deeper hops are read only while some payer of `address` is still unexplained (`payers` is asked
 * for only then), because only money coming back can be cycled. Every payee looked at is reported with its funders among those
 * wallets and the rest of its inflow (funder null), so the model can redo the check from the facts.
 */
export async function traceFunding(
  address: Address,
  outflows: OutflowReader,
  payers: () => Promise<Address[]>,
): Promise<WalletFacts["funding"]> {
  let unexplained: Set<Address> | null = null;
  const own = new Set<Address>([address]);
  const fromOwn = new Map<Address, bigint>();
  const receivedBy = new Map<Address, bigint>();
  const rows: WalletFacts["funding"] = [];
  let members: Address[] = [address];
  for (let hop = 0; hop < FUNDING_HOPS && members.length > 0; hop++) {
    if (hop > 0) {
      unexplained ??= new Set((await payers()).filter((p) => p !== address && p !== zeroAddress && !own.has(p)));
      if (unexplained.size === 0) break;
    }
    const touched = new Set<Address>();
    for (const o of await outflows(members)) {
      if (o.flows > MAX_TRACED_FLOWS || o.payee === address || o.payee === zeroAddress) continue;
      rows.push({ wallet: o.payee, funder: o.member, total: o.total });
      fromOwn.set(o.payee, (fromOwn.get(o.payee) ?? 0n) + o.total);
      receivedBy.set(o.payee, o.received);
      touched.add(o.payee);
    }
    members = [...touched].filter((w) => !own.has(w) && isSelfFunded(fromOwn.get(w)!, receivedBy.get(w)!));
    for (const w of members) {
      own.add(w);
      unexplained?.delete(w);
    }
  }
  for (const [wallet, received] of receivedBy)
    rows.push({ wallet, funder: null, total: received - fromOwn.get(wallet)! });
  return rows;
}
