import {
  createSIWxMessage,
  encodeSIWxHeader,
  type SIWxExtension,
  type SIWxPayload,
} from "@x402/extensions/sign-in-with-x";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";

/**
 * The SIGN-IN-WITH-X header for `challenge` (a 402's or an owner route's 401's), proving `key`'s
 * wallet: the package's CAIP-122 message, signed by `signer` (`key` unless a test forges one).
 * `changes` alter the fields before signing (a wrong domain, chain, nonce…).
 */
export async function signedChallenge(
  challenge: SIWxExtension,
  key: Hex,
  changes: Partial<SIWxPayload> = {},
  signer: Hex = key,
): Promise<{ "sign-in-with-x": string }> {
  const address = privateKeyToAccount(key).address;
  const info = {
    ...challenge.info,
    chainId: challenge.supportedChains[0]!.chainId,
    type: challenge.supportedChains[0]!.type,
    ...changes,
  };
  const signature = await privateKeyToAccount(signer).signMessage({ message: createSIWxMessage(info, address) });
  return { "sign-in-with-x": encodeSIWxHeader({ ...info, address, signature }) };
}
