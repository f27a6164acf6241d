import { createPublicClient, type Hex, http, parseEventLogs } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { mount } from "../../api/http/mount.ts";
import { x402Billing } from "../../api/payments/billing.ts";
import type { PaymentCore } from "../../api/payments/core.ts";
import { createFacilitator } from "../../api/payments/facilitator.ts";
import { createPayments } from "../../api/payments/payments.ts";
import { usedIn } from "../../api/payments/relayer.ts";
import { SettlementWorker } from "../../api/payments/settlement-worker.ts";
import { screenRoute } from "../../api/screen/route.ts";
import { payment } from "../../api/store/schema.ts";
import { openServiceStore, type ServiceStore } from "../../api/store/store.ts";
import type { PaymentSettings } from "../../config/payments.ts";
import { anvilDevAccount } from "../../devnet/accounts.ts";
import { rpc } from "../../devnet/rpc.ts";
import { startTestDevnet, type TestDevnet } from "../support/devnet.ts";
import { type DatabaseSlot, databaseSlot, testDatabase, waitFor } from "../support/indexer.ts";
import { paidApp } from "../support/paid-app.ts";
import { devnetPaymentSettings, signAuthorization, specHeader, tokenBalance } from "../support/payments.ts";

const PAYMENTS = 30;
const PRICE = 10_000n;

// Two replicas in deferred mode share one settlement queue in one Postgres service store: each has
// its own relayer key (anvil #6 and #7) and its own worker, and the workers race for the same rows.
// Every answered payment must be settled exactly once (the chain's Transfer events to the treasury
// say so), whichever replica took it. Postgres only: PGlite is one process's database.
describe.runIf(testDatabase === "postgres")("deferred settlement across two replicas", () => {
  let devnet: TestDevnet;
  let slot: DatabaseSlot;
  const stores: ServiceStore[] = [];
  const workers: SettlementWorker[] = [];
  const apps: ReturnType<typeof paidApp>[] = [];
  let settings: PaymentSettings;

  beforeAll(async () => {
    devnet = await startTestDevnet({ wallets: 2, months: 2, slotHours: 24 * 7 });
    slot = databaseSlot("postgres");
    await slot.prepare();
    settings = {
      ...devnetPaymentSettings(devnet.manifestPath),
      timing: { mode: "deferred", maxPerPayerMicroUsd: 10_000_000n, maxTotalMicroUsd: 10_000_000n },
    };
    for (const relayer of [6, 7]) {
      // Each replica opens the store itself, as a process would.
      const store = await openServiceStore(slot.store);
      stores.push(store);
      const replicaSettings: PaymentSettings = {
        ...settings,
        settlement: { mode: "self", relayerKey: anvilDevAccount(relayer).privateKey },
      };
      let worker: SettlementWorker | undefined;
      const core: PaymentCore = createPayments(replicaSettings, store.db, createFacilitator(replicaSettings), {
        onQueued: () => worker?.kick(),
      });
      worker = new SettlementWorker(core).start(100);
      workers.push(worker);
      apps.push(
        paidApp(core, (app) =>
          mount(
            app,
            screenRoute,
            async (c) =>
              c.json({
                wallet: c.req.valid("json").walletAddress,
                x402Billing: x402Billing(await c.var.billing),
              }) as never,
          ),
        ),
      );
    }
  }, 240_000);

  afterAll(async () => {
    for (const worker of workers) await worker.stop();
    for (const store of stores) await store.close();
    await rpc(devnet.manifest.rpcUrl, "evm_setAutomine", [true]).catch(() => undefined);
    await slot?.drop();
    await devnet?.stop();
  });

  it("settles every row exactly once, whichever replica answered and whichever worker took it", async () => {
    const { rpcUrl, tokens, service, lenders } = devnet.manifest;
    const treasury = service.treasury.address;
    const before = await tokenBalance(rpcUrl, tokens.USDT.address, treasury);
    const fromBlock = BigInt(await rpc<string>(rpcUrl, "eth_blockNumber")) + 1n;
    await rpc(rpcUrl, "evm_setAutomine", [false]);
    // Answers come with the chain paused: the rows wait in the queue, both workers after them.
    const answers = await Promise.all(
      Array.from({ length: PAYMENTS }, async (_, i) => {
        const lender = lenders[i % lenders.length]!;
        const header = specHeader(
          await signAuthorization(lender.privateKey as Hex, tokens.USDT, { to: treasury }),
          tokens.USDT.address,
        );
        const res = await apps[i % 2]!.request("/api/lender/screen", {
          method: "POST",
          headers: { "content-type": "application/json", "x-payment": header },
          body: JSON.stringify({
            walletAddress: `0x${(i + 1).toString(16).padStart(40, "0")}`,
            callerAddress: lender.address,
          }),
        });
        return res.status;
      }),
    );
    expect(answers).toEqual(Array(PAYMENTS).fill(200));

    await waitFor(
      "every deferred row settled",
      async () => {
        await rpc(rpcUrl, "evm_mine");
        const rows = await stores[0]!.db.select({ status: payment.status }).from(payment);
        return rows.length === PAYMENTS && rows.every((r) => r.status === "settled") ? true : undefined;
      },
      undefined,
      90_000,
    );
    await rpc(rpcUrl, "evm_setAutomine", [true]);

    expect(await tokenBalance(rpcUrl, tokens.USDT.address, treasury)).toBe(before + BigInt(PAYMENTS) * PRICE);
    // The chain's own record: one AuthorizationUsed per payment, in transactions sent by both relayers.
    const client = createPublicClient({ transport: http(rpcUrl) });
    const logs = await client.getLogs({ address: tokens.USDT.address, fromBlock, toBlock: "latest" });
    const used = parseEventLogs({ abi: devStablecoinAbi, logs, eventName: "AuthorizationUsed" });
    expect(used).toHaveLength(PAYMENTS);
    const rows = await stores[0]!.db.select().from(payment);
    expect(new Set(used.map((e) => e.args.nonce.toLowerCase()))).toEqual(new Set(rows.map((r) => r.nonce)));
    const senders = new Set(
      await Promise.all(
        [...new Set(used.map((e) => e.transactionHash))].map(async (hash) =>
          (await client.getTransaction({ hash })).from.toLowerCase(),
        ),
      ),
    );
    expect([...senders].every((s) => s === anvilDevAccount(6).address || s === anvilDevAccount(7).address)).toBe(true);
    // Each row was taken by one worker: the transaction it records is the one that used its
    // authorization (a row taken twice would record a transaction whose transfer failed for it).
    for (const row of rows) {
      const receipt = await client.getTransactionReceipt({ hash: row.transaction as Hex });
      expect(usedIn(receipt, row.token, row.payer, row.nonce), row.nonce).toBe(true);
      expect(row.failure).toBeNull();
    }
    // Rows were taken together: fewer transactions than payments.
    expect(new Set(rows.map((r) => r.transaction)).size).toBeLessThan(PAYMENTS);
  });
});
