import type { MiddlewareHandler } from "hono";
import type { Address } from "../../config/addresses.ts";
import type { IndexState } from "../indexing/state.ts";
import type { MonitorServices } from "../monitors/settings.ts";
import type { Billing } from "../payments/billing.ts";
import type { Claim, PaymentCore } from "../payments/core.ts";
import type { WalletAssessor } from "../wallet/assess.ts";

/**
 * What the app hands every request (`c.var`): the services route middleware needs, since route
 * declarations are static data, and the billing the payment middleware leaves for the handler.
 */
export type AppEnv = {
  Variables: {
    payments: PaymentCore;
    assessor: WalletAssessor;
    /** Where indexing stands: paid routes answer only from a complete, current index. */
    index: IndexState;
    /**
     * What the handler may say about the payment that let it run (x402Billing), once the price is
     * taken: await it after the reads and before anything is written. A read-only route's handler
     * (PaymentHooks.readOnly) may start while a credit payer's price is still being taken; the
     * promise then rejects if it is refused, and the refusal is answered instead.
     */
    billing: Promise<Billing>;
    /** The payment claimed for this request (set by the payment middleware on paid routes). */
    claim: Claim;
    /** The wallet signed in with SIGN-IN-WITH-X on an owner route (api/http/owner.ts). */
    owner: Address;
    /** The monitors' store and settings (api/monitors): their route checks run before payment. */
    monitors: MonitorServices;
    /** The free routes' per-client limit, one per app (api/http/rate-limit.ts). */
    freeLimit: MiddlewareHandler;
    /** This request's id, answered as X-Request-Id (hono/request-id, in api/http/log.ts). */
    requestId: string;
  };
};
