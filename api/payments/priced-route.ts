/** A priced operation as the payment core sees it (built from its route declaration and the price table). */
export type PricedRoute = {
  /** "POST /api/lender/screen": how the ledger names the route. */
  name: string;
  description: string;
  /** Price in micro-USD (the smallest unit of both 6-decimal stablecoins). */
  microUsd: bigint;
  /** When set, the call is free to a payer who paid for one of these routes about the same wallet recently. */
  freeRead?: { after: readonly string[]; rule: string };
  /** Always settled before the answer, whatever X402_SETTLEMENT says (the report: an on-chain publication). */
  settleFirst?: boolean;
  /** The purchase of prepaid credit: paid with x402 only, never from credit. Every other paid route accepts credit. */
  buysCredit?: boolean;
};

/** An answer complete in itself: a refusal, or the answer a payment already bought. */
export type Reply = { status: number; headers: Record<string, string>; body: string };
