import type { PaymentPayload } from "@x402/core/types";
import { eip3009ABI } from "@x402/evm";
import { encodeFunctionData, getAddress, type Hex, parseSignature, serializeSignature } from "viem";
import { describe, expect, it } from "vitest";
import { transferCalldata } from "../../api/payments/relayer.ts";

// The calldata the relayer sends is what the token executes: the same bytes as viem's encoding of
// transferWithAuthorization from the ABI, whichever overload the signature takes and however the
// payer wrote its addresses.

const authorization = {
  from: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
  to: "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc",
  value: "10000",
  validAfter: "0",
  validBefore: "1798761600",
  nonce: "0x5c0f0b1d8e2b3f1a4c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b" as Hex,
};
const r = "0x1b8f5d7c3a2e4b6d8f0a1c3e5b7d9f1a3c5e7b9d1f3a5c7e9b1d3f5a7c9e1b3d" as Hex;
const s = "0x2c9e6f8d4b3a5c7e9f1b2d4a6c8e0f2b4d6a8c0e2f4b6d8a0c2e4f6b8d0a2c4e" as Hex;

const payload = (signature: Hex, a: typeof authorization = authorization) =>
  ({ payload: { authorization: a, signature } }) as unknown as PaymentPayload;

const plain = (signature: Hex[]) =>
  encodeFunctionData({
    abi: eip3009ABI,
    functionName: "transferWithAuthorization",
    args: [
      getAddress(authorization.from),
      getAddress(authorization.to),
      BigInt(authorization.value),
      BigInt(authorization.validAfter),
      BigInt(authorization.validBefore),
      authorization.nonce,
      ...signature,
    ] as never,
  });

describe("transferWithAuthorization calldata", () => {
  it("is viem's encoding for an EOA signature (v, r, s), whatever the addresses' case", () => {
    const signature = serializeSignature({ r, s, yParity: 1 });
    const { v } = parseSignature(signature);
    const expected = plain([Number(v) as never, r, s]);
    expect(transferCalldata(payload(signature))).toBe(expected);
    const lowered = { ...authorization, from: authorization.from.toLowerCase() };
    const checksummed = { ...authorization, to: getAddress(authorization.to) };
    expect(transferCalldata(payload(signature, lowered))).toBe(expected);
    expect(transferCalldata(payload(signature, checksummed))).toBe(expected);
  });

  it("is viem's encoding for a contract wallet's signature (bytes)", () => {
    const signature = `0x${"ab".repeat(97)}` as Hex;
    expect(transferCalldata(payload(signature))).toBe(plain([signature]));
  });

  it("refuses an address that is not one", () => {
    const signature = serializeSignature({ r, s, yParity: 0 });
    expect(() => transferCalldata(payload(signature, { ...authorization, from: "0x1234" }))).toThrow(/address/i);
  });
});
