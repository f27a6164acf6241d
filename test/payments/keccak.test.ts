import { randomBytes } from "node:crypto";
import { bytesToHex, keccak256 as viemKeccak256 } from "viem";
import { describe, expect, it } from "vitest";
import { keccak256, nativeKeccak } from "../../api/payments/keccak.ts";

// Every digest the service signs or recovers with (EIP-712 authorizations, signers' addresses,
// settlement transactions and their hashes) goes through this Keccak: it must give viem's bytes
// for any length, across the sponge's 136-byte rate and far past it.

describe("keccak256", () => {
  it.runIf(process.arch === "x64")("runs on the prebuilt binding here, not the pure-JS fallback", () => {
    expect(nativeKeccak).toBe(true);
  });

  const lengths = [0, 1, 31, 32, 64, 135, 136, 137, 224, 271, 272, 273, 1_000, 15_000, 65_537];

  it.each(lengths)("gives viem's digest of %i bytes, as bytes and as hex, from bytes and from hex", (length) => {
    const data = new Uint8Array(randomBytes(length));
    const expected = viemKeccak256(data, "bytes");
    expect(keccak256(data, "bytes")).toEqual(expected);
    expect(keccak256(data, "hex")).toBe(bytesToHex(expected));
    expect(keccak256(bytesToHex(data), "hex")).toBe(bytesToHex(expected));
  });

  it("hashes a view of a larger buffer by the view's bytes alone, and gives each call its own digest", () => {
    const whole = new Uint8Array(randomBytes(300));
    const view = whole.subarray(17, 217);
    const first = keccak256(view, "bytes");
    expect(first).toEqual(viemKeccak256(view.slice(), "bytes"));
    keccak256(whole, "bytes");
    expect(first).toEqual(viemKeccak256(view.slice(), "bytes"));
  });
});
