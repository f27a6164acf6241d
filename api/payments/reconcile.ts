import type { PublicClient } from "viem";
import { parseEventLogs, TransactionReceiptNotFoundError } from "viem";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import type { Address } from "../../config/addresses.ts";
import { MULTICALL3 } from "../../config/celo.ts";
import { firstLine } from "../../shared/async.ts";
import { log } from "../../shared/log.ts";
import type { PaymentRow } from "../store/schema.ts";
import type { Ledger, PaymentKey, Resolution } from "./ledger/ledger.ts";
import { type Settler, usedIn } from "./relayer.ts";

/** What reconciliation reads from the chain. */
export type ReconcileChain = Pick<
  PublicClient,
  "readContract" | "getBlock" | "getTransactionReceipt" | "getContractEvents" | "getTransactionCount"
>;

/**
 * What must follow an outcome read from the chain, or a credit hold abandoned (the report route
 * revokes the passport of a payment that did not settle). Called before the outcome is recorded: a
 * crash or a throw leaves the row to the next sweep, so it runs at least once per outcome and must
 * be idempotent.
 */
export type OnOutcome = (
  row: Pick<PaymentRow, "route" | "responseBody" | "reference">,
  outcome: Resolution,
) => Promise<void>;

/** Several routes' hooks as one: each in turn (each ignores the others' routes); the first that fails fails it, to be run again. */
export const eachOutcome =
  (...hooks: OnOutcome[]): OnOutcome =>
  async (row, outcome) => {
    for (const hook of hooks) await hook(row, outcome);
  };

export type ReconcileDeps = {
  chain: ReconcileChain;
  ledger: Pick<Ledger, "requeue" | "resolve" | "signedTransaction">;
  payTo: Address;
  settler?: Settler;
  onOutcome?: OnOutcome;
};

/** A `settling` row not touched for this long is not in flight anywhere (settlers wait at most RECEIPT_WAIT_MS): the background reconciler takes it. */
const SETTLING_IDLE_MS = 15_000;
/** How often the background reconciler looks for rows whose outcome is unknown. */
const RECONCILE_INTERVAL_MS = 30_000;
/** Block time assumed when bounding the event search (Celo: 1 s; the search also covers 30 min before the claim). */
const SEARCH_MARGIN_BLOCKS = 1_800n;

export const keyOf = (row: Pick<PaymentRow, "token" | "payer" | "nonce">): PaymentKey => ({
  token: row.token as Address,
  payer: row.payer as Address,
  nonce: row.nonce,
});

/**
 * The outcome of a payment, read from the chain's own state, never from a timeout:
 *  1. our settlement transaction's receipt (settled if this authorization was used in it: a batch
 *     can succeed while one of its transfers failed);
 *  2. else the token's authorizationState(payer, nonce) at the latest block; when used, the
 *     AuthorizationUsed event names the transaction: settled if it paid the treasury (ours or
 *     anyone's), used_elsewhere if not (or AuthorizationCanceled: the payer cancelled it);
 *  3. unused: failed if our transaction reverted or can never be mined (its relayer nonce was taken
 *     by another transaction), expired once the chain's time reached validBefore, else still pending.
 * Chain errors are thrown: no outcome is decided without an answer from the chain.
 */
export async function chainOutcome(
  row: PaymentRow,
  deps: Pick<ReconcileDeps, "chain" | "payTo" | "settler" | "ledger">,
): Promise<Resolution | "pending"> {
  const { chain } = deps;
  const token = row.token as Address;
  const payer = row.payer as Address;
  const nonce = row.nonce as `0x${string}`;
  let ourReverted: "whole" | "this transfer" | undefined;
  if (row.transaction) {
    const receipt = await chain
      .getTransactionReceipt({ hash: row.transaction as `0x${string}` })
      .catch((error: unknown) => {
        if (error instanceof TransactionReceiptNotFoundError) return undefined;
        throw error;
      });
    if (receipt && usedIn(receipt, token, payer, nonce)) return { status: "settled", transaction: row.transaction };
    // A batch (aggregate3, each transfer allowed to fail alone) reverts whole only for a reason of
    // ours, out of gas most likely; a direct call that reverted, or a batch that succeeded without
    // using this authorization, says the transfer itself failed.
    if (receipt)
      ourReverted =
        receipt.status === "reverted" && receipt.to?.toLowerCase() === MULTICALL3 ? "whole" : "this transfer";
  }
  const block = await chain.getBlock({ blockTag: "latest" });
  const used = await chain.readContract({
    address: token,
    abi: devStablecoinAbi,
    functionName: "authorizationState",
    args: [payer, nonce],
    blockNumber: block.number,
  });
  if (used) {
    const span = BigInt(Math.ceil((Date.now() - row.createdAt.getTime()) / 1000)) + SEARCH_MARGIN_BLOCKS;
    const range = { fromBlock: block.number > span ? block.number - span : 0n, toBlock: block.number };
    const [event] = await chain.getContractEvents({
      address: token,
      abi: devStablecoinAbi,
      eventName: "AuthorizationUsed",
      args: { authorizer: payer, nonce },
      ...range,
    });
    if (event) {
      const tx = event.transactionHash;
      const receipt = await chain.getTransactionReceipt({ hash: tx });
      const paid = parseEventLogs({ abi: devStablecoinAbi, eventName: "Transfer", logs: receipt.logs }).some(
        (log) =>
          log.address.toLowerCase() === token &&
          log.args.from.toLowerCase() === payer &&
          log.args.to.toLowerCase() === deps.payTo.toLowerCase() &&
          log.args.value >= BigInt(row.amount),
      );
      if (paid) {
        const ours = row.transaction?.toLowerCase() === tx.toLowerCase();
        return {
          status: "settled",
          transaction: tx,
          note: ours ? undefined : `settled by transaction ${tx} sent by ${receipt.from}, not by our settlement`,
        };
      }
      return {
        status: "used_elsewhere",
        failure: `the nonce was used by transaction ${tx} without paying the treasury; not our charge`,
      };
    }
    const [cancelled] = await chain.getContractEvents({
      address: token,
      abi: devStablecoinAbi,
      eventName: "AuthorizationCanceled",
      args: { authorizer: payer, nonce },
      ...range,
    });
    if (cancelled)
      return {
        status: "used_elsewhere",
        failure: `the payer cancelled the authorization in ${cancelled.transactionHash}; not our charge`,
      };
    return "pending"; // used, but the event is outside the searched blocks: left for an operator (stale report)
  }
  if (ourReverted === "whole")
    return {
      status: "failed",
      failure: "the settlement transaction (a batch) reverted whole; nothing charged",
      transaction: row.transaction!,
      ours: true,
    };
  if (ourReverted)
    return {
      status: "failed",
      failure: "the settlement transaction reverted (or its transfer failed in the batch); nothing charged",
      transaction: row.transaction!,
    };
  if (row.validBefore !== null && block.timestamp >= BigInt(row.validBefore)) {
    return {
      status: "expired",
      failure: `the authorization expired unused (validBefore ${row.validBefore}, chain time ${block.timestamp}); never charged`,
    };
  }
  if (row.transaction && row.settler && row.settlerNonce !== null) {
    const mined = await chain.getTransactionCount({ address: row.settler as Address, blockNumber: block.number });
    if (mined > row.settlerNonce)
      return {
        status: "failed",
        failure: `the settlement transaction was dropped (relayer nonce ${row.settlerNonce} was used by another transaction); nothing charged`,
        ours: true,
      };
    // It may still be mined: send it again in case the node dropped it (same bytes, same hash).
    const signed = deps.settler ? await deps.ledger.signedTransaction(row.transaction) : undefined;
    if (signed) await deps.settler?.rebroadcast(signed as `0x${string}`);
  }
  return "pending";
}

/** A deferred row's settlement is tried this many times before its failure stands (and becomes the payer's debt). */
export const MAX_SETTLE_ATTEMPTS = 3;

/**
 * A deferred row was answered already: the service settles it. A row left without a transaction
 * (a worker that died before sending) and a failure of our transaction as a whole go back to the
 * settlement queue as not tried (the authorization expires if that never ends); a failed transfer
 * is an attempt, and MAX_SETTLE_ATTEMPTS of them say the payer's authorization cannot pay (a debt).
 */
const retry = (row: PaymentRow, outcome: Resolution | "pending"): { attempted: boolean } | undefined => {
  if (outcome === "pending") return row.transaction ? undefined : { attempted: false };
  if (outcome.status !== "failed") return undefined;
  if (outcome.ours) return { attempted: false };
  return row.attempts + 1 < MAX_SETTLE_ATTEMPTS ? { attempted: true } : undefined;
};

/** Reads the outcome of `row` from the chain and records it. "pending" when the chain cannot tell yet (or did not answer). */
export async function reconcileRow(row: PaymentRow, deps: ReconcileDeps): Promise<Resolution | "pending"> {
  let outcome: Resolution | "pending";
  try {
    outcome = await chainOutcome(row, deps);
  } catch (error) {
    log.warn(`[payments] reconciling ${row.nonce.slice(0, 10)}…: the chain did not answer (${firstLine(error)})`);
    return "pending";
  }
  const again = row.deferred ? retry(row, outcome) : undefined;
  if (again) {
    await deps.ledger.requeue(keyOf(row), again.attempted, { transaction: row.transaction });
    return "pending";
  }
  if (outcome === "pending") return outcome;
  try {
    await deps.onOutcome?.(row, outcome);
  } catch (error) {
    log.warn(
      `[payments] reconciling ${row.nonce.slice(0, 10)}…: what follows its outcome (${outcome.status}) failed, left to the next sweep (${firstLine(error)})`,
    );
    return "pending";
  }
  await deps.ledger.resolve(keyOf(row), outcome);
  return outcome;
}

/** Something that can sweep its unknown outcomes (the payment core). */
export type Reconcilable = {
  reconcileUnresolved: (settlingIdleMs: number) => Promise<{ checked: number; resolved: number }>;
};

/**
 * The background reconciler: once at start (rows left by a crash, whatever their age), then every
 * `intervalMs` for rows whose settlement is no longer in flight. `stop()` ends it.
 */
export function startReconciler(
  core: Reconcilable,
  { intervalMs = RECONCILE_INTERVAL_MS, idleMs = SETTLING_IDLE_MS } = {},
) {
  let running: Promise<unknown> = Promise.resolve();
  const sweep = (idle: number) =>
    (running = running
      .then(() => core.reconcileUnresolved(idle))
      .then(
        (r) =>
          r.resolved &&
          log.info(`[payments] reconciled ${r.resolved} of ${r.checked} payments with an unknown outcome`),
      )
      .catch((error: Error) => log.warn(`[payments] reconciliation failed: ${firstLine(error)}`)));
  const started = sweep(0);
  const timer = setInterval(() => void sweep(idleMs), intervalMs);
  timer.unref?.();
  return { started, stop: () => clearInterval(timer) };
}
