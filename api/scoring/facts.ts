import type { Address } from "../../config/addresses.ts";

/**
 * What the scoring model is given about one wallet: rows read from the indexer's tables, with no
 * interpretation yet. Amounts are token units (6-decimal USD stablecoins, so summable); times are
 * unix seconds. api/wallet/queries.ts reads them; tests build them by hand.
 */
export type WalletFacts = {
  address: Address;
  /** Time of the latest indexed block: "now" for every rule, so a result is reproducible. */
  asOf: number;
  /** Lifetime activity, or null when the wallet has never moved money. */
  account: { firstAt: number; lastAt: number; transfersIn: number; transfersOut: number } | null;
  balances: { token: Address; balance: bigint }[];
  /** The wallet's transfers over the scoring window (WINDOW_DAYS), either way. */
  transfers: WalletTransfer[];
  /** First activity of the payee of each drain candidate (rules.ts `drainCandidates`): tells fresh addresses apart. */
  firstSeen: { address: Address; firstAt: number }[];
  /**
   * Wallets this one paid, and those they paid in turn, with who funded them: each row is money a
   * wallet received from one funder, over its whole history; funder null is the rest of its
   * inflow, from everyone else together. Enough to tell wallets it funded itself.
   */
  funding: { wallet: Address; funder: Address | null; total: bigint }[];
  /** What the indexed sanctions oracle says of it; absent when it was not read (the status is then inconclusive). */
  sanctions?: SanctionsFacts;
};

/** A block and its time. */
export type BlockMoment = { block: number; at: number };

/** The wallet on the sanctions oracle, as indexed (api/sanctions/queries.ts). */
export type SanctionsFacts = {
  /** Every listing since the oracle's creation is indexed: a wallet not listed is known not to be. */
  complete: boolean;
  /** Its current listing, or null. */
  listed: BlockMoment | null;
  /** Its latest removal from the list, when it was listed before. */
  delisted: BlockMoment | null;
  /** Currently listed wallets it moved money with directly over the window: transfers either way, their total and the latest. */
  exposure: { wallet: Address; transfers: number; units: bigint; lastAt: number }[];
};

export type WalletTransfer = {
  direction: "in" | "out";
  counterparty: Address;
  token: Address;
  value: bigint;
  at: number;
};

export const DAY = 86_400;
/** Income, spending and behaviour are read over the last year. */
export const WINDOW_DAYS = 365;
