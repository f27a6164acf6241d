import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from "@x402/core/http";
import { createPublicClient, createWalletClient, type Hex, http, parseGwei } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { celoChain } from "../../config/celo.ts";
import { rpc } from "../../devnet/rpc.ts";
import { waitForReceipt } from "../../shared/receipt.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { crashIndexer, type Indexer, startIndexer, testDatabase, waitFor, waitForBlock } from "../support/indexer.ts";
import { signAuthorization, specHeader, tokenBalance } from "../support/payments.ts";

const PRICE = 10_000n;

// X402_SETTLEMENT=deferred on the service as lenders meet it (Ponder serving the API over the
// indexed devnet): answers come before the settlement's block, the worker settles from the queue
// in the service store, and what a payer can owe stays within the caps.
describe(`deferred settlement (${testDatabase})`, () => {
  let env: IndexedDevnet;
  let devnet: TestDevnet;
  let service: Indexer;
  let serviceEnv: Record<string, string>;
  let treasury: Hex;
  let rpcUrl: string;
  const usdt = () => devnet.manifest.tokens.USDT;
  const treasuryUsdt = () => tokenBalance(rpcUrl, usdt().address, treasury);
  const automine = (on: boolean) => rpc(rpcUrl, "evm_setAutomine", [on]);
  const mine = () => rpc(rpcUrl, "evm_mine", []);
  const wallets = () => Object.values(devnet.manifest.personas).map((p) => p.address);

  const screen = (payerKey: Hex, walletAddress: Hex, header: string) =>
    fetch(`${service.url}/api/lender/screen`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-payment": header },
      body: JSON.stringify({ walletAddress, callerAddress: privateKeyToAccount(payerKey).address.toLowerCase() }),
    });
  const paidScreen = async (payerKey: Hex, walletAddress: Hex, value = PRICE) => {
    const header = specHeader(await signAuthorization(payerKey, usdt(), { to: treasury, value }), usdt().address);
    return { header, res: await screen(payerKey, walletAddress, header) };
  };
  const receipt = (res: Response) => decodePaymentResponseHeader(res.headers.get("payment-response")!);
  const payments = async () =>
    ((await (await fetch(`${service.url}/api/stats`)).json()) as { payments: Record<string, number | string> })
      .payments;
  const untilTreasury = (expected: bigint) =>
    waitFor(
      `the treasury to hold ${expected}`,
      async () => ((await treasuryUsdt()) === expected ? true : undefined),
      service,
      60_000,
    );

  /** A new payer holding `usdt` units (and gas), its funding indexed (deferred verification reads the indexed balance). */
  const newPayer = async (units: bigint) => {
    const key = generatePrivateKey();
    const address = privateKeyToAccount(key).address;
    await rpc(rpcUrl, "anvil_setBalance", [address, "0x56BC75E2D63100000"]);
    await fund(address, units);
    return key;
  };
  const fund = async (address: Hex, units: bigint) => {
    const lender = devnet.manifest.lenders.at(-1)!;
    const wallet = createWalletClient({
      account: privateKeyToAccount(lender.privateKey as Hex),
      chain: celoChain(rpcUrl),
      transport: http(rpcUrl),
    });
    const hash = await wallet.writeContract({
      address: usdt().address,
      abi: devStablecoinAbi,
      functionName: "transfer",
      args: [address, units],
    });
    const mined = await waitForReceipt(createPublicClient({ transport: http(rpcUrl) }), {
      hash,
      pollingInterval: 50,
    });
    await waitForBlock(service, Number(mined.blockNumber));
  };

  beforeAll(async () => {
    env = await indexedDevnet({ wallets: 8, months: 6, seed: 21 });
    devnet = env.devnet;
    rpcUrl = devnet.manifest.rpcUrl;
    treasury = devnet.manifest.service.treasury.address;
    serviceEnv = { X402_SETTLEMENT: "deferred", X402_DEFERRED_MAX_PER_PAYER: "0.03" };
    service = await env.index(serviceEnv);
    await waitForBlock(service, devnet.manifest.headBlock);
  }, 240_000);

  // A test that fails with automining off would otherwise leave the next ones waiting for blocks.
  afterEach(() => automine(true).catch(() => undefined));

  afterAll(async () => {
    await service?.stop();
    await env?.stop();
  });

  it("answers before the settlement's block; the worker then settles exactly N x price, and a replay is charged once", async () => {
    const payer = await newPayer(1_000_000n);
    const before = await treasuryUsdt();
    await automine(false);
    const calls = [];
    for (const wallet of wallets().slice(0, 3)) calls.push(await paidScreen(payer, wallet));
    for (const { res } of calls) {
      expect(res.status).toBe(200);
      expect(receipt(res)).toMatchObject({ success: true, transaction: "", extra: { settlement: "pending" } });
      expect(((await res.json()) as { x402Billing: { chargedUsdt: string } }).x402Billing.chargedUsdt).toBe("0.01");
    }
    // Answered, and no block since: nothing has moved yet.
    expect(await treasuryUsdt()).toBe(before);

    await automine(true);
    await mine();
    await untilTreasury(before + 3n * PRICE);

    const replay = await screen(payer, wallets()[0]!, calls[0]!.header);
    expect(replay.status).toBe(200);
    expect(replay.headers.get("x-payment-replayed")).toBe("true");
    await mine();
    expect(await treasuryUsdt()).toBe(before + 3n * PRICE);
  });

  it("refuses a payment the indexed balance less the unsettled ones cannot cover, claiming nothing: the same payment goes through once funded", async () => {
    const payer = await newPayer(15_000n);
    const before = await treasuryUsdt();
    const counted = await payments();
    const open = (p: Record<string, number | string>) =>
      Number(p.pending) + Number(p.queued) + Number(p.settling) + Number(p.failed);
    await automine(false);
    let refused: { header: string; res: Response };
    try {
      expect((await paidScreen(payer, wallets()[0]!)).res.status).toBe(200); // 0.01 of 0.015, on credit
      refused = await paidScreen(payer, wallets()[1]!);
      expect(refused.res.status).toBe(402);
      expect(((await refused.res.json()) as { code: string }).code).toBe("insufficient_balance");
      // Only the first call holds a row (queued): the refused one left none behind, pending or failed.
      const now = await waitFor(
        "the stats to show the call answered on credit",
        async () => {
          const p = await payments();
          return open(p) !== open(counted) ? p : undefined;
        },
        service,
      );
      expect(open(now)).toBe(open(counted) + 1);
    } finally {
      await automine(true);
    }
    await mine();
    await untilTreasury(before + PRICE);
    await fund(privateKeyToAccount(payer).address, PRICE);
    // The same payment, presented again now that the balance covers it: answered and charged once.
    const retried = await screen(payer, wallets()[1]!, refused.header);
    expect(retried.status).toBe(200);
    await untilTreasury(before + 2n * PRICE);
  });

  it("settles first the call that would take a payer past X402_DEFERRED_MAX_PER_PAYER", async () => {
    const payer = await newPayer(1_000_000n);
    const eager = await newPayer(1_000_000n);
    await automine(false);
    try {
      for (const wallet of wallets().slice(0, 3)) {
        const { res } = await paidScreen(payer, wallet);
        expect(res.status).toBe(200);
        expect(receipt(res).transaction).toBe("");
      }
      // 0.03 unsettled: the fourth waits for its own settlement, which needs a block.
      const fourth = paidScreen(payer, wallets()[3]!);
      let done = false;
      void fourth.finally(() => (done = true));
      while (!done) {
        await new Promise((r) => setTimeout(r, 300));
        await mine();
      }
      const { res } = await fourth;
      expect(res.status).toBe(200);
      expect(receipt(res).transaction).toMatch(/^0x[0-9a-f]{64}$/);

      // Eight calls of another payer at once: never more than three on credit, however they interleave.
      // No block is mined until every call has been judged (the answers stop coming: those on credit
      // answer at once, the others wait for their settlement's block). A block mined sooner settles
      // credit already given, which rightly makes room for more: the cap is on what is unsettled.
      const calls = wallets()
        .slice(0, 8)
        .map((wallet) => paidScreen(eager, wallet));
      let answered = 0;
      for (const call of calls) void call.finally(() => answered++);
      for (let seen = -1; seen !== answered; ) {
        seen = answered;
        await new Promise((r) => setTimeout(r, 1_000));
      }
      let settled = 0;
      void Promise.all(calls).finally(() => (settled = 1));
      while (!settled) {
        await new Promise((r) => setTimeout(r, 300));
        await mine();
      }
      const answers = await Promise.all(calls);
      expect(answers.map(({ res }) => res.status)).toEqual(Array(8).fill(200));
      const onCredit = answers.filter(({ res }) => receipt(res).transaction === "").length;
      expect(onCredit).toBeGreaterThan(0);
      expect(onCredit).toBeLessThanOrEqual(3);
    } finally {
      await automine(true);
    }
  });

  it("refuses a payer whose deferred settlement failed with unsettled_payment until it pays that amount again", async () => {
    const payer = await newPayer(PRICE);
    const account = privateKeyToAccount(payer);
    await automine(false);
    const { res } = await paidScreen(payer, wallets()[0]!);
    expect(res.status).toBe(200);
    expect(receipt(res).transaction).toBe("");
    // Right after calling, the payer moves its balance away, paying more gas than the relayer: it is
    // mined first. Its gas is given, not estimated: the relayer's settlement may already be pending,
    // and an estimate against the pending block would find the balance gone.
    const wallet = createWalletClient({ account, chain: celoChain(rpcUrl), transport: http(rpcUrl) });
    await wallet.writeContract({
      address: usdt().address,
      abi: devStablecoinAbi,
      functionName: "transfer",
      args: [devnet.manifest.lenders[0]!.address as Hex, PRICE],
      gas: 100_000n,
      maxPriorityFeePerGas: parseGwei("50"),
      maxFeePerGas: parseGwei("500"),
    });
    await automine(true);
    await mine();
    await waitFor(
      "the failed settlement to stand as a debt",
      async () => ((await payments()).owedUnits === PRICE.toString() ? true : undefined),
      service,
      60_000,
    );

    await fund(account.address, 100_000n);
    const refused = await paidScreen(payer, wallets()[1]!);
    expect(refused.res.status).toBe(402);
    const body = (await refused.res.json()) as { code: string; accepts: { maxAmountRequired: string }[] };
    expect(body.code).toBe("unsettled_payment");
    expect(body.accepts[0]!.maxAmountRequired).toBe(String(2n * PRICE));
    expect(decodePaymentRequiredHeader(refused.res.headers.get("payment-required")!).accepts[0]!.amount).toBe(
      String(2n * PRICE),
    );

    // Paying price + debt settles before the answer and clears the debt; the next call is deferred again.
    const before = await treasuryUsdt();
    const repaid = await paidScreen(payer, wallets()[1]!, 2n * PRICE);
    expect(repaid.res.status).toBe(200);
    expect(receipt(repaid.res).transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await treasuryUsdt()).toBe(before + 2n * PRICE);
    await waitFor(
      "the debt to be cleared",
      async () => ((await payments()).owedUnits === "0" ? true : undefined),
      service,
      10_000,
    );
    const next = await paidScreen(payer, wallets()[2]!);
    expect(next.res.status).toBe(200);
    expect(receipt(next.res).transaction).toBe("");
  });

  it("counts an authorization its payer cancels right after calling as a debt, refused with unsettled_payment", async () => {
    const payer = await newPayer(100_000n);
    const account = privateKeyToAccount(payer);
    await automine(false);
    const signed = await signAuthorization(payer, usdt(), { to: treasury });
    const res = await screen(payer, wallets()[0]!, specHeader(signed, usdt().address));
    expect(res.status).toBe(200);
    expect(receipt(res).transaction).toBe("");
    // The payer cancels that very authorization, paying more gas than the relayer: mined first. Its
    // gas is given, not estimated: the relayer's settlement may already be pending, and an estimate
    // against the pending block would see the authorization used.
    const cancel = await account.signTypedData({
      domain: { name: usdt().name, version: usdt().version, chainId: 42220, verifyingContract: usdt().address },
      types: {
        CancelAuthorization: [
          { name: "authorizer", type: "address" },
          { name: "nonce", type: "bytes32" },
        ],
      },
      primaryType: "CancelAuthorization",
      message: { authorizer: account.address, nonce: signed.authorization.nonce },
    });
    const wallet = createWalletClient({ account, chain: celoChain(rpcUrl), transport: http(rpcUrl) });
    await wallet.writeContract({
      address: usdt().address,
      abi: devStablecoinAbi,
      functionName: "cancelAuthorization",
      args: [account.address, signed.authorization.nonce, cancel],
      gas: 200_000n,
      maxPriorityFeePerGas: parseGwei("50"),
      maxFeePerGas: parseGwei("500"),
    });
    await automine(true);
    await mine();
    await waitFor(
      "the cancelled settlement to stand as a debt",
      async () => (BigInt((await payments()).owedUnits as string) >= PRICE ? true : undefined),
      service,
      60_000,
    );
    const refused = await paidScreen(payer, wallets()[1]!);
    expect(refused.res.status).toBe(402);
    expect(((await refused.res.json()) as { code: string }).code).toBe("unsettled_payment");
    // Pays its debt with the next call, which settles first.
    const repaid = await paidScreen(payer, wallets()[1]!, 2n * PRICE);
    expect(repaid.res.status).toBe(200);
    expect(receipt(repaid.res).transaction).toMatch(/^0x[0-9a-f]{64}$/);
  });

  // Postgres only, to keep the suite short: the queue is the same code on PGlite (the tests above
  // run there), and a PGlite service restarting after a crash is exercised by restart.test.ts.
  it.runIf(testDatabase === "postgres")(
    "settles every queued row exactly once after the service is killed with -9 and started again",
    async () => {
      const payer = await newPayer(1_000_000n);
      const before = await treasuryUsdt();
      await automine(false);
      const calls = [];
      for (const wallet of wallets().slice(0, 3)) calls.push(await paidScreen(payer, wallet));
      for (const { res } of calls) expect(res.status).toBe(200);
      await crashIndexer(service, env.slot);
      await automine(true);
      await mine();

      service = await startIndexer({ DEVNET_MANIFEST: devnet.manifestPath, ...env.slot.env, ...serviceEnv });
      await waitForBlock(service, Number(await rpc<string>(rpcUrl, "eth_blockNumber")));
      await untilTreasury(before + 3n * PRICE);
      await waitFor(
        "no row left queued or settling",
        async () => {
          const p = await payments();
          return p.queued === 0 && p.settling === 0 ? true : undefined;
        },
        service,
        60_000,
      );
      for (const [i, { header }] of calls.entries()) {
        const replay = await screen(payer, wallets()[i]!, header);
        expect(replay.status).toBe(200);
      }
      await mine();
      expect(await treasuryUsdt()).toBe(before + 3n * PRICE);
    },
  );
});
