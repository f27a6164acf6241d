import { x402Facilitator } from "@x402/core/facilitator";
import { type FacilitatorClient, HTTPFacilitatorClient } from "@x402/core/http";
import type { PaymentPayload, PaymentRequirements, VerifyResponse } from "@x402/core/types";
import { toFacilitatorEvmSigner } from "@x402/evm";
import { ExactEvmScheme } from "@x402/evm/exact/facilitator";
import {
  createPublicClient,
  createWalletClient,
  getAddress,
  type Hex,
  http,
  isErc6492Signature,
  type PublicClient,
  publicActions,
  withTimeout,
} from "viem";
import { celoChain } from "../../config/celo.ts";
import type { PaymentSettings, Settlement } from "../../config/payments.ts";
import { firstLine } from "../../shared/async.ts";
import type { PaymentErrorCode } from "./errors.ts";
import { isTransportError, type RelayerClient, relayerSettler, type Settler, transferCalldata } from "./relayer.ts";
import { authorizationSigner, nativeAccount, type SignedAuthorization } from "./secp256k1.ts";

export type Facilitator = FacilitatorClient & { mode: Settlement["mode"]; relayer?: `0x${string}`; settler?: Settler };

/** How long the verification's chain probe may take before the RPC counts as down. */
const PROBE_TIMEOUT_MS = 3_000;
/**
 * Each RPC call of a verification (the x402 package's getCode, reads and simulated transfer) gives
 * up after this long (the package makes several in turn).
 */
const VERIFY_RPC_TIMEOUT_MS = 4_000;
/**
 * A whole verification (self mode) gives up after this long: while the chain does not answer, a
 * valid payment gets 503 settlement_unavailable within 5 s, nothing claimed and nothing charged,
 * however many RPC calls the verification would have made in turn.
 */
const VERIFY_TIMEOUT_MS = 5_000;
/**
 * Each RPC call of the relayer (fees and gas, nonce, broadcast, receipt) gives up after this long.
 * A broadcast without an answer is not a failure: the chain decides (see SubmitResult.uncertain).
 */
const RELAYER_RPC_TIMEOUT_MS = 10_000;

/**
 * Verification by the x402 packages (our own x402Facilitator with the `exact` EVM scheme, or a
 * remote facilitator over HTTP). Self-settlement is ours (see Settler): the x402 package's settle()
 * sends and waits in one step and turns a receipt timeout into a failure, which a payment whose
 * transaction is mined later cannot afford.
 */
export function createFacilitator(
  settings: Pick<PaymentSettings, "network" | "settlement" | "rpcUrl" | "tokens">,
): Facilitator {
  const { settlement } = settings;
  const probeClient = createPublicClient({
    chain: celoChain(settings.rpcUrl),
    transport: http(settings.rpcUrl, { retryCount: 0, timeout: PROBE_TIMEOUT_MS }),
  });
  if (settlement.mode === "facilitator") {
    const remote = new HTTPFacilitatorClient({ url: settlement.url, timeoutMs: 30_000 });
    const verify = remote.verify.bind(remote);
    return Object.assign(remote, {
      mode: "facilitator" as const,
      verify: (p: PaymentPayload, r: PaymentRequirements) => checkedVerify(verify(p, r), p, r, probeClient),
    });
  }
  const account = nativeAccount(settlement.relayerKey);
  const walletClient = (timeout: number) =>
    createWalletClient({
      account,
      chain: celoChain(settings.rpcUrl),
      transport: http(settings.rpcUrl, { retryCount: 0, timeout }),
      pollingInterval: 100,
    }).extend(publicActions);
  const client = walletClient(RELAYER_RPC_TIMEOUT_MS);
  // viem's client is the signer the x402 packages expect; its typed-data overloads are only wider.
  // It verifies with short RPC timeouts (a frozen chain answers 503 quickly).
  const verifier = walletClient(VERIFY_RPC_TIMEOUT_MS);
  // The accepted tokens are contracts by configuration: the package's check that the asset has code
  // runs in the background and, when an earlier RPC step fails first, is left unawaited: its
  // rejection would end the process (Ponder exits on an unhandled rejection). Only payers' code is asked.
  const tokens = new Set(settings.tokens.map((t) => t.address.toLowerCase()));
  const getCode: typeof verifier.getCode = (args) =>
    tokens.has(args.address.toLowerCase()) ? Promise.resolve("0x01") : verifier.getCode(args);
  const signer = toFacilitatorEvmSigner(
    { ...verifier, getCode, address: account.address } as unknown as Parameters<typeof toFacilitatorEvmSigner>[0],
    {
      confirmationTimeoutMs: 60_000,
    },
  );
  const local = new x402Facilitator().register(settings.network, new ExactEvmScheme(signer));
  const settler = relayerSettler(client as unknown as RelayerClient, account);
  return {
    mode: "self",
    relayer: settler.relayer,
    settler,
    // A chain that does not answer in time: 503, never a refusal.
    verify: (payload, requirements) =>
      withTimeout(
        async () => {
          const eoa = await verifyEoa(verifier, account.address, payload, requirements);
          return checkedVerify(
            eoa ? Promise.resolve(eoa) : local.verify(payload, requirements),
            payload,
            requirements,
            probeClient,
          );
        },
        {
          timeout: VERIFY_TIMEOUT_MS,
          errorInstance: new Error(`the chain RPC did not answer within ${VERIFY_TIMEOUT_MS / 1000} s`),
        },
      ),
    // Kept for callers that want the x402 package's one-step settle (a remote facilitator served from this one).
    settle: (payload, requirements) => local.settle(payload, requirements),
    getSupported: async () => local.getSupported() as Awaited<ReturnType<FacilitatorClient["getSupported"]>>,
  };
}

/**
 * The x402 exact scheme's verification, for the usual case of an EOA's signature, in one chain
 * call instead of three: the package's checks that need no chain, the signature recovered
 * natively (the package recovers it in pure JS, ~2 ms, after asking the payer's code twice), then
 * the transfer simulated from the relayer, which is what judges nonce, balance and a payer that
 * turned out to have code. Null when the signature is not this payer's EOA signature (a contract
 * wallet's: EIP-1271 / EIP-6492): the package verifies those. A chain that does not answer throws.
 */
async function verifyEoa(
  chain: Pick<PublicClient, "call">,
  relayer: Hex,
  payload: PaymentPayload,
  requirements: PaymentRequirements,
): Promise<VerifyResponse | null> {
  const { signature } = payload.payload as { signature: Hex };
  const payer = (payload.payload as { authorization: Record<string, string> }).authorization.from!;
  const extra = requirements.extra as { name?: string; version?: string } | undefined;
  if (
    payload.accepted.scheme !== "exact" ||
    requirements.scheme !== "exact" ||
    payload.accepted.network !== requirements.network ||
    !extra?.name ||
    !extra.version
  )
    return null;
  if (isErc6492Signature(signature) || signature.length !== 132) return null;
  const signed = signedAuthorization(payload, requirements);
  const { message, domain } = signed;
  if ((await authorizationSigner(signed)) !== payer.toLowerCase()) return null;
  const refuse = (invalidReason: string): VerifyResponse => ({ isValid: false, invalidReason, payer });
  if (message.to !== getAddress(requirements.payTo)) return refuse("invalid_exact_evm_recipient_mismatch");
  const now = BigInt(Math.floor(Date.now() / 1000));
  if (message.validBefore < now + 6n) return refuse("invalid_exact_evm_payload_authorization_valid_before");
  if (message.validAfter > now) return refuse("invalid_exact_evm_payload_authorization_valid_after");
  if (message.value !== BigInt(requirements.amount)) return refuse("invalid_exact_evm_authorization_value");
  try {
    await chain.call({ account: relayer, to: domain.verifyingContract, data: transferCalldata(payload) });
  } catch (error) {
    if (isTransportError(error)) throw new Error(`the chain RPC did not answer (${firstLine(error)})`);
    // Reverted: why (nonce, balance, window on the chain's clock) is read by the caller.
    return refuse("invalid_exact_evm_transaction_simulation_failed");
  }
  return { isValid: true, invalidReason: undefined, payer };
}

/** An x402 exact payload's authorization, typed, over the domain of the requirements' token. */
function signedAuthorization(payload: PaymentPayload, requirements: PaymentRequirements): SignedAuthorization {
  const { authorization: a, signature } = payload.payload as { authorization: Record<string, string>; signature: Hex };
  const extra = requirements.extra as { name?: string; version?: string } | undefined;
  return {
    domain: {
      name: extra?.name,
      version: extra?.version,
      chainId: Number(requirements.network.split(":")[1]),
      verifyingContract: getAddress(requirements.asset),
    },
    message: {
      from: getAddress(a.from!),
      to: getAddress(a.to!),
      value: BigInt(a.value!),
      validAfter: BigInt(a.validAfter!),
      validBefore: BigInt(a.validBefore!),
      nonce: a.nonce as Hex,
    },
    signature,
  };
}

/** Refusals that a failed chain read can cause (the x402 package fails closed when getCode or a simulation errors). */
const CHAIN_DEPENDENT = new Set([
  "invalid_exact_evm_signature",
  "invalid_exact_evm_transaction_simulation_failed",
  "invalid_exact_evm_eip3009_not_supported",
]);

/**
 * The facilitator's verdict, checked against the chain: a refusal caused by an RPC that did not
 * answer becomes a thrown error (503 settlement_unavailable), never invalid_signature; a failed
 * simulation is explained by the chain's clock when the authorization's window is not open there.
 */
async function checkedVerify(
  verdict: Promise<VerifyResponse>,
  payload: PaymentPayload,
  requirements: PaymentRequirements,
  chain: PublicClient,
): Promise<VerifyResponse> {
  const result = await verdict;
  if (result.isValid || !CHAIN_DEPENDENT.has(result.invalidReason ?? "")) return result;
  let block: { timestamp: bigint };
  try {
    block = await chain.getBlock({ blockTag: "latest" });
  } catch (error) {
    throw new Error(`the chain RPC did not answer (${firstLine(error)})`);
  }
  const a = (payload.payload as { authorization: Record<string, string> }).authorization;
  if (result.invalidReason === "invalid_exact_evm_signature") {
    // An EOA signature is checked locally: if it is good, the refusal came from a failed chain read.
    const signer = await authorizationSigner(signedAuthorization(payload, requirements));
    if (signer && signer === a.from!.toLowerCase())
      throw new Error("the signature is valid but the chain could not confirm it (RPC error)");
    return result;
  }
  if (BigInt(a.validAfter!) >= block.timestamp)
    return { ...result, invalidReason: "invalid_exact_evm_payload_authorization_valid_after" };
  if (BigInt(a.validBefore!) <= block.timestamp)
    return { ...result, invalidReason: "invalid_exact_evm_payload_authorization_valid_before" };
  return result;
}

/** Our stable error codes for the x402 packages' verification reasons. */
export function codeForReason(reason: string | undefined): PaymentErrorCode {
  switch (reason) {
    case "invalid_exact_evm_signature":
    case "invalid_exact_evm_failed_to_parse_signature":
      return "invalid_signature";
    case "invalid_exact_evm_recipient_mismatch":
      return "wrong_recipient";
    case "invalid_exact_evm_payload_authorization_valid_before":
      return "authorization_expired";
    case "invalid_exact_evm_payload_authorization_valid_after":
      return "authorization_not_yet_valid";
    case "invalid_exact_evm_payload_authorization_value_mismatch":
      return "insufficient_amount";
    case "invalid_exact_evm_nonce_already_used":
      return "nonce_already_used";
    case "invalid_exact_evm_insufficient_balance":
      return "insufficient_balance";
    case "invalid_network":
    case "invalid_exact_evm_network_mismatch":
      return "unsupported_network";
    default:
      return "verification_failed";
  }
}
