import { createRequire } from "node:module";
import { authorizationTypes } from "@x402/evm";
import {
  bytesToHex,
  getTypesForEIP712Domain,
  type Hex,
  hashDomain,
  hashTypedData,
  hexToBytes,
  recoverAddress,
  type SerializeTransactionFn,
  serializeTransaction,
  type TransactionSerializable,
  type TypedDataDomain,
} from "viem";
import { type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import type { Address } from "../../config/addresses.ts";
import { keccak256 } from "./keccak.ts";

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
export async function recoverSigner(hash: Hex | Uint8Array, signature: Hex): Promise<Address> {
  if (!native || signature.length !== 132) {
    const digest = typeof hash === "string" ? hash : bytesToHex(hash);
    return (await recoverAddress({ hash: digest, signature })).toLowerCase() as Address;
  }
  const bytes = hexToBytes(signature);
  const v = bytes[64]!;
  const recid = v >= 27 ? v - 27 : v;
  if (recid !== 0 && recid !== 1) throw new Error(`invalid signature v ${v}`);
  const publicKey = native.ecdsaRecover(
    bytes.subarray(0, 64),
    recid,
    typeof hash === "string" ? hexToBytes(hash) : hash,
    false,
  );
  // The address is the last 20 bytes of the key's hash (lowercase: no checksum to compute).
  return bytesToHex(keccak256(publicKey.subarray(1), "bytes").subarray(12)) as Address;
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
export async function authorizationSigner({
  domain,
  message,
  signature,
}: SignedAuthorization): Promise<Address | undefined> {
  try {
    return await recoverSigner(authorizationDigest(domain, message), signature);
  } catch {
    return undefined;
  }
}

const TRANSFER_FIELDS = authorizationTypes.TransferWithAuthorization;
/** The type's hash, from the same declaration the x402 clients sign with. */
const TRANSFER_TYPE_HASH = keccak256(
  new TextEncoder().encode(`TransferWithAuthorization(${TRANSFER_FIELDS.map((f) => `${f.type} ${f.name}`).join(",")})`),
  "bytes",
);
/** Domain separators by domain: a service accepts a handful of tokens on one chain. */
const separators = new Map<string, Uint8Array>();
const MAX_SEPARATORS = 64;
const WORD = /^0x[0-9a-fA-F]{64}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const UINT256_LIMIT = 1n << 256n;

/**
 * The EIP-712 digest of a TransferWithAuthorization: what viem's hashTypedData gives for it (held
 * equal by test/primitives.test.ts), without its per-call work on the domain and the type (every
 * deferred payment is recovered on the request path). A message outside the type's shapes goes
 * to hashTypedData, which refuses it as before.
 */
export function authorizationDigest(domain: TypedDataDomain, message: SignedAuthorization["message"]): Uint8Array {
  const { from, to, value, validAfter, validBefore, nonce } = message;
  const uints = [value, validAfter, validBefore];
  if (
    !ADDRESS.test(from) ||
    !ADDRESS.test(to) ||
    !WORD.test(nonce) ||
    uints.some((u) => typeof u !== "bigint" || u < 0n || u >= UINT256_LIMIT)
  )
    return hexToBytes(
      hashTypedData({ domain, types: authorizationTypes, primaryType: "TransferWithAuthorization", message }),
    );
  const encoded = new Uint8Array(32 * 7);
  encoded.set(TRANSFER_TYPE_HASH, 0);
  encoded.set(hexToBytes(from), 32 + 12);
  encoded.set(hexToBytes(to), 64 + 12);
  for (const [i, u] of uints.entries()) encoded.set(hexToBytes(`0x${u.toString(16).padStart(64, "0")}`), 96 + 32 * i);
  encoded.set(hexToBytes(nonce), 192);
  const signed = new Uint8Array(66);
  signed.set([0x19, 0x01], 0);
  signed.set(separatorOf(domain), 2);
  signed.set(keccak256(encoded, "bytes"), 34);
  return keccak256(signed, "bytes");
}

function separatorOf(domain: TypedDataDomain): Uint8Array {
  const key = JSON.stringify(domain, (_, v) => (typeof v === "bigint" ? v.toString() : v));
  let separator = separators.get(key);
  if (!separator) {
    if (separators.size >= MAX_SEPARATORS) separators.clear();
    // viem's own domain hashing (hashTypedData's first half); its parameter types want a literal domain.
    separator = hexToBytes(
      hashDomain({ domain: domain as never, types: { EIP712Domain: getTypesForEIP712Domain({ domain }) } }),
    );
    separators.set(key, separator);
  }
  return separator;
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
      const { signature, recid } = native.ecdsaSign(keccak256(await serializer(signable), "bytes"), key);
      const [r, s] = [bytesToHex(signature.subarray(0, 32)), bytesToHex(signature.subarray(32, 64))];
      return (await serializer(transaction, { r, s, yParity: recid, v: BigInt(27 + recid) })) as never;
    },
  };
}
