import { isValidPaymentId, PAYMENT_IDENTIFIER } from "@x402/extensions/payment-identifier";
import type { Hex } from "viem";
import { z } from "zod";
import { type Address, addressSchema } from "../../config/addresses.ts";
import { describeIssues } from "../../config/errors.ts";
import { PaymentError } from "./errors.ts";

/**
 * The three ways a payment reaches us, decoded into one shape:
 * - `x-payment-json`: the service interface's `X-PAYMENT` JSON (from, to, value, validAfter,
 *   validBefore, nonce, signature, token);
 * - `x402-v1`: `X-PAYMENT: base64(JSON {x402Version:1, scheme, network, payload})`;
 * - `x402-v2`: `PAYMENT-SIGNATURE: base64(JSON {x402Version:2, accepted, payload})`.
 */
type PaymentEncoding = "x-payment-json" | "x402-v1" | "x402-v2";

export type Authorization = {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
};

export type PaymentAttempt = {
  encoding: PaymentEncoding;
  authorization: Authorization;
  signature: Hex;
  /** The token paid in; x402 v1 payloads do not name it (it is found from the signature). */
  token?: Address;
  scheme?: string;
  network?: string;
  /** The x402 `payment-identifier` the client chose for this paid request (an idempotency key). */
  paymentId?: string;
};

const uint256 = z
  .string()
  .regex(/^\d{1,78}$/, "must be a decimal string")
  .transform((v) => BigInt(v))
  .refine((v) => v < 2n ** 256n, "must fit in uint256");
const bytes32 = z
  .string()
  .regex(/^0x[0-9a-fA-F]{64}$/, "must be 32 bytes of hex")
  .transform((v) => v.toLowerCase() as Hex);
const signature = z
  .string()
  .regex(/^0x([0-9a-fA-F]{2}){65,}$/, "must be a hex signature of at least 65 bytes")
  .transform((v) => v as Hex);

const paymentId = z
  .string()
  .refine(isValidPaymentId, "must be 16-128 letters, digits, '-' or '_' (x402 payment-identifier)");
/** The `payment-identifier` extension as a client echoes it: `{info: {required, id?}}`. */
const paymentIdentifierSchema = z.object({ info: z.object({ id: paymentId.optional() }).loose() }).loose();
const authorizationSchema = z.object({
  from: addressSchema,
  to: addressSchema,
  value: uint256,
  validAfter: uint256,
  validBefore: uint256,
  nonce: bytes32,
});
const x402PayloadSchema = z.object({ signature, authorization: authorizationSchema });

const specJsonSchema = authorizationSchema.extend({ signature, token: addressSchema, paymentId: paymentId.optional() });
const v1Schema = z.object({
  x402Version: z.literal(1),
  scheme: z.string(),
  network: z.string(),
  payload: x402PayloadSchema,
});
const v2Schema = z.object({
  x402Version: z.literal(2),
  accepted: z.object({ scheme: z.string(), network: z.string(), asset: addressSchema }).loose(),
  payload: x402PayloadSchema,
  extensions: z.record(z.string(), z.unknown()).optional(),
});

export type PaymentHeaders = {
  xPayment?: string;
  paymentSignature?: string;
  /** A call paid from credit: its Payment-Identifier header (an x402 payment-identifier, checked by the adapter). */
  paymentId?: string;
};

/** Reads whichever payment header was sent; undefined when none was. */
export function decodePayment(headers: PaymentHeaders, maxBytes: number): PaymentAttempt | undefined {
  const { xPayment, paymentSignature } = headers;
  if (xPayment === undefined && paymentSignature === undefined) return undefined;
  if (xPayment !== undefined && paymentSignature !== undefined) {
    throw new PaymentError("payment_malformed", "Send one payment header, X-PAYMENT or PAYMENT-SIGNATURE, not both.");
  }
  const raw = (xPayment ?? paymentSignature)!.trim();
  const name = xPayment !== undefined ? "X-PAYMENT" : "PAYMENT-SIGNATURE";
  if (Buffer.byteLength(raw) > maxBytes) {
    throw new PaymentError(
      "payment_header_too_large",
      `The ${name} header is ${Buffer.byteLength(raw)} bytes; at most ${maxBytes} are accepted.`,
    );
  }
  if (raw === "") throw new PaymentError("payment_malformed", `The ${name} header is empty.`);

  if (name === "X-PAYMENT" && raw.startsWith("{")) {
    const spec = parse(specJsonSchema, json(raw, name), name);
    const { signature, token, paymentId, ...authorization } = spec;
    return { encoding: "x-payment-json", authorization, signature, token, ...(paymentId ? { paymentId } : {}) };
  }
  const decoded = json(base64(raw, name), name);
  const version = (decoded as { x402Version?: unknown } | null)?.x402Version;
  if (version === 2) {
    const v2 = parse(v2Schema, decoded, name);
    const id =
      v2.extensions?.[PAYMENT_IDENTIFIER] === undefined
        ? undefined
        : parse(paymentIdentifierSchema, v2.extensions[PAYMENT_IDENTIFIER], name).info.id;
    return {
      encoding: "x402-v2",
      ...v2.payload,
      token: v2.accepted.asset,
      scheme: v2.accepted.scheme,
      network: v2.accepted.network,
      ...(id ? { paymentId: id } : {}),
    };
  }
  if (version === 1) {
    const v1 = parse(v1Schema, decoded, name);
    return { encoding: "x402-v1", ...v1.payload, scheme: v1.scheme, network: v1.network };
  }
  throw new PaymentError("payment_malformed", `The ${name} header's x402Version must be 1 or 2.`);
}

function base64(raw: string, name: string): string {
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(raw)) {
    throw new PaymentError(
      "payment_malformed",
      `The ${name} header is neither the X-PAYMENT JSON object nor base64-encoded x402 JSON.`,
    );
  }
  return Buffer.from(raw, "base64").toString("utf8");
}

function json(text: string, name: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new PaymentError("payment_malformed", `The ${name} header does not hold valid JSON.`);
  }
}

function parse<S extends z.ZodType>(schema: S, value: unknown, name: string): z.infer<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success)
    throw new PaymentError(
      "payment_malformed",
      `The ${name} payment is invalid: ${describeIssues(parsed.error.issues)}.`,
      parsed.error.issues,
    );
  return parsed.data;
}
