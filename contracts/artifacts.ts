// Deployable artifacts for devnet/deploy code. The abi comes from the `as const` modules (so viem
// infers argument types); the bytecode from the committed JSON written by `npm run contracts:build`.
import type { Abi, Hex } from "viem";
import { devStablecoinAbi } from "../abis/DevStablecoin.ts";
import { multicall3Abi } from "../abis/Multicall3.ts";
import { reputationReporterAbi } from "../abis/ReputationReporter.ts";
import { sanctionsListAbi } from "../abis/SanctionsList.ts";
import devStablecoinJson from "./artifacts/DevStablecoin.json" with { type: "json" };
import multicall3Json from "./artifacts/Multicall3.json" with { type: "json" };
import reputationReporterJson from "./artifacts/ReputationReporter.json" with { type: "json" };
import sanctionsListJson from "./artifacts/SanctionsList.json" with { type: "json" };

export type ContractArtifact<TAbi extends Abi> = { readonly abi: TAbi; readonly bytecode: Hex };

function bytecodeOf(artifact: { contractName: string; bytecode: string }): Hex {
  if (!/^0x[0-9a-f]+$/.test(artifact.bytecode)) throw new Error(`${artifact.contractName}: bad bytecode in artifact`);
  return artifact.bytecode as Hex;
}

export const devStablecoinArtifact: ContractArtifact<typeof devStablecoinAbi> = {
  abi: devStablecoinAbi,
  bytecode: bytecodeOf(devStablecoinJson),
};

export const reputationReporterArtifact: ContractArtifact<typeof reputationReporterAbi> = {
  abi: reputationReporterAbi,
  bytecode: bytecodeOf(reputationReporterJson),
};

export const multicall3Artifact: ContractArtifact<typeof multicall3Abi> = {
  abi: multicall3Abi,
  bytecode: bytecodeOf(multicall3Json),
};

export const sanctionsListArtifact: ContractArtifact<typeof sanctionsListAbi> = {
  abi: sanctionsListAbi,
  bytecode: bytecodeOf(sanctionsListJson),
};
