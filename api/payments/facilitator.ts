import { HTTPFacilitatorClient, type FacilitatorClient } from "@x402/core/http";
import { x402Facilitator } from "@x402/core/facilitator";
import { toFacilitatorEvmSigner } from "@x402/evm";
import { ExactEvmScheme } from "@x402/evm/exact/facilitator";
import { createWalletClient, http, nonceManager, publicActions } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { celoChain } from "../../config/celo.ts";
import type { PaymentSettings, Settlement } from "../../config/payments.ts";
import type { PaymentErrorCode } from "./errors.ts";

export type Facilitator = FacilitatorClient & { mode: Settlement["mode"]; relayer?: `0x${string}` };

/**
 * Verification and settlement, done by the x402 packages: either our own x402Facilitator with the
 * `exact` EVM scheme and a relayer key (self-settlement), or a remote facilitator over HTTP.
 */
export function createFacilitator(settings: Pick<PaymentSettings, "network" | "settlement" | "rpcUrl">): Facilitator {
  const { settlement } = settings;
  if (settlement.mode === "facilitator") {
    const remote = new HTTPFacilitatorClient({ url: settlement.url, timeoutMs: 30_000 });
    return Object.assign(remote, { mode: "facilitator" as const });
  }
  // The nonce manager hands out relayer nonces locally, so concurrent settlements do not collide.
  const account = privateKeyToAccount(settlement.relayerKey, { nonceManager });
  const client = createWalletClient({ account, chain: celoChain(settings.rpcUrl), transport: http(settings.rpcUrl, { retryCount: 0, timeout: 20_000 }), pollingInterval: 100 }).extend(
    publicActions,
  );
  // viem's client is the signer the x402 packages expect; its typed-data overloads are only wider.
  const signer = toFacilitatorEvmSigner({ ...client, address: account.address } as unknown as Parameters<typeof toFacilitatorEvmSigner>[0], {
    confirmationTimeoutMs: 60_000,
  });
  const local = new x402Facilitator().register(settings.network, new ExactEvmScheme(signer));
  return {
    mode: "self",
    relayer: account.address.toLowerCase() as `0x${string}`,
    verify: (payload, requirements) => local.verify(payload, requirements),
    settle: (payload, requirements) => local.settle(payload, requirements),
    getSupported: async () => local.getSupported() as Awaited<ReturnType<FacilitatorClient["getSupported"]>>,
  };
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
