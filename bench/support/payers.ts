import { createPublicClient, createWalletClient, type Hex, http } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import type { Address } from "../../config/addresses.ts";
import { celoChain } from "../../config/celo.ts";
import type { Manifest } from "../../config/manifest.ts";
import { type Indexer, waitForBlock } from "../../harness/indexer.ts";
import { waitForReceipt } from "../../shared/receipt.ts";

/**
 * `count` fresh payers, each sent `units` of USDT (1 USDT unless told) by the first lender, and indexed: many payers, as many
 * lenders would be (deferred mode caps what each may owe at once; its verification reads balances
 * from the index).
 */
export async function fundedPayers(manifest: Manifest, indexer: Indexer, count: number, units = 1_000_000n) {
  const payers = Array.from({ length: count }, () => {
    const key = generatePrivateKey();
    return { address: privateKeyToAccount(key).address.toLowerCase() as Address, key };
  });
  const funder = createWalletClient({
    account: privateKeyToAccount(manifest.lenders[0]!.privateKey as Hex),
    chain: celoChain(manifest.rpcUrl),
    transport: http(manifest.rpcUrl),
  });
  let lastFunding: Hex = "0x";
  for (const payer of payers)
    lastFunding = await funder.writeContract({
      address: manifest.tokens.USDT.address,
      abi: devStablecoinAbi,
      functionName: "transfer",
      args: [payer.address, units],
    });
  const funded = await waitForReceipt(createPublicClient({ transport: http(manifest.rpcUrl) }), {
    hash: lastFunding,
  });
  await waitForBlock(indexer, Number(funded.blockNumber), 120_000);
  return payers;
}
