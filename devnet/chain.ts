import { createPublicClient, createWalletClient, defineChain, http, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { DEVNET_CHAIN_ID } from "./anvil.ts";

/** The devnet as a viem chain: Celo's chain id, served by a local anvil (plain EVM formatting). */
export function devnetChain(rpcUrl: string) {
  return defineChain({
    id: DEVNET_CHAIN_ID,
    name: "Celo devnet (anvil)",
    nativeCurrency: { name: "CELO", symbol: "CELO", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
}

export function devnetClients(rpcUrl: string, privateKey: Hex) {
  const chain = devnetChain(rpcUrl);
  const transport = http(rpcUrl);
  return {
    publicClient: createPublicClient({ chain, transport }),
    walletClient: createWalletClient({ chain, transport, account: privateKeyToAccount(privateKey) }),
  };
}
