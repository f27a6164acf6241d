import { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "../../api/http/app-env.ts";
import { handleError } from "../../api/http/errors.ts";
import { freeRateLimiter } from "../../api/http/rate-limit.ts";
import { validationHook } from "../../api/http/validation.ts";
import type { PaymentCore } from "../../api/payments/core.ts";
import { WalletAssessor } from "../../api/wallet/assess.ts";
import { alwaysCurrent } from "../../harness/index-db.ts";

/**
 * An app wired like the service's (validation, error model, the payment core in `c.var`) with no
 * index behind it: tests mount the real route declarations on it in front of handlers of their own.
 */
export function paidApp(payments: PaymentCore, mountRoutes: (app: OpenAPIHono<AppEnv>) => void): OpenAPIHono<AppEnv> {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  const assessor = new WalletAssessor({
    db: undefined as never,
    target: { schema: "unused", tracked: null, sanctions: null },
  });
  const freeLimit = freeRateLimiter();
  app.use(async (c, next) => {
    c.set("payments", payments);
    c.set("assessor", assessor);
    // No index stands behind these apps: the readiness gate lets every call through.
    c.set("index", alwaysCurrent);
    c.set("freeLimit", freeLimit);
    await next();
  });
  mountRoutes(app);
  app.onError(handleError);
  return app;
}

/**
 * Enough of a payment core for the free routes, which read only its settings (the x402 config reads
 * them once): an app built on it can be asked for nothing paid.
 */
export function settingsOnlyCore(facilitator: object = {}): PaymentCore {
  return {
    settings: {
      payTo: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
      chainId: 42220,
      network: "eip155:42220",
      tokens: [],
      settlement: { mode: "facilitator", url: "http://127.0.0.1:9" },
      timing: { mode: "before" },
      maxTimeoutSeconds: 60,
      maxLifetimeSeconds: 3600,
      maxAmountMicroUsd: 1n,
      maxHeaderBytes: 8192,
      creditMaxMicroUsd: 50_000_000n,
    },
    facilitator,
  } as never;
}
