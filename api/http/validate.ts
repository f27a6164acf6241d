import type { Context, MiddlewareHandler } from "hono";
import type { z } from "zod";
import type { Address } from "../../config/addresses.ts";
import { describeIssues } from "../../config/errors.ts";
import { ApiError } from "./errors.ts";

/** Parses a JSON body against a zod schema: 400 `invalid_json` or `invalid_request` naming the fields. */
export async function jsonBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.infer<S>> {
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    throw new ApiError(400, "invalid_json", "The request body must be JSON (Content-Type: application/json).");
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw new ApiError(400, "invalid_request", describeIssues(parsed.error.issues), parsed.error.issues);
  return parsed.data;
}

/** Where a validated request waits for the next middleware and the handler. */
export type InputEnv<T> = { Variables: { input: T } };

/**
 * The wallet-facing part of any validated request: body routes name `walletAddress` (and the
 * paying `callerAddress`), wallet routes take `address` from the path.
 */
export type WalletRequest = { walletAddress?: Address; address?: Address; callerAddress?: Address };

/** The wallet a validated request is about. */
export const requestWallet = (c: Context): Address | undefined => {
  const input = c.get("input") as WalletRequest;
  return input.walletAddress ?? input.address;
};

/** Validates the JSON body before anything else runs (so bad input is a 400, never a charge). */
export function jsonInput<S extends z.ZodType>(schema: S): MiddlewareHandler<InputEnv<z.infer<S>>> {
  return async (c, next) => {
    c.set("input", await jsonBody(c, schema));
    await next();
  };
}

/** Validates the path parameters; `code` names what a bad one is (e.g. invalid_address). */
export function paramInput<S extends z.ZodType>(schema: S, code = "invalid_request"): MiddlewareHandler<InputEnv<z.infer<S>>> {
  return async (c, next) => {
    const parsed = schema.safeParse(c.req.param());
    if (!parsed.success) throw new ApiError(400, code, describeIssues(parsed.error.issues), parsed.error.issues);
    c.set("input", parsed.data);
    await next();
  };
}
