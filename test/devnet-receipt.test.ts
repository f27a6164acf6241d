import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createPublicClient, createWalletClient, http, parseEther } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { anvilDevAccount } from "../devnet/accounts.ts";
import { type Anvil, startAnvil } from "../devnet/anvil.ts";
import { devnetChain } from "../devnet/chain.ts";
import { rpc } from "../devnet/rpc.ts";
import { waitForReceipt } from "../shared/receipt.ts";

// shared/receipt.ts: a receipt waited for on an idle chain arrives, even when the transaction's
// block comes while viem is reading the block before it for a replacement (the block numbers that
// arrive then are dropped, and on an idle chain no other comes: the wait would last its timeout).
describe("waiting for a receipt on an idle devnet", () => {
  let anvil: Anvil;
  // In front of anvil: the block read of viem's replacement check (a block with its transactions) is
  // slow. Not test/support/rpc-proxy.ts: it passes requests one at a time, so holding that read would
  // hold viem's block polling too, and the block that is dropped here would never be polled.
  const proxy = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    const call = JSON.parse(body) as { method: string; params?: unknown[] };
    if (call.method === "eth_getBlockByNumber" && call.params?.[1] === true)
      await new Promise((r) => setTimeout(r, 600));
    const upstream = await fetch(anvil.rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    res.setHeader("content-type", "application/json");
    res.end(await upstream.text());
  });

  beforeAll(async () => {
    anvil = await startAnvil();
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  });
  afterAll(async () => {
    proxy.close();
    await anvil?.stop();
  });

  it("gets the receipt of a transaction mined while the wait checks the block before it, the chain idle after", async () => {
    const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    const account = privateKeyToAccount(anvilDevAccount(1).privateKey);
    const chain = devnetChain(url);
    await rpc(anvil.rpcUrl, "evm_setAutomine", [false]);
    const hash = await createWalletClient({ account, chain, transport: http(url) }).sendTransaction({
      to: account.address,
      value: parseEther("0.001"),
    });
    const waiting = waitForReceipt(createPublicClient({ chain, transport: http(url) }), {
      hash,
      pollingInterval: 50,
      timeout: 5_000,
    });
    // The wait has seen the transaction pending and is reading the head block; the transaction's
    // block comes now, and then no other.
    await new Promise((r) => setTimeout(r, 300));
    await rpc(anvil.rpcUrl, "evm_mine");
    expect((await waiting).status).toBe("success");
  });
});
