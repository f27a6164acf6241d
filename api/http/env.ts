import type { Billing } from "../payments/billing.ts";
import type { PaymentCore } from "../payments/core.ts";
import type { WalletAssessor } from "../wallet/assess.ts";

/**
 * What the app hands every request (`c.var`): the services route middleware needs, since route
 * declarations are static data, and the billing the payment middleware leaves for the handler.
 */
export type AppEnv = {
  Variables: {
    payments: PaymentCore;
    assessor: WalletAssessor;
    billing: Billing;
  };
};
