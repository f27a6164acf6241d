import { type Hex, hexToBigInt, hexToNumber, isErc6492Signature, size, slice } from "viem";
import type { Address } from "../../config/addresses.ts";
import type { TokenInfo } from "../../config/celo.ts";
import type { PaymentSettings } from "../../config/payments.ts";
import type { IndexTarget } from "../../config/target.ts";
import { firstLine } from "../../shared/async.ts";
import { arrayParam, type IndexDb, queryPrepared } from "../db.ts";
import { coalesced } from "../store/coalesce.ts";
import { PaymentError } from "./errors.ts";
import type { PaymentAttempt } from "./header.ts";
import { explain, signerOf, type VerifiedPayment, x402Payment } from "./verify.ts";

/** What the indexer knows about a payer and one of its authorizations, read from the indexed tables (no RPC). */
export type PayerFacts = {
  /**
   * The wallet's indexed balance in the token (smallest units); null when the index does not follow
   * the wallet's whole balance (tracked mode, a wallet outside the set): then the chain must tell.
   */
  balance: bigint | null;
  /** Whether the indexer has seen AuthorizationUsed or AuthorizationCanceled for the authorization's nonce. */
  nonce: "used" | "canceled" | null;
};

/** Reads a payer's facts in one round trip. */
export type PayerState = { read(token: Address, wallet: Address, nonce: Hex): Promise<PayerFacts> };

/** secp256k1's n / 2: FiatToken's ECRecover (and the devnet token) refuse a higher `s`. */
const HALF_CURVE_ORDER = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;

/**
 * Verifies an EIP-3009 authorization locally: the signature is recovered (an EOA's), the window,
 * recipient, amount and token were already checked by checkPayment; the nonce must not be spent in
 * the indexed events; the indexed balance less `unsettled` (the payer's amounts in this token that
 * this service has claimed but not yet settled, this payment excluded) must cover the amount.
 * Returns the same VerifiedPayment verifyPayment returns, or "needs_rpc" for what only the chain
 * can judge: a contract wallet's signature (EIP-6492, or not a 65-byte ECDSA signature: EIP-1271)
 * and a balance the index does not follow. Refusals throw verifyPayment's PaymentError codes.
 *
 * The index trails the chain by its polling interval: a nonce spent or a balance moved in the last
 * moments passes here and fails at settlement, the exposure deferred settlement bounds.
 */
export async function verifyWithoutRpc(
  attempt: PaymentAttempt,
  token: TokenInfo,
  deps: { settings: PaymentSettings; state: PayerState; unsettled: bigint },
): Promise<VerifiedPayment | "needs_rpc"> {
  const auth = attempt.authorization;
  // The index is read while the signature is recovered (CPU): one wait for both.
  const reads = deps.state.read(token.address, auth.from, auth.nonce);
  reads.catch(() => undefined); // a refused signature leaves it unawaited
  if ((await checkSignatureLocally(attempt, token, deps.settings)) === "needs_rpc") return "needs_rpc";
  return checkFundsLocally(attempt, token, { settings: deps.settings, facts: reads, unsettled: deps.unsettled });
}

/**
 * The first half of verifyWithoutRpc: the signature is the payer's own key's, in the form the token
 * accepts ("needs_rpc": a contract wallet's, which only the chain can judge).
 */
export async function checkSignatureLocally(
  attempt: PaymentAttempt,
  token: TokenInfo,
  settings: PaymentSettings,
): Promise<"ok" | "needs_rpc"> {
  if (isErc6492Signature(attempt.signature) || size(attempt.signature) !== 65) return "needs_rpc";
  const signer = await signerOf(attempt, token, settings);
  // Not the payer's key: a contract wallet's owner signature (EIP-1271) looks just like this, and
  // only the chain can judge it; a good signature is never called bad.
  if (signer !== attempt.authorization.from) return "needs_rpc";
  // The payer's key, in a form the token refuses (high s, odd v): it can never settle.
  if (!isCanonical(attempt.signature)) throw new PaymentError("invalid_signature", explain("invalid_signature", token));
  return "ok";
}

/** The second half of verifyWithoutRpc: the nonce is unspent and the balance, less `unsettled`, covers the amount, as the index says. */
export async function checkFundsLocally(
  attempt: PaymentAttempt,
  token: TokenInfo,
  deps: { settings: PaymentSettings; facts: Promise<PayerFacts>; unsettled: bigint },
): Promise<VerifiedPayment | "needs_rpc"> {
  const auth = attempt.authorization;
  let facts: PayerFacts;
  try {
    facts = await deps.facts;
  } catch (error) {
    throw new PaymentError(
      "settlement_unavailable",
      `The payment could not be verified right now (${firstLine(error)}); nothing was charged. Retry shortly.`,
    );
  }
  const { nonce, balance } = facts;
  if (nonce)
    throw new PaymentError("nonce_already_used", explain("nonce_already_used", token), {
      reason: `authorization ${nonce}`,
    });
  if (balance === null) return "needs_rpc";
  if (balance - deps.unsettled < auth.value) {
    throw new PaymentError("insufficient_balance", explain("insufficient_balance", token), {
      reason: deps.unsettled > 0n ? "balance less unsettled payments" : "balance",
    });
  }
  return x402Payment(attempt, token, deps.settings);
}

/** The form FiatToken's ECRecover accepts: v 27 or 28, low s. */
function isCanonical(signature: Hex): boolean {
  const v = hexToNumber(slice(signature, 64, 65));
  return (v === 27 || v === 28) && hexToBigInt(slice(signature, 32, 64)) <= HALF_CURVE_ORDER;
}

/**
 * The PayerState over the indexed tables: the `balance` view (the index's one balance rule: inflows
 * less outflows of `flow`) and `authorization_state`, two index lookups per payment in one prepared
 * statement, shared by the reads of paid calls made at about the same moment (api/store/coalesce.ts).
 * In tracked mode the index holds only the transfers that touch tracked wallets: another wallet's
 * balance is unknown (null).
 */
export function indexedPayerState(db: IndexDb, target: Pick<IndexTarget, "schema" | "tracked">): PayerState {
  const { schema, tracked } = target;
  type Read = { token: Address; wallet: Address; nonce: Hex };
  const readMany = coalesced(async (reads: Read[]): Promise<PayerFacts[]> => {
    const rows = await queryPrepared<{ i: string; balance: string | null; nonce: "used" | "canceled" | null }>(
      db,
      `payer_facts:${schema}`,
      `select k.i::text as i,
              (select balance::text from "${schema}".balance where address = k.wallet and token = k.token) as balance,
              (select kind from "${schema}".authorization_state where token = k.token and authorizer = k.wallet and nonce = k.nonce) as nonce
       from unnest(${arrayParam(1, "text")}, ${arrayParam(2, "text")}, ${arrayParam(3, "text")}) with ordinality as k(wallet, token, nonce, i)`,
      [reads.map((r) => r.wallet), reads.map((r) => r.token), reads.map((r) => r.nonce.toLowerCase())],
    );
    const facts: PayerFacts[] = [];
    for (const row of rows) {
      const { wallet } = reads[Number(row.i) - 1]!;
      const followed = !tracked || tracked.has(wallet);
      facts[Number(row.i) - 1] = { balance: followed ? BigInt(row.balance ?? "0") : null, nonce: row.nonce ?? null };
    }
    return facts;
  });
  return { read: (token, wallet, nonce) => readMany({ token, wallet, nonce }) };
}
