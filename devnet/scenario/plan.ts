import type { Address } from "../../config/addresses.ts";

export type TokenSymbol = "USDT" | "USDC";

/** One transfer the seeder will put on chain. A `from` of the zero address mints (an on-ramp). */
export type PlannedTransfer = {
  at: number;
  token: TokenSymbol;
  from: Address;
  to: Address;
  /** A fixed amount in token units, or a share of the sender's balance at that moment (sweeps, drains). */
  amount: bigint | { share: number };
};

type Verdict = "approve" | "review" | "decline";

export type PersonaTruth = {
  address: Address;
  expected: Verdict;
  description: string;
  truth: Record<string, string | number | boolean>;
};
