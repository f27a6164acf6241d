import {
  type Address,
  domainSeparator,
  getAddress,
  type Hex,
  numberToHex,
  type PublicClient,
  type TestClient,
  type WalletClient,
} from "viem";
import { devStablecoinAbi } from "../abis/DevStablecoin.ts";
import type { TokenInfo } from "../config/celo.ts";
import { devStablecoinArtifact } from "../contracts/artifacts.ts";
import { waitForReceipt } from "../shared/receipt.ts";

/**
 * DevStablecoin's fixed state (solc storageLayout): name 0, symbol 1, _version 2, totalSupply 3,
 * owner 4, then the roots of balanceOf, allowance and _authorizationStates (5-7), which hold nothing
 * themselves. Its constructor writes only these; short strings live inside their slot.
 */
const STATE_SLOTS = 8;

type Clients = { publicClient: PublicClient; walletClient: WalletClient; testClient: TestClient };

/**
 * Puts DevStablecoin at `token.address` (a real Celo token address) as if it had been deployed
 * there by the wallet client's account: a template deployed anywhere with the same name, symbol
 * and version is cloned there, code and state.
 *
 * The code cannot be copied as is: its cached domain separator is an immutable computed for the
 * template's address, and DOMAIN_SEPARATOR() returns it as long as the chain id is the one it was
 * deployed on. That one 32-byte word is replaced by the separator of Celo's domain at the real
 * address; the other immutables (hashed name and version, the chain id) are the same there.
 */
export async function placeDevStablecoin(
  { publicClient, walletClient, testClient }: Clients,
  token: TokenInfo,
): Promise<void> {
  const hash = await walletClient.deployContract({
    ...devStablecoinArtifact,
    args: [token.name, token.symbol, token.version],
    account: walletClient.account!,
    chain: walletClient.chain,
  });
  const receipt = await waitForReceipt(publicClient, { hash, pollingInterval: 50 });
  if (receipt.status !== "success" || !receipt.contractAddress)
    throw new Error(`template ${token.symbol} deployment ${hash} failed`);
  const template = receipt.contractAddress;
  const target = getAddress(token.address);

  const templateSeparator = await publicClient.readContract({
    address: template,
    abi: devStablecoinAbi,
    functionName: "DOMAIN_SEPARATOR",
  });
  const celoSeparator = celoDomainSeparator(token);
  const code = (await publicClient.getCode({ address: template }))!.toLowerCase();
  const found = code.split(templateSeparator.slice(2).toLowerCase()).length - 1;
  if (found !== 1)
    throw new Error(
      `${token.symbol}: the cached domain separator occurs ${found} times in the template's code, expected once`,
    );
  await testClient.setCode({
    address: target,
    bytecode: code.replace(templateSeparator.slice(2).toLowerCase(), celoSeparator.slice(2)) as Hex,
  });

  for (let slot = 0; slot < STATE_SLOTS; slot++) {
    const index = numberToHex(slot, { size: 32 });
    const value = (await publicClient.getStorageAt({ address: template, slot: index })) ?? numberToHex(0, { size: 32 });
    await testClient.setStorageAt({ address: target, index, value });
  }
  await checkPlaced(publicClient, token, template);
}

/** The EIP-712 domain separator of `token` on Celo: its name and version, chain 42220, its own address. */
export function celoDomainSeparator(token: TokenInfo): Hex {
  return domainSeparator({
    domain: { name: token.name, version: token.version, chainId: 42220, verifyingContract: getAddress(token.address) },
  });
}

/** The clone answers as the template does, except for a domain that is now Celo's. */
async function checkPlaced(publicClient: PublicClient, token: TokenInfo, template: Address): Promise<void> {
  const address = getAddress(token.address);
  const state = (at: Address) =>
    Promise.all([
      publicClient.readContract({ address: at, abi: devStablecoinAbi, functionName: "name" }),
      publicClient.readContract({ address: at, abi: devStablecoinAbi, functionName: "symbol" }),
      publicClient.readContract({ address: at, abi: devStablecoinAbi, functionName: "version" }),
      publicClient.readContract({ address: at, abi: devStablecoinAbi, functionName: "decimals" }),
      publicClient.readContract({ address: at, abi: devStablecoinAbi, functionName: "owner" }),
    ]);
  const [placed, original] = [await state(address), await state(template)];
  if (placed.join() !== original.join())
    throw new Error(
      `${token.symbol} at ${address}: name, symbol, version, decimals, owner are ${placed.join()}, the template's ${original.join()}`,
    );
  const separator = await publicClient.readContract({
    address,
    abi: devStablecoinAbi,
    functionName: "DOMAIN_SEPARATOR",
  });
  if (separator !== celoDomainSeparator(token))
    throw new Error(`${token.symbol} at ${address}: DOMAIN_SEPARATOR() is not Celo's`);
}
