import type { Address } from "../../../config/addresses.ts";
import type { PaymentSettings } from "../../../config/payments.ts";
import type { Facilitator } from "../facilitator.ts";
import { settlesInTime } from "../lifecycle.ts";
import type { ReconcileDeps } from "../reconcile.ts";
import type { CreditLeases } from "./credit-leases.ts";
import type { Ledger, PaymentDeps } from "./types.ts";

/** What the core's steps share: its collaborators, and this process's view of payments under way. */
export type CoreContext = {
  deps: PaymentDeps;
  settings: PaymentSettings;
  facilitator: Facilitator;
  ledger: Ledger;
  /** Settlements under way in this process, by payment (keyId). */
  inflight: Map<string, Promise<unknown>>;
  /**
   * Credit tokens' owners as holds found them (a token never changes owner; each hold still checks
   * that it is not revoked): lets the owner's sanctions check run beside the hold.
   */
  tokenOwners: Map<string, Address>;
  /** This replica's leases on owners' credit: calls without a Payment-Identifier are paid from them. */
  leases: CreditLeases;
  /** A shutdown began: no new payment is claimed. */
  draining: () => boolean;
};

export const reconcileDeps = (ctx: CoreContext): ReconcileDeps => ({
  chain: ctx.deps.chain,
  ledger: ctx.ledger,
  payTo: ctx.settings.payTo,
  settler: ctx.facilitator.settler,
  onOutcome: ctx.deps.onOutcome,
});

/**
 * Whether a payment may be answered before it is settled: X402_SETTLEMENT=deferred, a relayer, a
 * route that allows it, and an authorization that leaves the worker time to settle it (settlesInTime).
 */
export const deferrable = (ctx: CoreContext, route: { settleFirst?: boolean }, validBefore: bigint) =>
  ctx.settings.timing.mode === "deferred" &&
  !route.settleFirst &&
  ctx.facilitator.settler !== undefined &&
  settlesInTime(validBefore);
