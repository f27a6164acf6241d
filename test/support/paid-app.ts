import { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "../../api/http/app-env.ts";
import { handleError } from "../../api/http/errors.ts";
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
  const assessor = new WalletAssessor({ db: undefined as never, target: { schema: "unused", tracked: null } });
  app.use(async (c, next) => {
    c.set("payments", payments);
    c.set("assessor", assessor);
    // No index stands behind these apps: the readiness gate lets every call through.
    c.set("index", alwaysCurrent);
    await next();
  });
  mountRoutes(app);
  app.onError(handleError);
  return app;
}
