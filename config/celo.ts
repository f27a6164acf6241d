import { defineChain } from "viem";
import type { Address } from "./addresses.ts";

/** Celo mainnet facts (see ../shared/design/REFERENCES.md). Index the tokens, not the 18-decimal fee adapters. */
export const CELO_CHAIN_ID = 42220;
export const CELO_NETWORK = `eip155:${CELO_CHAIN_ID}` as const;

/**
 * Chain 42220 as a viem chain with plain EVM formatting: transactions we send (settlements, devnet
 * seeding) are ordinary ones, which both Celo and a local anvil accept.
 */
export function celoChain(rpcUrl: string, name = "Celo") {
  return defineChain({
    id: CELO_CHAIN_ID,
    name,
    nativeCurrency: { name: "CELO", symbol: "CELO", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
}

export type TokenInfo = {
  symbol: "USDT" | "USDC";
  address: Address;
  decimals: 6;
  /** EIP-712 domain name and version used by EIP-3009 authorizations. */
  name: string;
  version: string;
};

export const CELO_TOKENS: Record<TokenInfo["symbol"], TokenInfo> = {
  USDT: {
    symbol: "USDT",
    address: "0x48065fbbe25f71c9282ddf5e1cd6d6a887483d5e",
    decimals: 6,
    name: "Tether USD",
    version: "1",
  },
  USDC: {
    symbol: "USDC",
    address: "0xceba9300f2b948710d2653dd7b07f33a8b32118c",
    decimals: 6,
    name: "USDC",
    version: "2",
  },
};

/**
 * Multicall3, at the same address on every chain that has it (Celo included): several settlements
 * go in one transaction through its aggregate3. The devnet installs a stand-in at this address.
 */
export const MULTICALL3: Address = "0xca11bde05977b3631167028862be2a173976ca11";

/** Chainalysis sanctions oracle (`SanctionsList`: isSanctioned), same address on Celo as on most EVM chains; the devnet installs a stand-in here. */
export const SANCTIONS_ORACLE: Address = "0x40c57923924b5c5c5455c48d93317139addac8fb";

/**
 * Below this balance a key that pays gas (the relayer, the reporter) is reported low, by the
 * configuration check and by /api/health/integrations: it stops working when it runs out.
 */
export const LOW_GAS_WEI = 10n ** 17n; // 0.1 CELO

/** The OnchainReporter the original service attests passports with. */
export const CELO_ONCHAIN_REPORTER: Address = "0xe7621af5de3806ba26115bdc89190c65ed835c21";

/**
 * Default first block for live indexing: Celo's L2 migration block. Indexing all stablecoin
 * transfers since then is a large backfill; set CELO_START_BLOCK to a later block to trade history
 * for start-up time.
 */
export const CELO_DEFAULT_START_BLOCK = 31_056_500;
