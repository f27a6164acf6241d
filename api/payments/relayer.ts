import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { eip3009ABI } from "@x402/evm";
import {
  BaseError,
  ExecutionRevertedError,
  encodeFunctionData,
  getAddress,
  type Hex,
  HttpRequestError,
  InsufficientFundsError,
  type Log,
  type PublicClient,
  parseAbi,
  parseErc6492Signature,
  parseEventLogs,
  parseSignature,
  prepareEncodeFunctionData,
  TimeoutError,
  type TransactionReceipt,
  zeroAddress,
  zeroHash,
} from "viem";
import type { privateKeyToAccount } from "viem/accounts";
import { multicall3Abi } from "../../abis/Multicall3.ts";
import { MULTICALL3 } from "../../config/celo.ts";
import { firstLine } from "../../shared/async.ts";
import { keccak256 } from "./keccak.ts";
import { receiptWatcher } from "./receipts.ts";

/** A settlement transaction signed and about to be broadcast: what the ledger records first. */
export type SignedSettlement = { transaction: Hex; settler: Hex; settlerNonce: number; rawTransaction: Hex };

/**
 * Self-settlement in two steps, so that the transaction hash is recorded before anything waits:
 * `submit` signs transferWithAuthorization with the relayer, hands it to `record` (the ledger),
 * then broadcasts it; `receipt` waits for it, and never decides anything from a timeout.
 * Authorizations submitted while a transaction is being sent wait for the next one and share it
 * (Multicall3's aggregate3): under load, one transaction settles many payments.
 */
export type Settler = {
  relayer: Hex;
  submit: (
    payload: PaymentPayload,
    requirements: PaymentRequirements,
    record: (signed: SignedSettlement) => Promise<void>,
  ) => Promise<SubmitResult>;
  receipt: (hash: Hex, timeoutMs: number) => Promise<TransactionReceipt | undefined>;
  /** Sends an already signed transaction again (a dropped one would otherwise leave a nonce gap). */
  rebroadcast: (raw: Hex) => Promise<void>;
};

export type SubmitResult =
  /** Broadcast (or possibly broadcast: the node did not answer): the outcome is on chain. */
  | { sent: true; signed: SignedSettlement; uncertain?: string }
  /**
   * Not broadcast: nothing can be charged. `unavailable` when the RPC could not be reached; `ours`
   * when the node refused our transaction, not the payer's transfer: the relayer cannot pay for gas
   * (`unfunded`), or anything else (`node`: its fee, its nonce, an error of the node, a batch whose
   * transfers may each fail alone). Otherwise the payer's transfer, sent alone, would revert.
   */
  | { sent: false; reason: string; unavailable: boolean; ours?: "unfunded" | "node" };

/**
 * How long a fee estimate is reused: under a block's time, so a transaction pays what the node
 * asked within the block (viem's estimate has a 20% margin over the base fee). A send refused for
 * its fee asks again.
 */
const FEE_TTL_MS = 1_000;

/** At most this many authorizations go in one transaction (gas stays far below a Celo block's limit). */
export const MAX_BATCH = 50;

/**
 * How long a gas estimate per authorization is reused for batches (aggregate3) of the same tokens,
 * and the margin and fixed part added to it: the estimate is a round trip that executes the whole
 * batch, about 100 ms of a 50-payment batch's 170 ms on a loaded devnet. Gas not used is not paid.
 */
const GAS_TTL_MS = 10_000;
const GAS_MARGIN_PERCENT = 125n;
const GAS_FIXED = 100_000n;

export type RelayerClient = PublicClient & {
  prepareTransactionRequest: (args: Record<string, unknown>) => Promise<Record<string, unknown>>;
  sendRawTransaction: (args: { serializedTransaction: Hex }) => Promise<Hex>;
};

type Waiting = {
  payload: PaymentPayload;
  requirements: PaymentRequirements;
  record: (signed: SignedSettlement) => Promise<void>;
  done: (result: SubmitResult | { error: unknown }) => void;
};

/**
 * The relayer's sends, one at a time (a single loop), from a local nonce counter that starts from
 * the chain's pending count and is read again after any failure or receipt timeout. A transaction
 * the node dropped is then replaced by the next send (same nonce), so no gap blocks later ones,
 * and a nonce is never handed out twice while its transaction may still be mined.
 */
export function relayerSettler(client: RelayerClient, account: ReturnType<typeof privateKeyToAccount>): Settler {
  const relayer = account.address.toLowerCase() as Hex;
  let nextNonce: number | undefined;
  const queue: Waiting[] = [];
  let sending = false;
  const waits = new Map<string, Promise<TransactionReceipt | undefined>>();
  const receipts = receiptWatcher(client);
  /** The fees of the last FEE_TTL_MS: a batch a few ms after another pays what it did, without asking the node twice more. */
  let fees: { at: number; value: Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }> } | undefined;
  /** Gas per authorization of the last estimate, by the batch's tokens (their costs differ). A reverted or refused send forgets them all. */
  const gasPerItem = new Map<string, { at: number; perItem: bigint }>();
  const tokensOf = (batch: Waiting[]) =>
    [...new Set(batch.map((w) => w.requirements.asset.toLowerCase()))].sort().join();
  const knownGas = (batch: Waiting[]): bigint | undefined => {
    // One authorization is a direct call: its estimate is also the node's word that the transfer
    // would go through (and that the node answers), which decides "not sent, nothing charged".
    if (batch.length < 2) return undefined;
    const known = gasPerItem.get(tokensOf(batch));
    if (!known || Date.now() - known.at > GAS_TTL_MS) return undefined;
    return (known.perItem * BigInt(batch.length) * GAS_MARGIN_PERCENT) / 100n + GAS_FIXED;
  };
  const currentFees = () => {
    if (!fees || Date.now() - fees.at > FEE_TTL_MS) {
      const value = client.estimateFeesPerGas() as Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }>;
      fees = { at: Date.now(), value };
      value.catch(() => fees?.value === value && (fees = undefined));
    }
    return fees.value;
  };

  const pump = async () => {
    if (sending) return;
    sending = true;
    try {
      // The submits of this moment (a worker's rows, concurrent requests) join the first transaction.
      await new Promise((r) => setImmediate(r));
      while (queue.length > 0) {
        const batch = queue.splice(0, MAX_BATCH);
        const requeue = await sendBatch(batch);
        queue.unshift(...requeue);
      }
    } finally {
      sending = false;
    }
  };

  /** Signs, records and sends one transaction for `batch`; returns the items to send again (their batch changed). */
  const sendBatch = async (batch: Waiting[]): Promise<Waiting[]> => {
    const settle = (items: Waiting[], result: SubmitResult) => {
      for (const w of items) w.done(result);
    };
    const call = batchCall(batch);
    let prepared: Record<string, unknown>;
    const gas = knownGas(batch);
    try {
      prepared = await client.prepareTransactionRequest({
        account,
        ...call,
        ...(await currentFees()),
        chain: client.chain,
        ...(gas ? { gas, parameters: ["chainId", "type"] } : { parameters: ["chainId", "gas", "type"] }),
      });
      // Each authorization's share of the estimate, its fixed cost included: an over-estimate for larger batches.
      if (!gas && batch.length > 1 && typeof prepared.gas === "bigint")
        gasPerItem.set(tokensOf(batch), { at: Date.now(), perItem: prepared.gas / BigInt(batch.length) });
    } catch (error) {
      // Only a lone transfer's estimate judges the payer's transfer: aggregate3 lets each fail alone.
      settle(batch, refusedSend(error, batch.length === 1));
      return [];
    }
    for (let attempt = 0; ; attempt++) {
      let nonce: number;
      try {
        nonce = nextNonce ?? (await client.getTransactionCount({ address: account.address, blockTag: "pending" }));
      } catch (error) {
        settle(batch, { sent: false, reason: firstLine(error), unavailable: true });
        return [];
      }
      const rawTransaction = await account.signTransaction({ ...(prepared as object), nonce } as Parameters<
        typeof account.signTransaction
      >[0]);
      const signed = {
        transaction: keccak256(rawTransaction, "hex"),
        settler: relayer,
        settlerNonce: nonce,
        rawTransaction,
      };
      // Each payment's row records the transaction before it leaves. A row that refuses (no longer
      // its request's) drops out: the others are signed again without it, in the next transaction.
      const recorded = await Promise.all(
        batch.map((w) =>
          w.record(signed).then(
            () => true,
            (error: unknown) => {
              w.done({ error });
              return false;
            },
          ),
        ),
      );
      if (recorded.includes(false)) return batch.filter((_, i) => recorded[i]);
      try {
        await client.sendRawTransaction({ serializedTransaction: rawTransaction });
        nextNonce = nonce + 1;
        settle(batch, { sent: true, signed });
        return [];
      } catch (error) {
        nextNonce = undefined;
        gasPerItem.clear();
        const message = fullMessage(error);
        if (/fee|underpriced/i.test(message)) fees = undefined;
        // The node may have taken it before the answer was lost: the chain decides.
        if (isTransportError(error) || /already known|known transaction|already imported/i.test(message)) {
          settle(batch, { sent: true, signed, uncertain: firstLine(error) });
          return [];
        }
        // Another sender used this nonce (a restart, a second process with the key): this
        // transaction can never be mined; sign again with the chain's count.
        if (
          /nonce too low|nonce.*too small|nonce has already been used|replacement transaction underpriced/i.test(
            message,
          ) &&
          attempt < 3
        )
          continue;
        // The transfers were judged when estimated: what the node refuses now is our transaction.
        settle(batch, refusedSend(error, false));
        return [];
      }
    }
  };

  return {
    relayer,
    submit(payload, requirements, record) {
      return new Promise<SubmitResult>((resolve, reject) => {
        queue.push({ payload, requirements, record, done: (r) => ("error" in r ? reject(r.error) : resolve(r)) });
        void pump();
      });
    },
    receipt(hash, timeoutMs) {
      // The payments of one transaction wait for one receipt: one poll, however many ask.
      const key = `${hash}:${timeoutMs}`;
      let waiting = waits.get(key);
      if (!waiting) {
        waiting = receipts
          .wait(hash, timeoutMs)
          .then((receipt) => {
            // Out of gas, or anything else: the next batch asks the node for its gas again.
            if (receipt?.status === "reverted") gasPerItem.clear();
            // Dropped, perhaps: its nonce must not leave a gap.
            if (!receipt) nextNonce = undefined;
            return receipt;
          })
          .finally(() => waits.delete(key));
        waits.set(key, waiting);
      }
      return waiting;
    },
    async rebroadcast(raw) {
      await client.sendRawTransaction({ serializedTransaction: raw }).catch(() => undefined);
    },
  };
}

/** One authorization: transferWithAuthorization on its token. Several: aggregate3, each allowed to fail alone. */
function batchCall(batch: Waiting[]): { to: Hex; data: Hex } {
  if (batch.length === 1) return { to: lower(batch[0]!.requirements.asset), data: transferCalldata(batch[0]!.payload) };
  const calls = batch.map((w) => ({
    target: lower(w.requirements.asset),
    allowFailure: true,
    callData: transferCalldata(w.payload),
  }));
  return { to: MULTICALL3_TO, data: encodeFunctionData({ ...AGGREGATE3, args: [calls] }) };
}

// Each function's ABI item and selector, found once: encodeFunctionData would otherwise pick the
// overload by checking every argument, and hash its signature, for each payment of each batch.
const AGGREGATE3 = prepareEncodeFunctionData({ abi: multicall3Abi, functionName: "aggregate3" });
const TRANSFER_VRS = prepareEncodeFunctionData({
  abi: eip3009ABI,
  functionName: "transferWithAuthorization",
  args: [zeroAddress, zeroAddress, 0n, 0n, 0n, zeroHash, 0, zeroHash, zeroHash],
});
const TRANSFER_BYTES = prepareEncodeFunctionData({
  abi: eip3009ABI,
  functionName: "transferWithAuthorization",
  args: [zeroAddress, zeroAddress, 0n, 0n, 0n, zeroHash, "0x"],
});
const MULTICALL3_TO = getAddress(MULTICALL3);
/** Addresses in lower case: encoded the same, and checked without the checksum's hash (viem's isAddress). */
const lower = (address: string) => address.toLowerCase() as Hex;

/** transferWithAuthorization calldata as the x402 package encodes it: (v, r, s) for an EOA signature, bytes otherwise. */
export function transferCalldata(payload: PaymentPayload): Hex {
  const { authorization: a, signature } = payload.payload as { authorization: Record<string, string>; signature: Hex };
  const inner = parseErc6492Signature(signature).signature;
  const args = [
    lower(a.from!),
    lower(a.to!),
    BigInt(a.value!),
    BigInt(a.validAfter!),
    BigInt(a.validBefore!),
    a.nonce as Hex,
  ] as const;
  if (inner.length === 132) {
    const sig = parseSignature(inner);
    return encodeFunctionData({
      ...TRANSFER_VRS,
      args: [...args, Number(sig.v ?? BigInt(sig.yParity + 27)), sig.r, sig.s],
    });
  }
  return encodeFunctionData({ ...TRANSFER_BYTES, args: [...args, inner] });
}

const authorizationUsedAbi = parseAbi(["event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)"]);

/** The authorizations a receipt's logs used, as `token:payer:nonce` (lowercase): decoded once per receipt, asked once per payment of its batch. */
const usedByLogs = new WeakMap<readonly Log[], Set<string>>();

/**
 * Whether `receipt` used this authorization (its AuthorizationUsed event is in it): in a batch, the
 * transaction succeeds even when one of its transfers failed, so success alone says nothing.
 */
export function usedIn(
  receipt: Pick<TransactionReceipt, "status" | "logs">,
  token: string,
  payer: string,
  nonce: string,
): boolean {
  if (receipt.status !== "success") return false;
  let used = usedByLogs.get(receipt.logs);
  if (!used) {
    const events = parseEventLogs({ abi: authorizationUsedAbi, logs: receipt.logs });
    used = new Set(events.map((e) => `${e.address}:${e.args.authorizer}:${e.args.nonce}`.toLowerCase()));
    usedByLogs.set(receipt.logs, used);
  }
  return used.has(`${token}:${payer}:${nonce}`.toLowerCase());
}

/** The request never got an answer from the node (down, hung, refused): as opposed to the node refusing it. */
export function isTransportError(error: unknown): boolean {
  if (error instanceof BaseError)
    return !!error.walk((e) => e instanceof HttpRequestError || e instanceof TimeoutError);
  return /fetch failed|ECONNREFUSED|ECONNRESET|socket|timed? ?out/i.test(String((error as Error)?.message ?? error));
}

/**
 * A send that failed before broadcast, and whose failure it was: the node's (unreachable), the
 * payer's (`payersTransfer`: the refusal judged the payer's transfer alone, and it would revert),
 * or ours (anything else).
 */
function refusedSend(error: unknown, payersTransfer: boolean): SubmitResult {
  const unavailable = isTransportError(error);
  const ours = unavailable
    ? undefined
    : isUnfunded(error)
      ? "unfunded"
      : payersTransfer && isRevert(error)
        ? undefined
        : "node";
  return { sent: false, reason: firstLine(error), unavailable, ...(ours ? { ours } : {}) };
}

/** The node ran the transfer and it reverted (as opposed to refusing the request itself). */
const isRevert = (error: unknown) =>
  (error instanceof BaseError && !!error.walk((e) => e instanceof ExecutionRevertedError)) ||
  /\brevert/i.test(fullMessage(error));

/**
 * The relayer cannot pay for gas: refused when sent, and when estimated nodes answer that the gas
 * needed exceeds what the sender's balance allows at the fee.
 */
const isUnfunded = (error: unknown) =>
  (error instanceof BaseError && !!error.walk((e) => e instanceof InsufficientFundsError)) ||
  /gas required exceeds allowance|insufficient funds for gas/i.test(fullMessage(error));

const fullMessage = (error: unknown) =>
  error instanceof BaseError
    ? [
        error.message,
        error.details,
        ...(error.walk((e) => !(e instanceof BaseError)) ? [String(error.walk())] : []),
      ].join(" ")
    : String((error as Error)?.message ?? error);
