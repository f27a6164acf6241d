import { createHash } from "node:crypto";
import type { PaymentRequest, PricedRoute } from "./core/types.ts";

export const sha256Hex = (text: string) => createHash("sha256").update(text).digest("hex");

/** The request and its validated input, hashed: a retry (same payment, or same identifier) must be the same request. */
export const fingerprintOf = (route: Pick<PricedRoute, "name">, request: Pick<PaymentRequest, "path" | "input">) =>
  sha256Hex(`${route.name}\n${request.path}\n${JSON.stringify(request.input)}`);
