import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { type Hex, keccak256, toHex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { type RelayerClient, relayerSettler } from "../api/payments/relayer.ts";
import { CELO_TOKENS } from "../config/celo.ts";

/**
 * A node answering from a script (the relayer's side of JSON-RPC): a fee refusal cannot be
 * produced on demand by a real chain within the relayer's fee reuse window.
 */
function scriptedNode() {
  const node = {
    feeEstimates: 0,
    receiptPolls: 0,
    sent: [] as Hex[],
    refuseNextForFee: false,
    client: undefined as unknown as RelayerClient,
  };
  node.client = {
    chain: undefined,
    estimateFeesPerGas: async () => {
      node.feeEstimates++;
      return { maxFeePerGas: 2_000_000_000n + BigInt(node.feeEstimates), maxPriorityFeePerGas: 1_000_000n };
    },
    prepareTransactionRequest: async (args: Record<string, unknown>) => ({ ...args, account: undefined, gas: 200_000n, chainId: 42220, type: "eip1559" }),
    getTransactionCount: async () => 0,
    sendRawTransaction: async ({ serializedTransaction }: { serializedTransaction: Hex }) => {
      if (node.refuseNextForFee) {
        node.refuseNextForFee = false;
        throw new Error("max fee per gas less than block base fee: address 0x…, maxFeePerGas: 2000000001, baseFee: 3000000000");
      }
      node.sent.push(serializedTransaction);
      return keccak256(serializedTransaction);
    },
    getTransactionReceipt: async ({ hash }: { hash: Hex }) => {
      node.receiptPolls++;
      return { status: "success", transactionHash: hash, logs: [] };
    },
  } as unknown as RelayerClient;
  return node;
}

const token = CELO_TOKENS.USDT;
const requirements = { scheme: "exact", network: "eip155:42220", asset: token.address, amount: "10000", payTo: "0x00000000000000000000000000000000000000aa", maxTimeoutSeconds: 60, extra: {} } as PaymentRequirements;
const payload = (i: number): PaymentPayload =>
  ({
    x402Version: 2,
    accepted: requirements,
    payload: {
      signature: `0x${"11".repeat(64)}1b`,
      authorization: { from: "0x00000000000000000000000000000000000000b1", to: requirements.payTo, value: "10000", validAfter: "0", validBefore: "9999999999", nonce: keccak256(toHex(i)) },
    },
  }) as PaymentPayload;

describe("relayer (api/payments/relayer.ts)", () => {
  it("sends the payments submitted together in one transaction, and polls its receipt once for all of them", async () => {
    const node = scriptedNode();
    const settler = relayerSettler(node.client, privateKeyToAccount(generatePrivateKey()));
    const results = await Promise.all([0, 1, 2].map((i) => settler.submit(payload(i), requirements, async () => undefined)));
    expect(results.map((r) => r.sent)).toEqual([true, true, true]);
    expect(node.sent).toHaveLength(1);
    const hashes = new Set(results.map((r) => (r.sent ? r.signed.transaction : null)));
    expect(hashes.size).toBe(1);
    const hash = [...hashes][0] as Hex;
    await Promise.all([0, 1, 2].map(() => settler.receipt(hash, 1_000)));
    expect(node.receiptPolls).toBe(1);
  });

  it("counts a send refused for its fee as its own failure to retry (never the payer's), and asks the node for fees again", async () => {
    const node = scriptedNode();
    const settler = relayerSettler(node.client, privateKeyToAccount(generatePrivateKey()));
    await settler.submit(payload(10), requirements, async () => undefined);
    expect(node.feeEstimates).toBe(1);
    // Within the reuse window the estimate is not asked again...
    node.refuseNextForFee = true;
    const refused = await settler.submit(payload(11), requirements, async () => undefined);
    expect(node.feeEstimates).toBe(1);
    expect(refused).toMatchObject({ sent: false, unavailable: true });
    // ...but after a refusal for its fee it is.
    const retried = await settler.submit(payload(11), requirements, async () => undefined);
    expect(retried.sent).toBe(true);
    expect(node.feeEstimates).toBe(2);
  });
});
