/**
 * What every route costs, in one place (the service interface's price table). Amounts are in
 * micro-USD, which is the smallest unit of both accepted stablecoins (6 decimals).
 */
export type PriceEntry = {
  method: "GET" | "POST";
  path: string;
  /** Price in micro-USD (1 = 0.000001 USD); 0 is free. */
  microUsd: bigint;
  description: string;
  /** Not served by this build yet: listed so the price table is complete. */
  available?: false;
  /**
   * Free to a payer who paid for a screen or analysis of the same wallet within the cache
   * lifetime (the payment header is still sent: it is verified to identify the payer, never settled).
   */
  freeAfterPaidAnalysis?: true;
};

const CENT = 10_000n;

export const PRICES = {
  screen: { method: "POST", path: "/api/lender/screen", microUsd: CENT, description: "Screen a borrower's wallet (LenderScreenResult)" },
  analyze: { method: "POST", path: "/api/agent/analyze", microUsd: CENT, description: "Scores, income, loan range, summary, attestation and walletData" },
  chat: { method: "POST", path: "/api/agent/chat", microUsd: CENT, description: "Natural-language wallet queries", available: false },
  report: { method: "POST", path: "/api/agent/report", microUsd: 10n * CENT, description: "Issue a REP passport attested on chain", available: false },
  statement: { method: "POST", path: "/api/agent/statement", microUsd: CENT, description: "Transaction statement PDF pinned to IPFS", available: false },
  analysis: { method: "GET", path: "/api/wallet/{address}/analysis", microUsd: CENT, description: "The full walletData of a wallet" },
  signals: { method: "GET", path: "/api/wallet/{address}/signals", microUsd: CENT, description: "Every named signal with its cache status" },
  signal: {
    method: "GET",
    path: "/api/wallet/{address}/signals/{signal}",
    microUsd: CENT,
    freeAfterPaidAnalysis: true,
    description: "One named signal; free to a payer who screened or analysed the wallet within the cache lifetime",
  },
  history: { method: "GET", path: "/api/wallet/{address}/history", microUsd: CENT, description: "Scores at each month end of the last 12 months" },
  verify: { method: "GET", path: "/api/agent/verify/{id}", microUsd: 0n, description: "Verify a REP passport", available: false },
  config: { method: "GET", path: "/api/x402/config", microUsd: 0n, description: "Payment configuration" },
  health: { method: "GET", path: "/api/health/integrations", microUsd: 0n, description: "Health of integrations" },
  stats: { method: "GET", path: "/api/stats", microUsd: 0n, description: "Service statistics" },
  openapi: { method: "GET", path: "/api/openapi.json", microUsd: 0n, description: "The OpenAPI 3.1 document of this API" },
} as const satisfies Record<string, PriceEntry>;

export type PricedRoute = keyof typeof PRICES;

/** A price in a token's smallest units (both accepted tokens have 6 decimals, like micro-USD). */
export function priceInUnits(microUsd: bigint, decimals: number): bigint {
  return decimals >= 6 ? microUsd * 10n ** BigInt(decimals - 6) : microUsd / 10n ** BigInt(6 - decimals);
}
