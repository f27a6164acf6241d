import type { Hex } from "viem";
import type { Address } from "../config/addresses.ts";
import { MULTICALL3 } from "../config/celo.ts";
import { devStablecoinArtifact, multicall3Artifact, reputationReporterArtifact } from "../contracts/artifacts.ts";
import { waitForReceipt } from "../shared/receipt.ts";
import { devnetClients } from "./chain.ts";
import { placeSanctionsOracle } from "./sanctions.ts";

export type Deployment = {
  tokens: Record<
    "USDT" | "USDC",
    { address: Address; name: string; version: string; symbol: "USDT" | "USDC"; decimals: 6 }
  >;
  reporter: Address;
  /** The Chainalysis sanctions oracle's stand-in at its real address (SANCTIONS_ORACLE), owned by the deployer; its list starts empty. */
  sanctions: { address: Address; owner: Address };
  /** Block of the first deployment: the indexer starts here. */
  startBlock: number;
};

/**
 * Deploys USDT and USDC with Celo's EIP-712 domains, the reporter with a separate reporter role, and
 * Multicall3 and the sanctions oracle (owned by the deployer) at their real addresses.
 */
export async function deployContracts(rpcUrl: string, deployerKey: Hex, reporterRole: Address): Promise<Deployment> {
  const { publicClient, walletClient } = devnetClients(rpcUrl, deployerKey);
  const deploy = async (hash: Hex) => {
    const receipt = await waitForReceipt(publicClient, { hash, pollingInterval: 50 });
    if (!receipt.contractAddress || receipt.status !== "success") throw new Error(`deployment ${hash} failed`);
    return { address: receipt.contractAddress.toLowerCase() as Address, block: Number(receipt.blockNumber) };
  };
  // Same name, symbol and EIP-712 version as the tokens on Celo (REFERENCES.md).
  const usdt = await deploy(
    await walletClient.deployContract({ ...devStablecoinArtifact, args: ["Tether USD", "USDT", "1"] }),
  );
  const usdc = await deploy(
    await walletClient.deployContract({ ...devStablecoinArtifact, args: ["USDC", "USDC", "2"] }),
  );
  const reporter = await deploy(
    await walletClient.deployContract({ ...reputationReporterArtifact, args: [reporterRole] }),
  );
  // Multicall3 lives at one address on every chain that has it: deploy it anywhere, then put its code there.
  const multicall = await deploy(await walletClient.deployContract({ ...multicall3Artifact }));
  await publicClient.request({
    method: "anvil_setCode" as never,
    params: [MULTICALL3, await publicClient.getCode({ address: multicall.address })] as never,
  });
  const sanctions = await placeSanctionsOracle(rpcUrl, deployerKey);
  return {
    tokens: {
      USDT: { address: usdt.address, name: "Tether USD", version: "1", symbol: "USDT", decimals: 6 },
      USDC: { address: usdc.address, name: "USDC", version: "2", symbol: "USDC", decimals: 6 },
    },
    reporter: reporter.address,
    sanctions,
    startBlock: usdt.block,
  };
}
