import type { MiddlewareHandler } from "hono";
import { errorBody } from "../../shared/errors.ts";
import type { IndexState, IndexStatus } from "./state.ts";

export const INDEX_NOT_CURRENT = "index_not_current";

/** When to come back: the estimate while it is short, never sooner than 2 s nor later than a minute. */
export const retryAfterSeconds = (status: IndexStatus) => Math.min(60, Math.max(2, status.etaSeconds ?? 5));

const notCurrentMessage = (status: IndexStatus) =>
  `This answer would be built on an index that is not complete and current (${status.reason}); nothing was charged. Retry after the Retry-After seconds.`;

/**
 * Route middleware of every paid route, before the payment is read: a paid answer is only worth
 * the index behind it, so while the backfill runs, after a crash recovery, or when the index lags
 * the chain head by more than MAX_LAG_BLOCKS, the call is refused with 503 and nothing is charged.
 */
export const indexCurrent: MiddlewareHandler<{ Variables: { index: IndexState } }> = async (c, next) => {
  const status = await c.var.index.status();
  if (!status.current) {
    return c.json(errorBody(INDEX_NOT_CURRENT, notCurrentMessage(status), status), 503, {
      "Retry-After": String(retryAfterSeconds(status)),
    });
  }
  await next();
};
