import { authorizationTypes } from "@x402/evm";
import {
  bytesToHex,
  getAddress,
  type Hex,
  hashTypedData,
  keccak256,
  recoverTransactionAddress,
  recoverTypedDataAddress,
  toHex,
  zeroAddress,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { exactUsd, formatUsdCents, formatWholeUsd, unitsToUsd, usdRoundedToCents } from "../api/money.ts";
import {
  authorizationDigest,
  authorizationSigner,
  nativeAccount,
  recoverSigner,
  recoveryBackend,
} from "../api/payments/secp256k1.ts";
import { coalesced } from "../api/store/coalesce.ts";
import { addressSchema } from "../config/addresses.ts";
import { monthOf } from "../shared/month.ts";

describe("USD amounts (api/money.ts)", () => {
  it("shows a charged amount exactly to the token's decimals, at least 2 of them", () => {
    expect(exactUsd(10_000n, 6)).toBe("0.01");
    expect(exactUsd(15_000n, 6)).toBe("0.015");
    expect(exactUsd(0n, 6)).toBe("0.00");
    expect(exactUsd(10_001n, 6)).toBe("0.010001");
    expect(exactUsd(1_000_000n, 6)).toBe("1.00");
    expect(exactUsd(123_450_000n, 6)).toBe("123.45");
    expect(exactUsd(10n ** 16n, 18)).toBe("0.01");
  });

  it("names dollars, cents and whole dollars apart", () => {
    expect(unitsToUsd(1_234_567n)).toBe(1.234567);
    expect(unitsToUsd(-2_500_000n)).toBe(-2.5);
    expect(usdRoundedToCents(1_234_567n)).toBe(1.23);
    expect(formatUsdCents(3_400_500_000n)).toBe("$3,400.5");
    expect(formatWholeUsd(3_400_500_000n)).toBe("$3,401");
  });
});

describe("addresses and months", () => {
  it("parses an address in one case or checksummed to lowercase, refusing a wrong EIP-55 checksum and anything else", () => {
    const lower = "0xabcdef0123456789abcdef0123456789abcdef01";
    for (const form of [lower, lower.toUpperCase().replace("0X", "0x"), getAddress(lower)])
      expect(addressSchema.parse(form), form).toBe(lower);
    expect(addressSchema.parse(zeroAddress)).toBe(zeroAddress);
    const miscased = addressSchema.safeParse("0xAbCdEf0123456789abcdef0123456789ABCDEF01");
    expect(miscased.error?.issues[0]?.message).toMatch(/^has a wrong EIP-55 checksum/);
    for (const bad of [
      "0x123",
      "abcdef0123456789abcdef0123456789abcdef0123",
      "0xZZcdef0123456789abcdef0123456789abcdef01",
      "",
    ]) {
      const parsed = addressSchema.safeParse(bad);
      expect(parsed.success, bad).toBe(false);
      expect(parsed.error?.issues[0]?.message).toBe("must be 0x followed by 40 hex characters");
    }
  });

  it("keys months by UTC calendar month", () => {
    expect(monthOf(Date.UTC(2026, 0, 31, 23, 59, 59) / 1000)).toBe("2026-01");
    expect(monthOf(BigInt(Date.UTC(2026, 1, 1) / 1000))).toBe("2026-02");
  });
});

describe("secp256k1 (api/payments/secp256k1.ts): recovery and the relayer's signing", () => {
  const typedData = (nonce: Hex) => ({
    domain: {
      name: "Tether USD",
      version: "1",
      chainId: 42220,
      verifyingContract: "0x48065fbbe25f71c9282ddf5e1cd6d6a887483d5e" as Hex,
    },
    types: authorizationTypes,
    primaryType: "TransferWithAuthorization" as const,
    message: { from: zeroAddress, to: zeroAddress, value: 10_000n, validAfter: 0n, validBefore: 2n ** 40n, nonce },
  });

  it("recovers what viem recovers, with the native library when it loads", async () => {
    // The prebuilt binding ships for linux-x64 glibc: this machine kind must use it, not the 30x slower fallback.
    expect(recoveryBackend).toBe("libsecp256k1");
    for (let i = 0; i < 20; i++) {
      const account = privateKeyToAccount(generatePrivateKey());
      const data = typedData(keccak256(toHex(i)));
      const signature = await account.signTypedData(data);
      expect(await authorizationSigner({ ...data, signature })).toBe(account.address.toLowerCase());
      expect(await authorizationSigner({ ...data, signature })).toBe(
        (await recoverTypedDataAddress({ ...data, signature })).toLowerCase(),
      );
      // v as 0/1 (yParity) recovers the same key.
      const yParity = `${signature.slice(0, 130)}${signature.endsWith("1b") ? "00" : "01"}` as Hex;
      expect(await authorizationSigner({ ...data, signature: yParity })).toBe(account.address.toLowerCase());
    }
  });

  it("hashes a TransferWithAuthorization as viem's hashTypedData does, for any token's domain and any field values", async () => {
    const random = (bytes: number) => bytesToHex(crypto.getRandomValues(new Uint8Array(bytes)));
    const uint = () => [0n, 1n, 2n ** 256n - 1n, BigInt(random(32)), BigInt(random(5))][Math.floor(Math.random() * 5)]!;
    for (let i = 0; i < 200; i++) {
      const token = random(20);
      const domain = {
        name: ["Tether USD", "USDC", "Celo Dollar", ""][i % 4]!,
        version: String(1 + (i % 3)),
        chainId: [42220, 44787, 31337][i % 3]!,
        verifyingContract: i % 2 ? getAddress(token) : token,
      };
      const message = {
        from: i % 3 ? random(20) : getAddress(random(20)),
        to: random(20),
        value: uint(),
        validAfter: uint(),
        validBefore: uint(),
        nonce: random(32),
      };
      const viem = hashTypedData({
        domain,
        types: authorizationTypes,
        primaryType: "TransferWithAuthorization",
        message,
      });
      expect(bytesToHex(authorizationDigest(domain, message)), `case ${i}`).toBe(viem);
    }
    // A field outside its type is refused as hashTypedData refuses it; a signer of it is none.
    const domain = typedData(keccak256("0x01")).domain;
    const message = { ...typedData(keccak256("0x01")).message, to: "0x1234" as Hex };
    expect(() => authorizationDigest(domain, message)).toThrow();
    expect(() => authorizationDigest(domain, { ...message, to: zeroAddress, value: -1n })).toThrow();
    const account = privateKeyToAccount(generatePrivateKey());
    const signed = typedData(keccak256("0x03"));
    const signature = await account.signTypedData(signed);
    expect(await authorizationSigner({ domain: signed.domain, message: signed.message, signature })).toBe(
      account.address.toLowerCase(),
    );
    expect(await authorizationSigner({ domain, message, signature })).toBeUndefined();
  });

  it("names another signer for another message, and refuses what recovers nothing", async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const signature = await account.signTypedData(typedData(keccak256("0x01")));
    expect(await authorizationSigner({ ...typedData(keccak256("0x02")), signature })).not.toBe(
      account.address.toLowerCase(),
    );
    await expect(recoverSigner(keccak256("0x01"), `${signature.slice(0, 130)}1d` as Hex)).rejects.toThrow();
    await expect(recoverSigner(keccak256("0x01"), `0x${"00".repeat(64)}1b`)).rejects.toThrow();
  });

  it("signs the relayer's transactions with the native library, byte for byte as viem's account does", async () => {
    for (let i = 0; i < 10; i++) {
      const key = generatePrivateKey();
      const [native, viem] = [nativeAccount(key), privateKeyToAccount(key)];
      expect(native.address).toBe(viem.address);
      const transaction = {
        chainId: 42220,
        type: "eip1559" as const,
        nonce: i,
        to: viem.address,
        data: keccak256(toHex(i)),
        gas: 90_000n + BigInt(i),
        maxFeePerGas: 25_000_000_000n,
        maxPriorityFeePerGas: BigInt(i),
      };
      const signed = await native.signTransaction(transaction);
      expect(signed).toBe(await viem.signTransaction(transaction));
      expect((await recoverTransactionAddress({ serializedTransaction: signed as never })).toLowerCase()).toBe(
        viem.address.toLowerCase(),
      );
    }
  });
});

describe("group commit (api/store/coalesce.ts)", () => {
  it("runs a lone call at once, and the calls made while a batch runs together in the next, each answered in order", async () => {
    const batches: number[][] = [];
    let release = () => {};
    const double = coalesced(async (inputs: number[]) => {
      batches.push(inputs);
      if (batches.length === 1) await new Promise<void>((r) => (release = r));
      return inputs.map((x) => x * 2);
    });
    const first = double(1);
    expect(batches).toEqual([[1]]); // no wait for company
    const later = [double(2), double(3), double(4)];
    release();
    expect(await first).toBe(2);
    expect(await Promise.all(later)).toEqual([4, 6, 8]);
    expect(batches).toEqual([[1], [2, 3, 4]]);
  });

  it("fails every call of a failed batch, and runs the next batch all the same", async () => {
    let fail = true;
    const run = coalesced(async (inputs: string[]) => {
      if (fail) throw new Error("store down");
      return inputs;
    });
    const [a, b] = [run("a"), run("b")];
    await expect(a).rejects.toThrow("store down");
    await expect(b).rejects.toThrow("store down");
    fail = false;
    expect(await run("c")).toBe("c");
  });
});
