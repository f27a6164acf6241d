import { z } from "zod";

/** A 0x address, normalised to lowercase: the form every table and comparison uses. */
export const addressSchema = z
  .string()
  .regex(/^0x[a-fA-F0-9]{40}$/, "must be 0x followed by 40 hex characters")
  .transform((value) => value.toLowerCase() as `0x${string}`);

export type Address = `0x${string}`;

export const ZERO_ADDRESS: Address = "0x0000000000000000000000000000000000000000";
