import { zeroAddress } from "viem";
import { describe, expect, it } from "vitest";
import { exactUsd, formatUsdCents, formatWholeUsd, unitsToUsd, usdRoundedToCents } from "../api/money.ts";
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
  it("parses an address in any case to lowercase (viem's isAddress), refusing anything else", () => {
    expect(addressSchema.parse("0xAbCdEf0123456789abcdef0123456789ABCDEF01")).toBe("0xabcdef0123456789abcdef0123456789abcdef01");
    expect(addressSchema.parse(zeroAddress)).toBe(zeroAddress);
    for (const bad of ["0x123", "abcdef0123456789abcdef0123456789abcdef0123", "0xZZcdef0123456789abcdef0123456789abcdef01", ""]) {
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
