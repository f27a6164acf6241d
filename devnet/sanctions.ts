import { type Hex, numberToHex, pad } from "viem";
import { sanctionsListAbi } from "../abis/SanctionsList.ts";
import type { Address } from "../config/addresses.ts";
import { SANCTIONS_ORACLE } from "../config/celo.ts";
import { sanctionsListArtifact } from "../contracts/artifacts.ts";
import { waitForReceipt } from "../shared/receipt.ts";
import { devnetClients } from "./chain.ts";
import type { PersonaTruth } from "./scenario/plan.ts";

/** The oracle's owner lives in storage slot 0 (OpenZeppelin 4 Ownable's `_owner`), in the original as in ours. */
const OWNER_SLOT = numberToHex(0, { size: 32 });

export type SanctionsOracle = { address: Address; owner: Address };

/**
 * Puts the Chainalysis sanctions oracle's code at its real address (config/celo.ts SANCTIONS_ORACLE),
 * owned by `ownerKey`'s account, on an anvil with automine on: deployed anywhere, its runtime code
 * moved there, the owner slot written (anvil_setCode copies no storage), then read back with owner().
 * The list starts empty.
 */
export async function placeSanctionsOracle(rpcUrl: string, ownerKey: Hex): Promise<SanctionsOracle> {
  const { publicClient, walletClient } = devnetClients(rpcUrl, ownerKey);
  const owner = walletClient.account.address.toLowerCase() as Address;
  const hash = await walletClient.deployContract({ ...sanctionsListArtifact });
  const receipt = await waitForReceipt(publicClient, { hash, pollingInterval: 50 });
  if (!receipt.contractAddress || receipt.status !== "success")
    throw new Error(`SanctionsList deployment ${hash} failed`);
  const code = await publicClient.getCode({ address: receipt.contractAddress });
  await publicClient.request({ method: "anvil_setCode" as never, params: [SANCTIONS_ORACLE, code] as never });
  await publicClient.request({
    method: "anvil_setStorageAt" as never,
    params: [SANCTIONS_ORACLE, OWNER_SLOT, pad(owner, { size: 32 })] as never,
  });
  const onChain = await publicClient.readContract({
    address: SANCTIONS_ORACLE,
    abi: sanctionsListAbi,
    functionName: "owner",
  });
  if (onChain.toLowerCase() !== owner) throw new Error(`sanctions oracle: owner() is ${onChain}, expected ${owner}`);
  return { address: SANCTIONS_ORACLE, owner };
}

/** Blocks of the listing transactions (null when there was nothing to send). */
export type SanctionsListings = { addedBlock: number | null; removedBlock: number | null; listed: Address[] };

/**
 * Lists on the oracle the personas whose truth says `listed: true` or `delisted: true`, in one
 * addToSanctionsList transaction from the owner, then removes the `delisted` ones in a second
 * (removeFromSanctionsList), each mined in its own block (automine on): what the oracle answers at
 * the end is `listed`, and its logs show the delisted wallets' whole story.
 */
export async function listSanctionedPersonas(
  rpcUrl: string,
  ownerKey: Hex,
  personas: Record<string, PersonaTruth>,
): Promise<SanctionsListings> {
  const { publicClient, walletClient } = devnetClients(rpcUrl, ownerKey);
  const all = Object.values(personas);
  const toAdd = all.filter((p) => p.truth.listed === true || p.truth.delisted === true).map((p) => p.address);
  const toRemove = all.filter((p) => p.truth.delisted === true).map((p) => p.address);
  const send = async (functionName: "addToSanctionsList" | "removeFromSanctionsList", addrs: Address[]) => {
    if (addrs.length === 0) return null;
    // A block of its own, a second after the one before at least (anvil would otherwise reuse a
    // timestamp within the same second): the listing and the removal never share a moment.
    const parent = await publicClient.getBlock();
    const timestamp = Math.max(Number(parent.timestamp) + 1, Math.floor(Date.now() / 1000));
    await publicClient.request({ method: "evm_setNextBlockTimestamp" as never, params: [timestamp] as never });
    const hash = await walletClient.writeContract({
      address: SANCTIONS_ORACLE,
      abi: sanctionsListAbi,
      functionName,
      args: [addrs],
    });
    const receipt = await waitForReceipt(publicClient, { hash, pollingInterval: 50 });
    if (receipt.status !== "success") throw new Error(`sanctions oracle: ${functionName} ${hash} reverted`);
    return Number(receipt.blockNumber);
  };
  const addedBlock = await send("addToSanctionsList", toAdd);
  const removedBlock = await send("removeFromSanctionsList", toRemove);
  return { addedBlock, removedBlock, listed: toAdd.filter((a) => !toRemove.includes(a)) };
}
