import { createPublicClient, createWalletClient, type Hex, http, parseAbiItem } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { devnetChain } from "../../devnet/chain.ts";
import { waitForReceipt } from "../../shared/receipt.ts";
import type { AuthorizationFields, Token } from "./payments.ts";

// EIP-3009 on the devnet as a relayer and a payer do it: settling a signed authorization, and the
// payer cancelling one. Each waits for its receipt and returns its block.

type Signed = { authorization: AuthorizationFields; signature: Hex };

/** transferWithAuthorization sent by `relayerKey` (the payer pays no gas). */
export async function settleOnChain(
  rpcUrl: string,
  relayerKey: Hex,
  token: Pick<Token, "address">,
  signed: Signed,
): Promise<bigint> {
  const a = signed.authorization;
  const wallet = createWalletClient({
    chain: devnetChain(rpcUrl),
    transport: http(rpcUrl),
    account: privateKeyToAccount(relayerKey),
  });
  const hash = await wallet.writeContract({
    address: token.address,
    abi: devStablecoinAbi,
    functionName: "transferWithAuthorization",
    args: [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, signed.signature],
  });
  return receiptBlock(rpcUrl, hash);
}

/** cancelAuthorization signed by the payer (`payerKey`) and sent by `senderKey`. */
export async function cancelOnChain(
  rpcUrl: string,
  senderKey: Hex,
  payerKey: Hex,
  token: Pick<Token, "address" | "name" | "version">,
  nonce: Hex,
): Promise<bigint> {
  const payer = privateKeyToAccount(payerKey);
  const signature = await payer.signTypedData({
    domain: { name: token.name, version: token.version, chainId: 42220, verifyingContract: token.address },
    types: {
      CancelAuthorization: [
        { name: "authorizer", type: "address" },
        { name: "nonce", type: "bytes32" },
      ],
    },
    primaryType: "CancelAuthorization",
    message: { authorizer: payer.address, nonce },
  });
  const wallet = createWalletClient({
    chain: devnetChain(rpcUrl),
    transport: http(rpcUrl),
    account: privateKeyToAccount(senderKey),
  });
  const hash = await wallet.writeContract({
    address: token.address,
    abi: devStablecoinAbi,
    functionName: "cancelAuthorization",
    args: [payer.address, nonce, signature],
  });
  return receiptBlock(rpcUrl, hash);
}

async function receiptBlock(rpcUrl: string, hash: Hex): Promise<bigint> {
  const receipt = await waitForReceipt(createPublicClient({ transport: http(rpcUrl) }), { hash });
  if (receipt.status !== "success") throw new Error(`transaction ${hash} reverted`);
  return receipt.blockNumber;
}

const authorizationEvents = [
  parseAbiItem("event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)"),
  parseAbiItem("event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce)"),
];

/** Every AuthorizationUsed / AuthorizationCanceled log of the tokens, as eth_getLogs returns them, in authorization_state's columns. */
export async function chainAuthorizations(rpcUrl: string, tokens: Hex[], fromBlock: bigint) {
  const logs = await createPublicClient({ transport: http(rpcUrl) }).getLogs({
    address: tokens,
    events: authorizationEvents,
    fromBlock,
    toBlock: "latest",
  });
  return logs.map((l) => ({
    token: l.address.toLowerCase(),
    authorizer: l.args.authorizer!.toLowerCase(),
    nonce: l.args.nonce!.toLowerCase(),
    kind: l.eventName === "AuthorizationUsed" ? "used" : "canceled",
    block_number: String(l.blockNumber),
    transaction_hash: l.transactionHash,
  }));
}
