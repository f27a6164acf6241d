import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../http/app-env.ts";
import { validatedInput, walletRequest } from "../http/payment.ts";

/** Route middleware: the request's wallet must be indexed (tracked-wallets mode), checked before any payment is asked for. */
export const indexedWallet: MiddlewareHandler<AppEnv> = async (c, next) => {
  const wallet = walletRequest.subject(validatedInput(c));
  if (wallet) c.var.assessor.ensureIndexed(wallet);
  await next();
};
