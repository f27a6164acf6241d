// Lists a wallet on the devnet's sanctions oracle (the Chainalysis SanctionsList stand-in), or takes it off with --remove.
// With the devnet running: npx tsx docs/examples/sanction-wallet.ts 0x<wallet> [--remove]
import { readFileSync } from "node:fs";
import { createPublicClient, createWalletClient, http, isAddress } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { sanctionsListAbi } from "../../abis/SanctionsList.ts";

const manifest = JSON.parse(readFileSync(process.env.DEVNET_MANIFEST ?? ".devnet/manifest.json", "utf8"));
const [wallet, flag] = process.argv.slice(2);
if (!wallet || !isAddress(wallet) || (flag !== undefined && flag !== "--remove")) {
  throw new Error("usage: npx tsx docs/examples/sanction-wallet.ts 0x<wallet> [--remove]");
}
if (!manifest.sanctions) throw new Error("this devnet's manifest has no sanctions oracle: restart the devnet");

const owner = privateKeyToAccount(manifest.deployer.privateKey); // anvil #0: the oracle's owner on the devnet
const transport = http(manifest.rpcUrl);
const publicClient = createPublicClient({ transport });
const walletClient = createWalletClient({ account: owner, transport });

const hash = await walletClient.writeContract({
  chain: null,
  address: manifest.sanctions.address,
  abi: sanctionsListAbi,
  functionName: flag === "--remove" ? "removeFromSanctionsList" : "addToSanctionsList",
  args: [[wallet]],
});
const receipt = await publicClient.waitForTransactionReceipt({ hash });
const listed = await publicClient.readContract({
  address: manifest.sanctions.address,
  abi: sanctionsListAbi,
  functionName: "isSanctioned",
  args: [wallet],
});
console.log(`block ${receipt.blockNumber} (${receipt.status}): isSanctioned(${wallet}) = ${listed}`);
