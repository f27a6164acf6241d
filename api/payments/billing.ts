import { CELO_NETWORK } from "../../config/celo.ts";
import { unitsToUsd } from "../money.ts";
import type { Billing } from "./guard.ts";

/** `x402Billing` of a result: what this call really charged ("0.00" for a waived read). */
export function x402Billing(billing: Billing) {
  return {
    chargedUsdt: unitsToUsd(billing.chargedUnits, billing.token.decimals).toFixed(2),
    chargedUnits: billing.chargedUnits.toString(),
    token: billing.token.symbol,
    tokenAddress: billing.token.address,
    chain: CELO_NETWORK,
    payer: billing.payer,
  };
}
