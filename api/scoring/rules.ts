import type { Address } from "../../config/addresses.ts";
import type { WalletTransfer } from "./facts.ts";

// The rules that are applied in more than one place: by the model (signals.ts), by the SQL that
// preselects what the model needs (api/wallet/queries.ts, api/wallet/funding.ts), and by the
// benchmark's eth_getLogs path (bench/support/rpc-facts.ts). Each is written here once; the SQL
// takes its numbers from these constants.

/** Inflows below one dollar are dust: spam, never income, and nothing a drain follows. */
export const DUST_FLOOR_UNITS = 1_000_000n;

/** A payment this soon after an inflow, to an address never seen before, may be a drain. */
const DRAIN_HOURS = 48;
export const DRAIN_SECONDS = DRAIN_HOURS * 3600;
/**
 * A drain sink is paid exactly this many times in the window. The SQL reads the one payment's time
 * as min(timestamp) of the payee's group, which holds only while this is 1.
 */
export const DRAIN_SINK_PAYMENTS = 1;

/** An inflow a drain can follow: any but dust (a wallet's transfer to itself is not dust). */
function isDrainableInflow(wallet: Address, t: WalletTransfer): boolean {
  return t.direction === "in" && (t.counterparty === wallet || t.value >= DUST_FLOOR_UNITS);
}

/**
 * Drain candidates among `wallet`'s transfers of the window: payments to a payee paid exactly
 * DRAIN_SINK_PAYMENTS times in the window, made at most DRAIN_HOURS after a drainable inflow (at
 * or before the payment). Only candidates need their payee's first activity looked up
 * (WalletFacts.firstSeen); a candidate is a drain when its payee first appeared with it (`isDrain`).
 */
export function drainCandidates(wallet: Address, transfers: WalletTransfer[]): WalletTransfer[] {
  const paid = new Map<Address, number>();
  for (const t of transfers) if (t.direction === "out") paid.set(t.counterparty, (paid.get(t.counterparty) ?? 0) + 1);
  const inflows = transfers.filter((t) => isDrainableInflow(wallet, t)).map((t) => t.at);
  return transfers.filter(
    (t) =>
      t.direction === "out" &&
      paid.get(t.counterparty) === DRAIN_SINK_PAYMENTS &&
      inflows.some((at) => at <= t.at && t.at - at <= DRAIN_SECONDS),
  );
}

/** A drain candidate is a drain when its payee had no activity before this payment. */
export function isDrain(candidate: WalletTransfer, payeeFirstAt: number | undefined): boolean {
  return (payeeFirstAt ?? 0) >= candidate.at;
}

/**
 * Self-funding: a wallet is funded by a set of wallets when more than SELF_FUNDED_SHARE of
 * everything it ever received came from them. Kept as a fraction of integers, so the comparison is
 * exact on token units (no floating point).
 */
const SELF_FUNDED_SHARE = { numerator: 1n, denominator: 2n } as const;

/** `fromOwn` units of a wallet's `received` (lifetime inflow) came from the set: is it self-funded? */
export function isSelfFunded(fromOwn: bigint, received: bigint): boolean {
  return received > 0n && fromOwn * SELF_FUNDED_SHARE.denominator > received * SELF_FUNDED_SHARE.numerator;
}
