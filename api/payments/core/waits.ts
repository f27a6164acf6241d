import { sleep } from "../../../shared/async.ts";
import type { PaymentRow } from "../../store/schema.ts";
import { isAbandoned, isRerunning, keyId, type PaymentKey } from "../ledger/ledger.ts";
import { keyOf, reconcileRow } from "../reconcile.ts";
import { type CoreContext, reconcileDeps } from "./context.ts";
import { settlementPending } from "./refusals.ts";
import type { Ledger } from "./types.ts";

/** How long a copy of a request waits for the copy that is settling its payment. */
const IN_FLIGHT_WAIT_MS = 90_000;
/** A retry of a payment whose settlement outcome is unknown waits this long for the chain to tell. */
const SETTLING_WAIT_MS = 10_000;
/** How often a waiting request reads the row again. */
const POLL_MS = 50;

/** Another request holds the claim (its handler runs): wait until it concludes or is abandoned, then settlement_pending. */
export async function waitWhilePending(ledger: Pick<Ledger, "find">, key: PaymentKey): Promise<void> {
  await waitWhile(ledger, key, (row) => row.status === "pending" && !isAbandoned(row));
}

/** Another request produces a settled payment's answer again: wait until it stored it or let go. */
export async function waitWhileRerunning(ledger: Pick<Ledger, "find">, key: PaymentKey): Promise<void> {
  await waitWhile(ledger, key, (row) => isRerunning(row));
}

async function waitWhile(
  ledger: Pick<Ledger, "find">,
  key: PaymentKey,
  busy: (row: PaymentRow) => boolean,
): Promise<void> {
  const deadline = Date.now() + IN_FLIGHT_WAIT_MS;
  while (Date.now() < deadline) {
    await sleep(POLL_MS);
    const row = await ledger.find(key);
    if (!row || !busy(row)) return;
  }
  throw settlementPending();
}

/**
 * A retry of a payment whose settlement outcome is unknown: wait for the request settling it in
 * this process, or read the outcome from the chain, up to SETTLING_WAIT_MS; then settlement_pending.
 */
export async function awaitSettlement(ctx: CoreContext, row: PaymentRow): Promise<void> {
  const key = keyOf(row);
  const deadline = Date.now() + (ctx.deps.settlingWaitMs ?? SETTLING_WAIT_MS);
  for (;;) {
    const local = ctx.inflight.get(keyId(key));
    if (local) await Promise.race([local.catch(() => undefined), sleep(Math.max(0, deadline - Date.now()))]);
    else if ((await reconcileRow(row, reconcileDeps(ctx))) !== "pending") return;
    const now = await ctx.ledger.find(key);
    if (now?.status !== "settling") return;
    if (Date.now() >= deadline) throw settlementPending();
    await sleep(250);
    row = now;
  }
}
