import { execFile } from "node:child_process";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import type { Hex } from "viem";
import { createPublicClient, decodeFunctionData, http } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { multicall3Abi } from "../../abis/Multicall3.ts";
import { MULTICALL3 } from "../../config/celo.ts";
import { rpc as devnetRpc } from "../../devnet/rpc.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { crashIndexer, type Indexer, startIndexer, testDatabase, waitFor, waitForBlock } from "../support/indexer.ts";
import { signAuthorization, specHeader, tokenBalance } from "../support/payments.ts";

type Outcome = { status: number; body: string } | { error: string };

const run = promisify(execFile);

// The service as it runs (Ponder serving the API, its own signal handlers), stopped with SIGTERM
// in the middle of a run of paid screens, then started again on the same database.
describe(`graceful shutdown under Ponder (${testDatabase})`, () => {
  let env: IndexedDevnet;
  let devnet: TestDevnet;
  let restarted: Indexer | undefined;
  let lender: { address: Hex; privateKey: Hex };
  let treasury: Hex;

  const rpc = (method: string, params: unknown[] = []) => devnetRpc(devnet.manifest.rpcUrl, method, params);
  const treasuryUsdt = () => tokenBalance(devnet.manifest.rpcUrl, devnet.manifest.tokens.USDT.address, treasury);
  const screen = (url: string, header: string): Promise<Outcome> =>
    fetch(`${url}/api/lender/screen`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-payment": header },
      body: JSON.stringify({
        walletAddress: devnet.manifest.personas.salaried!.address,
        callerAddress: lender.address,
      }),
    }).then(
      async (res) => ({ status: res.status, body: await res.text() }),
      (error: Error) => ({ error: String((error.cause as Error)?.message ?? error.message) }),
    );

  beforeAll(async () => {
    // Two months of weekly blocks: the screens need a salaried persona with a history, not a long one.
    env = await indexedDevnet({ wallets: 10, months: 2, seed: 21, slotHours: 24 * 7 });
    devnet = env.devnet;
    treasury = devnet.manifest.service.treasury.address;
    lender = devnet.manifest.lenders[0] as unknown as typeof lender;
    await waitForBlock(await env.index(), devnet.manifest.headBlock);
  }, 240_000);

  afterAll(async () => {
    await rpc("evm_setAutomine", [true]).catch(() => undefined);
    await restarted?.stop();
    await env?.stop();
  });

  /** Authorizations in the mempool's pending transactions: the relayer batches them (Multicall3 aggregate3) or sends one alone. */
  const settlementsInMempool = async () => {
    const { pending } = (await rpc("txpool_content")) as {
      pending: Record<string, Record<string, { to: string; input: Hex }>>;
    };
    return Object.values(pending)
      .flatMap((byNonce) => Object.values(byNonce))
      .reduce(
        (n, tx) =>
          n +
          (tx.to.toLowerCase() === MULTICALL3
            ? decodeFunctionData({ abi: multicall3Abi, data: tx.input }).args[0].length
            : 1),
        0,
      );
  };

  it("finishes the paid requests in flight, settlement included, before exiting: every authorization used on chain got its data, and the treasury gained the price of each answer", async () => {
    const indexer = await env.index();
    const USDT = devnet.manifest.tokens.USDT;
    const before = await treasuryUsdt();
    const signed = await Promise.all(
      Array.from({ length: 30 }, () => signAuthorization(lender.privateKey, USDT, { to: treasury })),
    );
    const headers = signed.map((s) => specHeader(s, USDT.address));

    // Settlement transactions stay in the mempool until we mine: SIGTERM lands while at least ten
    // requests are waiting for their receipt, the others still verifying or waiting for the relayer.
    await rpc("evm_setAutomine", [false]);
    const exited = new Promise<number | null>((resolve) => indexer.child.once("exit", (code) => resolve(code)));
    const calls = headers.map((header) => screen(indexer.url, header));
    await waitFor(
      "ten settlements in the mempool",
      async () => ((await settlementsInMempool()) >= 10 ? true : undefined),
      indexer,
      60_000,
    );
    const signalledAt = Date.now();
    process.kill(-indexer.child.pid!, "SIGTERM");
    await new Promise((r) => setTimeout(r, 1_000));
    // The relayer's transactions are mined now, while the service is draining.
    await rpc("evm_setAutomine", [true]);
    await rpc("evm_mine");
    const first = await Promise.all(calls);
    expect(await exited).toBe(0);
    const shutdownMs = Date.now() - signalledAt;
    expect(indexer.output()).toMatch(/not accepting new connections/);
    expect(shutdownMs).toBeLessThan(20_000);

    // No request the service read was cut: every one got an answer, data or a refusal that charged
    // nothing. A connection the listener had not accepted yet when it closed (still connecting, or
    // waiting in the kernel's backlog while the process was busy) is refused or reset: that request
    // never reached the service, and the money checks below hold for it too (no charge without data).
    expect(
      first.filter((o) => "error" in o && !/ECONNREFUSED|ECONNRESET/.test(o.error)),
      indexer.output().slice(-3000),
    ).toEqual([]);
    const answered = first.map((o) => "status" in o && o.status === 200);
    for (const [i, outcome] of first.entries()) {
      if (answered[i] || "error" in outcome) continue;
      expect(outcome).toMatchObject({ status: 503 });
      expect(JSON.parse((outcome as { body: string }).body).code).toMatch(/^settlement_(unavailable|pending)$/);
    }
    expect(answered.filter(Boolean).length).toBeGreaterThanOrEqual(10);

    const chain = createPublicClient({ transport: http(devnet.manifest.rpcUrl) });
    const usedOnChain = () =>
      Promise.all(
        signed.map((s) =>
          chain.readContract({
            address: USDT.address,
            abi: devStablecoinAbi,
            functionName: "authorizationState",
            args: [s.authorization.from, s.authorization.nonce],
          }),
        ),
      );
    const used = await usedOnChain();
    // Every authorization used on chain was answered with data before the exit; none with data is unused.
    expect(used.map((u, i) => u && !answered[i]).filter(Boolean)).toEqual([]);
    expect(answered.map((a, i) => a && !used[i]).filter(Boolean)).toEqual([]);
    expect((await treasuryUsdt()) - before).toBe(10_000n * BigInt(answered.filter(Boolean).length));

    // Started again on the same database: every refused payment, retried as it was, gets its data, charged once.
    restarted = await startIndexer({ DEVNET_MANIFEST: devnet.manifestPath, ...env.slot.env });
    await waitForBlock(restarted, devnet.manifest.headBlock);
    for (const [i, header] of headers.entries()) {
      const retry = await screen(restarted.url, header);
      expect(retry).toMatchObject({ status: 200 });
      if (answered[i]) expect((retry as { body: string }).body).toBe((first[i] as { body: string }).body); // the stored answer
    }
    expect((await usedOnChain()).every(Boolean)).toBe(true);
    expect((await treasuryUsdt()) - before).toBe(10_000n * 30n);
  });
  // The webhook worker runs in every process: killed while a delivery waits on the receiver, the
  // message is sent again by the next process once its lease passes, with the same webhook-id.
  it.runIf(testDatabase === "postgres")(
    "a kill -9 in the middle of a webhook delivery loses nothing, and the receiver, deduping by webhook-id, gets it once",
    async () => {
      const wallet = devnet.manifest.personas.salaried!.address;
      const USDT = devnet.manifest.tokens.USDT;
      const arrivals: string[] = [];
      const held: ServerResponse[] = [];
      let hold = true;
      const receiver = createServer((req, res) => {
        req.resume();
        req.on("end", () => {
          arrivals.push(req.headers["webhook-id"] as string);
          if (hold) held.push(res);
          else res.writeHead(204).end();
        });
      });
      await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
      try {
        const running = restarted ?? (await env.index());
        const created = await fetch(`${running.url}/api/monitors`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "x-payment": specHeader(await signAuthorization(lender.privateKey, USDT, { to: treasury }), USDT.address),
          },
          body: JSON.stringify({
            wallets: [wallet],
            events: ["sanctions.listed"],
            webhook: { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/` },
            callerAddress: lender.address,
          }),
        });
        expect(created.status, await created.clone().text()).toBe(200);
        const store = (sql: string) => env.slot.read((query) => query<Record<string, unknown>>(sql));
        await waitFor("the first screen", async () =>
          (await store("select 1 from service.monitor where snapshot is not null")).length ? true : undefined,
        );
        await run("npx", ["tsx", "docs/examples/sanction-wallet.ts", wallet], {
          env: { ...process.env, DEVNET_MANIFEST: devnet.manifestPath },
        });
        await waitFor("a delivery in flight", async () => (arrivals.length ? true : undefined), running, 60_000);

        await crashIndexer(running, env.slot);
        // The dead worker's lease (30 s) dated as passed, as waiting it out would leave it.
        await store("update service.webhook_delivery set leased_until = now() where leased_until > now()");
        hold = false;
        restarted = await startIndexer({ DEVNET_MANIFEST: devnet.manifestPath, ...env.slot.env });
        await waitFor("the delivery again", async () => (arrivals.length >= 2 ? true : undefined), restarted, 120_000);
        // The receiver has answered; the deliverer records that a moment later.
        const deliveries = () => store("select status, attempts from service.webhook_delivery");
        await waitFor("the delivery recorded", async () =>
          (await deliveries()).some((d) => d.status !== "pending") ? true : undefined,
        );
        expect(arrivals).toHaveLength(2);
        const events = await store("select id, type, block, retracts, before, after from service.monitor_event");
        expect(new Set(arrivals).size, JSON.stringify({ arrivals, events })).toBe(1);
        expect(await deliveries()).toEqual([{ status: "delivered", attempts: 1 }]);
      } finally {
        for (const res of held) res.destroy();
        receiver.close();
      }
    },
    240_000,
  );
});
