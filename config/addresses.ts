import { isAddress } from "viem";
import { z } from "zod";

export type Address = `0x${string}`;

/**
 * Why `value` is not an address we take, or null. Mixed case is an EIP-55 checksum and must be
 * right (a mistyped character shows); all lowercase or all uppercase carries none and is taken.
 */
export function addressProblem(value: string): string | null {
  if (!isAddress(value, { strict: false })) return "must be 0x followed by 40 hex characters";
  const hex = value.slice(2);
  if (hex === hex.toLowerCase() || hex === hex.toUpperCase() || isAddress(value, { strict: true })) return null;
  return "has a wrong EIP-55 checksum (mixed case must be the checksummed form; or send it all lowercase)";
}

/** A 0x address as clients and the environment give it: one letter case, or mixed case with a right checksum. */
export const addressString = z
  .string()
  .superRefine((value, ctx) => {
    const problem = addressProblem(value);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  })
  .meta({ pattern: "^0x[a-fA-F0-9]{40}$", examples: ["0x70997970c51812dc3a010c7d01b50e0d17dc79c8"] });

/** A 0x address, normalised to lowercase: the form every table and comparison uses. */
export const addressSchema = addressString.transform((value) => value.toLowerCase() as Address);
