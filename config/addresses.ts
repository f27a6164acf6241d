import { isAddress } from "viem";
import { z } from "zod";

export type Address = `0x${string}`;

/**
 * A 0x address in any letter case (viem's `isAddress`, checksum not enforced): the form clients
 * and the environment may give.
 */
export const addressString = z
  .string()
  .refine((value) => isAddress(value, { strict: false }), "must be 0x followed by 40 hex characters")
  .meta({ pattern: "^0x[a-fA-F0-9]{40}$", examples: ["0x70997970c51812dc3a010c7d01b50e0d17dc79c8"] });

/** A 0x address, normalised to lowercase: the form every table and comparison uses. */
export const addressSchema = addressString.transform((value) => value.toLowerCase() as Address);
