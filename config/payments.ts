import { type Hex, zeroAddress } from "viem";
import type { Address } from "./addresses.ts";
import { CELO_CHAIN_ID, CELO_NETWORK, type TokenInfo } from "./celo.ts";
import { type Env, readEnv } from "./env.ts";
import { collectProblems, StartupError } from "./errors.ts";
import { readManifest } from "./manifest.ts";
import type { IndexTarget } from "./target.ts";

export type Settlement =
  /** The service submits transferWithAuthorization itself with a relayer key. */
  | { mode: "self"; relayerKey: Hex }
  /** A remote x402 facilitator verifies and settles (POST /verify, /settle). */
  | { mode: "facilitator"; url: string };

/** How the service is paid: who receives, in which tokens, within which limits, settled how. */
export type PaymentSettings = {
  chainId: typeof CELO_CHAIN_ID;
  network: typeof CELO_NETWORK;
  payTo: Address;
  /** Accepted tokens, USDT first (the spec prices in USDT), each with its EIP-712 domain. */
  tokens: TokenInfo[];
  /** maxTimeoutSeconds offered in 402 answers: clients sign validBefore = now + this. */
  maxTimeoutSeconds: number;
  /** An authorization may stay valid at most this long from now (validBefore - now). */
  maxLifetimeSeconds: number;
  /** Largest amount accepted for one call: an over-signed authorization above it is refused, not taken. */
  maxAmountMicroUsd: bigint;
  /** Largest payment header accepted, in bytes. */
  maxHeaderBytes: number;
  settlement: Settlement;
  /** When payments are settled: before the answer, or deferred within the caps below. */
  timing: SettlementTiming;
  /** Chain reads (nonce state, balances) and, in self mode, settlement transactions. */
  rpcUrl: string;
  /** Prepaid credit: the most one purchase may buy (micro-USD). */
  creditMaxMicroUsd: bigint;
};

export type SettlementTiming =
  | { mode: "before" }
  /** Answer once verified and claimed; a worker settles. Unsettled value is capped per payer and in total (micro-USD). */
  | { mode: "deferred"; maxPerPayerMicroUsd: bigint; maxTotalMicroUsd: bigint };

export const PAYMENT_LIMITS = {
  maxTimeoutSeconds: 300,
  maxLifetimeSeconds: 900,
  maxAmountMicroUsd: 1_000_000n,
  // x402 v2 clients echo the 402's extensions (discovery metadata, sign-in challenge) in their payment:
  // about 6 KB at most here, well under the 16 KB Node's server takes for all headers.
  maxHeaderBytes: 8192,
} as const;

type PaymentTarget = Pick<IndexTarget, "network" | "tokens" | "rpcUrls">;

/** When payments settle (X402_SETTLEMENT) and, deferred, the caps on what may stay unsettled. */
export function settlementTiming(
  env: Pick<Env, "X402_SETTLEMENT" | "X402_DEFERRED_MAX_PER_PAYER" | "X402_DEFERRED_MAX_TOTAL">,
): SettlementTiming {
  return env.X402_SETTLEMENT === "deferred"
    ? {
        mode: "deferred",
        maxPerPayerMicroUsd: env.X402_DEFERRED_MAX_PER_PAYER,
        maxTotalMicroUsd: env.X402_DEFERRED_MAX_TOTAL,
      }
    : { mode: "before" };
}

/** How the service is paid, or a StartupError listing every problem (the treasury and the settlement both). */
export function resolvePaymentSettings(target: PaymentTarget, env: Env = readEnv()): PaymentSettings {
  const problems: string[] = [];
  const payTo = collectProblems(problems, () => resolvePayTo(target, env));
  const settlement = collectProblems(problems, () => resolveSettlement(target, env));
  if (!payTo || !settlement) throw new StartupError(problems);
  const tokens = [...target.tokens].sort((a, b) => (a.symbol === "USDT" ? -1 : b.symbol === "USDT" ? 1 : 0));
  const timing = settlementTiming(env);
  return {
    chainId: CELO_CHAIN_ID,
    network: CELO_NETWORK,
    payTo,
    tokens,
    ...PAYMENT_LIMITS,
    settlement,
    timing,
    rpcUrl: target.rpcUrls[0]!,
    creditMaxMicroUsd: env.CREDIT_MAX_USD,
  };
}

const devnetService = (target: Pick<IndexTarget, "network">, env: Env) =>
  target.network === "devnet" ? readManifest(env.DEVNET_MANIFEST).service : undefined;

/** The treasury payments are made out to: X402_PAY_TO, on the devnet by default its treasury account. */
export function resolvePayTo(target: Pick<IndexTarget, "network">, env: Env): Address {
  const payTo = env.X402_PAY_TO ?? devnetService(target, env)?.treasury.address;
  if (!payTo) throw new StartupError("Set X402_PAY_TO to the treasury address payments are made out to.");
  if (payTo === zeroAddress)
    throw new StartupError(
      "X402_PAY_TO is the zero address: payments made out to it would be burnt. Set the treasury's address.",
    );
  return payTo;
}

/** Who settles: a remote facilitator (X402_FACILITATOR_URL), or the service with its relayer key (on the devnet by default its relayer account). */
export function resolveSettlement(target: Pick<IndexTarget, "network">, env: Env): Settlement {
  if (env.X402_FACILITATOR_URL) return { mode: "facilitator", url: env.X402_FACILITATOR_URL };
  const relayerKey = (env.X402_RELAYER_PRIVATE_KEY ?? devnetService(target, env)?.relayer.privateKey) as
    | Hex
    | undefined;
  if (!relayerKey)
    throw new StartupError(
      "Payments cannot be settled: set X402_RELAYER_PRIVATE_KEY (a key with CELO for gas) or X402_FACILITATOR_URL.",
    );
  return { mode: "self", relayerKey };
}
