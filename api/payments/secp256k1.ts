import { createRequire } from "node:module";
import { authorizationTypes } from "@x402/evm";
import {
  bytesToHex,
  type Hex,
  hashTypedData,
  hexToBytes,
  keccak256,
  recoverAddress,
  type SerializeTransactionFn,
  serializeTransaction,
  type TransactionSerializable,
  type TypedDataDefinition,
  type TypedDataDomain,
} from "viem";
import { type PrivateKeyAccount, privateKeyToAccount, publicKeyToAddress } from "viem/accounts";
import type { Address } from "../../config/addresses.ts";

type NativeSecp256k1 = {
  ecdsaRecover(signature: Uint8Array, recid: number, message: Uint8Array, compressed: false): Uint8Array;
  ecdsaSign(message: Uint8Array, privateKey: Uint8Array): { signature: Uint8Array; recid: number };
};

/**
 * libsecp256k1 through the `secp256k1` package's prebuilt binding (~60 µs a recovery here), or
 * null where the binding cannot load: then viem's pure-JS recovery (~2 ms) does the same work.
 * The package's own fallback (elliptic) is not used.
 */
const native: NativeSecp256k1 | null = (() => {
  try {
    return createRequire(import.meta.url)("secp256k1/bindings") as NativeSecp256k1;
  } catch {
    return null;
  }
})();

/** Which secp256k1 recovers and signs in this process (for benchmarks and health). */
export const recoveryBackend = native ? "libsecp256k1" : "noble";

/**
 * The address whose key signed `hash` (a 65-byte r‖s‖v signature, v 27/28 or 0/1), lowercase.
 * Throws as viem's recoverAddress does on a signature that recovers to nothing.
 */
export async function recoverSigner(hash: Hex, signature: Hex): Promise<Address> {
  if (!native || signature.length !== 132) return (await recoverAddress({ hash, signature })).toLowerCase() as Address;
  const bytes = hexToBytes(signature);
  const v = bytes[64]!;
  const recid = v >= 27 ? v - 27 : v;
  if (recid !== 0 && recid !== 1) throw new Error(`invalid signature v ${v}`);
  const publicKey = native.ecdsaRecover(bytes.subarray(0, 64), recid, hexToBytes(hash), false);
  return publicKeyToAddress(`0x${Buffer.from(publicKey).toString("hex")}` as Hex).toLowerCase() as Address;
}

/** recoverTypedDataAddress with the native recovery: the EOA that signed `typedData`, lowercase. */
export function recoverTypedDataSigner(typedData: TypedDataDefinition & { signature: Hex }): Promise<Address> {
  const { signature, ...definition } = typedData;
  return recoverSigner(hashTypedData(definition as TypedDataDefinition), signature);
}

/** An EIP-3009 TransferWithAuthorization, as signed. */
export type SignedAuthorization = {
  domain: TypedDataDomain;
  message: { from: Hex; to: Hex; value: bigint; validAfter: bigint; validBefore: bigint; nonce: Hex };
  signature: Hex;
};

/**
 * The EOA that signed an EIP-3009 authorization over its token's domain (lowercase), or undefined
 * when the signature recovers to nothing (not a 65-byte ECDSA signature: a contract wallet's).
 */
export function authorizationSigner({ domain, message, signature }: SignedAuthorization): Promise<Address | undefined> {
  return recoverTypedDataSigner({
    domain,
    types: authorizationTypes,
    primaryType: "TransferWithAuthorization",
    message,
    signature,
  }).catch(() => undefined);
}

/**
 * privateKeyToAccount whose transactions are signed by libsecp256k1 (~50 µs against ~1.5 ms):
 * the relayer signs one per settlement batch. Both sign by RFC 6979 with a low s, so the
 * signature is the same bytes viem's would be; without the binding, viem's account as it is.
 */
export function nativeAccount(privateKey: Hex): PrivateKeyAccount {
  const account = privateKeyToAccount(privateKey);
  if (!native) return account;
  const key = hexToBytes(privateKey);
  return {
    ...account,
    async signTransaction<T extends TransactionSerializable>(
      transaction: T,
      options?: { serializer?: SerializeTransactionFn<T> },
    ) {
      const serializer = options?.serializer ?? (serializeTransaction as SerializeTransactionFn<T>);
      const signable = transaction.type === "eip4844" ? { ...transaction, sidecars: false } : transaction;
      const { signature, recid } = native.ecdsaSign(hexToBytes(keccak256(await serializer(signable))), key);
      const [r, s] = [bytesToHex(signature.subarray(0, 32)), bytesToHex(signature.subarray(32, 64))];
      return (await serializer(transaction, { r, s, yParity: recid, v: BigInt(27 + recid) })) as never;
    },
  };
}
