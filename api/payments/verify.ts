import type { PaymentPayload, PaymentRequirements, VerifyResponse } from "@x402/core/types";
import type { PublicClient } from "viem";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import type { Address } from "../../config/addresses.ts";
import type { TokenInfo } from "../../config/celo.ts";
import type { PaymentSettings } from "../../config/payments.ts";
import { firstLine } from "../../shared/async.ts";
import { PaymentError } from "./errors.ts";
import { codeForReason, type Facilitator } from "./facilitator.ts";
import type { Authorization, PaymentAttempt } from "./header.ts";
import { priceInUnits } from "./prices.ts";
import { requirementFor, V1_NETWORK } from "./requirements.ts";
import { authorizationSigner } from "./secp256k1.ts";

/** callerAddress, when given, names the paying wallet (by payment or from credit): another is refused. */
export function checkCaller(caller: Address | undefined, payer: Address): void {
  if (caller !== undefined && caller !== payer)
    throw new PaymentError(
      "caller_mismatch",
      `callerAddress ${caller} is not the payer ${payer}: the paying wallet must be the caller.`,
    );
}

/** A payment whose authorization checks out on chain and can be settled as it stands. */
export type VerifiedPayment = {
  attempt: PaymentAttempt;
  token: TokenInfo;
  payer: Address;
  amount: bigint;
  payload: PaymentPayload;
  requirements: PaymentRequirements;
};

export type VerifyDeps = {
  settings: PaymentSettings;
  facilitator: Facilitator;
  chain: Pick<PublicClient, "readContract">;
};

/**
 * The checks that need no chain, in the order a client most needs to hear about them. Returns the
 * token paid in. `caller` is the request's callerAddress, which must be the payer when given.
 */
export async function checkPayment(
  attempt: PaymentAttempt,
  priceMicroUsd: bigint,
  settings: PaymentSettings,
  caller: Address | undefined,
  nowSeconds: number,
): Promise<TokenInfo> {
  const { token, lapsed } = await checkPaymentTerms(attempt, priceMicroUsd, settings, caller, nowSeconds);
  if (lapsed) throw lapsed;
  return token;
}

/**
 * checkPayment, except that an authorization past its validBefore is returned with its refusal
 * (`lapsed`) instead of thrown: a retry of a payment already charged or answered is judged by its
 * ledger row, not by the clock (the admission refuses it only where the row has nothing to give).
 */
export async function checkPaymentTerms(
  attempt: PaymentAttempt,
  priceMicroUsd: bigint,
  settings: PaymentSettings,
  caller: Address | undefined,
  nowSeconds: number,
): Promise<{ token: TokenInfo; lapsed?: PaymentError }> {
  const auth = attempt.authorization;
  if (attempt.scheme !== undefined && attempt.scheme !== "exact") {
    throw new PaymentError(
      "unsupported_scheme",
      `Scheme "${attempt.scheme}" is not accepted; pay with "exact" (EIP-3009).`,
    );
  }
  if (attempt.network !== undefined && attempt.network !== settings.network && attempt.network !== V1_NETWORK) {
    throw new PaymentError(
      "unsupported_network",
      `Network "${attempt.network}" is not accepted; pay on ${settings.network} (Celo).`,
    );
  }
  checkCaller(caller, auth.from);
  if (auth.to !== settings.payTo) {
    throw new PaymentError(
      "wrong_recipient",
      `The authorization pays ${auth.to}; pay the treasury ${settings.payTo} (publicPayTo of GET /api/x402/config).`,
    );
  }
  const token = attempt.token
    ? settings.tokens.find((t) => t.address === attempt.token)
    : await tokenBySignature(attempt, settings);
  if (!token) {
    throw new PaymentError(
      "unsupported_token",
      `Token ${attempt.token} is not accepted; pay in ${settings.tokens.map((t) => `${t.symbol} (${t.address})`).join(" or ")}.`,
    );
  }
  const price = priceInUnits(priceMicroUsd, token.decimals);
  if (auth.value < price) {
    throw new PaymentError(
      "insufficient_amount",
      `The authorization is for ${auth.value} units of ${token.symbol}; this route costs ${price}.`,
    );
  }
  // A purchase of credit may cost more than any call: its own price is then the most it may take.
  const max = priceInUnits(
    priceMicroUsd > settings.maxAmountMicroUsd ? priceMicroUsd : settings.maxAmountMicroUsd,
    token.decimals,
  );
  if (auth.value > max) {
    throw new PaymentError(
      "amount_too_large",
      `The authorization is for ${auth.value} units of ${token.symbol}; this call costs at most ${max}, so it is refused rather than taken.`,
    );
  }
  // The facilitator wants a few seconds of validity left to get the transfer mined.
  if (auth.validBefore < BigInt(nowSeconds + 6)) {
    // The window's other checks are moot once it has passed.
    return {
      token,
      lapsed: new PaymentError(
        "authorization_expired",
        `The authorization expired (validBefore ${auth.validBefore}, now ${nowSeconds}).`,
      ),
    };
  }
  if (auth.validAfter > BigInt(nowSeconds)) {
    throw new PaymentError(
      "authorization_not_yet_valid",
      `The authorization is not valid before ${auth.validAfter} (now ${nowSeconds}).`,
    );
  }
  if (auth.validBefore - BigInt(nowSeconds) > BigInt(settings.maxLifetimeSeconds)) {
    throw new PaymentError(
      "authorization_window_too_long",
      `The authorization stays valid ${auth.validBefore - BigInt(nowSeconds)} s from now; at most ${settings.maxLifetimeSeconds} s is accepted.`,
    );
  }
  return { token };
}

/** Verifies with the facilitator (signature, nonce unused, balance, by simulating the transfer). */
export async function verifyPayment(
  attempt: PaymentAttempt,
  token: TokenInfo,
  deps: VerifyDeps,
): Promise<VerifiedPayment> {
  const auth = attempt.authorization;
  const payment = x402Payment(attempt, token, deps.settings);
  const { payload, requirements } = payment;
  let result: VerifyResponse;
  try {
    result = await deps.facilitator.verify(payload, requirements);
  } catch (error) {
    throw new PaymentError(
      "settlement_unavailable",
      `The payment could not be verified right now (${firstLine(error)}); nothing was charged. Retry shortly.`,
    );
  }
  if (!result.isValid) {
    let code = codeForReason(result.invalidReason);
    if (code === "verification_failed") code = await diagnose(auth, token, deps.chain);
    throw new PaymentError(code, explain(code, token), { reason: result.invalidReason });
  }
  return payment;
}

/**
 * The x402 payload and requirements of an attempt in `token`: what the facilitator verifies and the
 * settlement sends, whichever way the payment was verified.
 */
export function x402Payment(attempt: PaymentAttempt, token: TokenInfo, settings: PaymentSettings): VerifiedPayment {
  const auth = attempt.authorization;
  const requirements = requirementFor(settings, token, auth.value);
  const payload: PaymentPayload = {
    x402Version: 2,
    accepted: requirements,
    payload: { signature: attempt.signature, authorization: wireAuthorization(auth) },
  };
  return { attempt, token, payer: auth.from, amount: auth.value, payload, requirements };
}

/**
 * Why a simulated transfer failed, read from the token (the x402 packages ask Multicall3, which a
 * local chain may not have).
 */
async function diagnose(auth: Authorization, token: TokenInfo, chain: VerifyDeps["chain"]) {
  try {
    const [used, balance] = await Promise.all([
      chain.readContract({
        address: token.address,
        abi: devStablecoinAbi,
        functionName: "authorizationState",
        args: [auth.from, auth.nonce],
      }),
      chain.readContract({
        address: token.address,
        abi: devStablecoinAbi,
        functionName: "balanceOf",
        args: [auth.from],
      }),
    ]);
    if (used) return "nonce_already_used" as const;
    if (balance < auth.value) return "insufficient_balance" as const;
  } catch {
    // fall through: the chain could not tell us more
  }
  return "verification_failed" as const;
}

export function explain(code: string, token: TokenInfo): string {
  switch (code) {
    case "invalid_signature":
      return `The signature is not a valid EIP-3009 TransferWithAuthorization by "from" for ${token.symbol} (domain "${token.name}" version "${token.version}", chain 42220).`;
    case "nonce_already_used":
      return "This authorization's nonce has already been used or cancelled on chain; sign a new one.";
    case "insufficient_balance":
      return `The payer's ${token.symbol} balance is below the authorized amount.`;
    case "wrong_recipient":
      return "The authorization does not pay the treasury (publicPayTo).";
    default:
      return `The payment did not verify (${code}); nothing was charged.`;
  }
}

/** x402 v1 payloads do not name their token: it is the one whose EIP-712 domain the signature is for. */
async function tokenBySignature(attempt: PaymentAttempt, settings: PaymentSettings): Promise<TokenInfo | undefined> {
  for (const token of settings.tokens) {
    if ((await signerOf(attempt, token, settings)) === attempt.authorization.from) return token;
  }
  // A contract wallet cannot be recovered locally: let the facilitator judge it against the first token.
  return settings.tokens[0];
}

/** Recoveries already made, per attempt and token: a request recovers its signature once (it is the costly step). */
const recovered = new WeakMap<PaymentAttempt, Map<Address, Promise<Address | undefined>>>();

/**
 * The EOA that signed the attempt's TransferWithAuthorization over `token`'s domain (lowercase), or
 * undefined when the signature recovers to nothing (not a 65-byte ECDSA signature).
 */
export function signerOf(
  attempt: PaymentAttempt,
  token: TokenInfo,
  settings: Pick<PaymentSettings, "chainId">,
): Promise<Address | undefined> {
  let byToken = recovered.get(attempt);
  if (!byToken) recovered.set(attempt, (byToken = new Map()));
  let signer = byToken.get(token.address);
  if (!signer) {
    signer = authorizationSigner({
      domain: { name: token.name, version: token.version, chainId: settings.chainId, verifyingContract: token.address },
      message: attempt.authorization,
      signature: attempt.signature,
    });
    byToken.set(token.address, signer);
  }
  return signer;
}

export function wireAuthorization(auth: Authorization) {
  return {
    from: auth.from,
    to: auth.to,
    value: auth.value.toString(),
    validAfter: auth.validAfter.toString(),
    validBefore: auth.validBefore.toString(),
    nonce: auth.nonce,
  };
}
