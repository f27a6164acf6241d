import { createPublicClient, createWalletClient, type Hex, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { celoChain } from "../config/celo.ts";

/** The devnet as a viem chain: Celo's chain id, served by a local anvil. */
export const devnetChain = (rpcUrl: string) => celoChain(rpcUrl, "Celo devnet (anvil)");

export function devnetClients(rpcUrl: string, privateKey: Hex) {
  const chain = devnetChain(rpcUrl);
  const transport = http(rpcUrl);
  return {
    publicClient: createPublicClient({ chain, transport }),
    walletClient: createWalletClient({ chain, transport, account: privateKeyToAccount(privateKey) }),
  };
}
