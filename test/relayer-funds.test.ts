import { createWalletClient, http, publicActions } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RelayerClient, relayerSettler } from "../api/payments/relayer.ts";
import { celoChain } from "../config/celo.ts";
import { type Anvil, startAnvil } from "../devnet/anvil.ts";

// Whose failure a settlement refused before sending is. Either way the call is answered 402
// settlement_failed with the node's reason; but a relayer without gas money is the service's (a
// deferred row goes back to the queue uncounted), and a transfer the node says would revert is the
// payer's (a deferred row's attempt: after MAX_SETTLE_ATTEMPTS, a debt).

const TOKEN = "0x00000000000000000000000000000000000000a1";
/** PUSH1 0 PUSH1 0 REVERT: every call reverts, as a transfer the payer's balance cannot pay does. */
const REVERTS = "0x60006000fd";

let anvil: Anvil;
beforeAll(async () => {
  anvil = await startAnvil();
  await rpc("anvil_setCode", [TOKEN, REVERTS]);
});
afterAll(() => anvil?.stop());

async function rpc(method: string, params: unknown[]) {
  const res = await fetch(anvil.rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  return ((await res.json()) as { result: unknown }).result;
}

/** One authorization submitted by a relayer with `balance` wei (its signature is never checked: the call reverts or is not sent). */
async function submitWith(balance: bigint) {
  const account = privateKeyToAccount(generatePrivateKey());
  await rpc("anvil_setBalance", [account.address, `0x${balance.toString(16)}`]);
  const client = createWalletClient({ account, chain: celoChain(anvil.rpcUrl), transport: http(anvil.rpcUrl) });
  const settler = relayerSettler(client.extend(publicActions) as unknown as RelayerClient, account);
  const authorization = {
    from: account.address,
    to: account.address,
    value: "10000",
    validAfter: "0",
    validBefore: "99999999999",
    nonce: `0x${"11".repeat(32)}`,
  };
  const payload = { x402Version: 2, payload: { authorization, signature: `0x${"22".repeat(64)}1b` } };
  return settler.submit(payload as never, { asset: TOKEN } as never, async () => {});
}

describe("a settlement refused before it is sent", () => {
  it("is the service's when the relayer cannot pay for gas, and the payer's when the transfer would revert", async () => {
    expect(await submitWith(0n)).toMatchObject({ sent: false, unavailable: false, ours: "unfunded" });
    const theirs = await submitWith(10n ** 18n);
    expect(theirs).toMatchObject({ sent: false, unavailable: false });
    expect(theirs).not.toHaveProperty("ours");
  });
});
