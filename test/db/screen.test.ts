import type { Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { type LenderScreenResult, lenderScreenResultSchema } from "../../api/screen/schema.ts";
import { devnetClients } from "../../devnet/chain.ts";
import type { ErrorBody } from "../../shared/errors.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { type Indexer, testDatabase, waitForBlock } from "../support/indexer.ts";
import { x402Fetch } from "../support/payments.ts";

// Screening the devnet personas end to end (chain -> indexer -> SQL -> scoring -> response),
// against the ground truth the devnet seeded on purpose.
describe(`POST /api/lender/screen (${testDatabase})`, () => {
  let env: IndexedDevnet;
  let devnet: TestDevnet;
  let indexer: Indexer;
  const results: Record<string, LenderScreenResult> = {};

  // Every paid call is paid for by a lender with the official x402 client.
  let paidFetch: typeof fetch;
  const screen = (body: unknown, pay = true) =>
    (pay ? paidFetch : fetch)(`${indexer.url}/api/lender/screen`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });

  beforeAll(async () => {
    env = await indexedDevnet({ wallets: 40, months: 15, seed: 21 });
    devnet = env.devnet;
    paidFetch = x402Fetch(devnet.manifest.lenders[0]!.privateKey as Hex, Object.values(devnet.manifest.tokens));
    indexer = await env.index();
    await waitForBlock(indexer, devnet.manifest.headBlock);
    for (const [name, persona] of Object.entries(devnet.manifest.personas)) {
      const res = await screen({ walletAddress: persona.address, callerAddress: devnet.manifest.lenders[0]!.address });
      expect(res.status, name).toBe(200);
      results[name] = lenderScreenResultSchema.parse(await res.json());
    }
  }, 240_000);

  afterAll(() => env?.stop());

  it("answers the LenderScreenResult shape of the service interface", () => {
    for (const [name, r] of Object.entries(results)) {
      expect(r.status, name).toBe("completed");
      expect(Object.keys(r.trust), name).toEqual(["isTrustworthy"]);
      expect(r.trust.isTrustworthy, name).toBe(r.recommendation === "approve");
      expect(r.walletAddress).toMatch(/^0x[a-f0-9]{40}$/);
      // Each paid screen settles in a block of its own, so the index moves past the seeded head.
      expect(r.dataAsOf.block).toBeGreaterThanOrEqual(devnet.manifest.headBlock);
    }
  });

  it("approves the salaried worker on its payroll", () => {
    const r = results.salaried!;
    const truth = devnet.manifest.personas.salaried!.truth;
    expect(r.recommendation).toBe("approve");
    expect(r.income.recurringPayers).toEqual([
      expect.objectContaining({ payer: truth.employer, cadence: "monthly", medianUsd: truth.monthlySalaryUsd }),
    ]);
    expect(r.lending.recommendedMaxUsd).toBeGreaterThan(0);
  });

  it("approves or reviews the merchant; reviews the gig worker, whale and one-off", () => {
    expect(["approve", "review"]).toContain(results.merchant!.recommendation);
    expect(results["gig-worker"]!.recommendation).toBe("review");
    expect(results.whale!.recommendation).toBe("review");
    expect(results["one-off"]!.recommendation).toBe("review");
    expect(results["one-off"]!.income.recurringIncome).toBe(false);
  });

  it("declines the new and the dormant wallet, saying why: thin file and dormancy", () => {
    expect(results["new-wallet"]).toMatchObject({ recommendation: "decline", thinFile: { thinFile: true } });
    expect(results["new-wallet"]!.recommendationRationale).toMatch(/Too little history/);
    expect(results.dormant!.recommendation).toBe("decline");
    expect(results.dormant!.recommendationRationale).toMatch(/Dormant/);
    expect(results.dormant!.thinFile.thinFile).toBe(false);
  });

  it("never approves the self-funder or the drainer, and does not count cycled money as income", () => {
    expect(results["self-funder"]!.recommendation).not.toBe("approve");
    expect(results.drainer!.recommendation).not.toBe("approve");
    const income = results["self-funder"]!.income;
    expect(income.verifiedMonthlyUsd).toBe(0);
    expect(income.monthlyEstimateUsd).toBe(0);
    // It received ~2,000/month from its own wallets over the scoring year; all of it is excluded.
    expect(income.excludedInflowUsd!.cycled).toBeGreaterThanOrEqual(20_000);
  });

  it("does not count dust as income", () => {
    const r = results["dust-spammed"]!;
    expect(r.income.verifiedMonthlyUsd).toBe(0);
    expect(r.income.monthlyEstimateUsd).toBe(0);
    expect(r.signals.concerns?.some((c) => /\d+ dust inflows under \$1 ignored/.test(c))).toBe(true);
  });

  it("gives a wallet with no history a valid decline, and caches until the wallet's activity changes", async () => {
    const fresh = "0x00000000000000000000000000000000000b0b01";
    const first = lenderScreenResultSchema.parse(await (await screen({ walletAddress: fresh })).json());
    expect(first).toMatchObject({
      recommendation: "decline",
      cached: false,
      thinFile: { thinFile: true },
      income: { monthlyEstimateUsd: 0 },
    });
    expect(lenderScreenResultSchema.parse(await (await screen({ walletAddress: fresh })).json()).cached).toBe(true);

    const { publicClient, walletClient } = devnetClients(
      devnet.manifest.rpcUrl,
      devnet.manifest.lenders[0]!.privateKey as `0x${string}`,
    );
    const hash = await walletClient.writeContract({
      address: devnet.manifest.tokens.USDT.address,
      abi: devStablecoinAbi,
      functionName: "transfer",
      args: [fresh, 5_000_000n],
    });
    const receipt = await publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    await waitForBlock(indexer, Number(receipt.blockNumber));
    const after = lenderScreenResultSchema.parse(await (await screen({ walletAddress: fresh })).json());
    expect(after.cached).toBe(false);
    expect(after.whatLendersAlreadySee.stablecoinBalanceUsd).toBe(5);
  });

  it("rejects bad input with a JSON error and a stable code, before asking for payment", async () => {
    const cases: [unknown, number, string][] = [
      [{ walletAddress: "0x123" }, 400, "invalid_request"],
      [{}, 400, "invalid_request"],
      [{ walletAddress: devnet.manifest.personas.salaried!.address, callerAddress: "lender" }, 400, "invalid_request"],
      ["{not json", 400, "invalid_json"],
    ];
    for (const [body, status, code] of cases) {
      const res = await screen(body, false);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(((await res.json()) as ErrorBody).error.code).toBe(code);
    }
  });

  const get = async (path: string) => {
    const res = await paidFetch(`${indexer.url}${path}`);
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };

  it("analyzes a wallet, narrowing to `fields` and refusing unknown ones", async () => {
    const salaried = devnet.manifest.personas.salaried!.address;
    const analyze = async (body: unknown) => {
      const res = await paidFetch(`${indexer.url}/api/agent/analyze`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, any> };
    };
    const full = await analyze({ walletAddress: salaried });
    expect(full.status).toBe(200);
    expect(full.body).toMatchObject({
      financialHealthScore: results.salaried!.scores.financialHealth,
      reputationScore: results.salaried!.scores.reputation,
      incomeLabel: "recurring monthly",
    });
    expect(full.body.loanRange).toMatchObject({
      minUsd: results.salaried!.lending.recommendedMinUsd,
      maxUsd: results.salaried!.lending.recommendedMaxUsd,
    });
    expect(full.body.summary).toMatch(/verified recurring income of about \$3,400 a month/);
    expect(full.body.walletData.balances).toHaveLength(2);
    const narrow = await analyze({ walletAddress: salaried, fields: ["summary"] });
    expect(Object.keys(narrow.body).sort()).toEqual([
      "cached",
      "dataAsOf",
      "modelVersion",
      "summary",
      "walletAddress",
      "x402Billing",
    ]);
    const unknown = await analyze({ walletAddress: salaried, fields: ["summary", "creditScore"] });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatchObject({
      code: "unknown_field",
      details: { allowed: expect.arrayContaining(["summary", "walletData"]) },
    });
  });

  it("serves walletData, named signals with their cache status, and a 12-month score history", async () => {
    const salaried = devnet.manifest.personas.salaried!.address;
    const analysis = await get(`/api/wallet/${salaried}/analysis`);
    expect(analysis.status).toBe(200);
    const usdt = analysis.body.walletData.balances.find((b: { symbol: string }) => b.symbol === "USDT");
    expect(usdt.balanceUsd).toBe(
      results.salaried!.whatLendersAlreadySee.balances.find((b) => b.symbol === "USDT")!.balanceUsd,
    );
    expect(analysis.body.walletData.monthly.length).toBeGreaterThanOrEqual(12);

    const signals = await get(`/api/wallet/${salaried}/signals`);
    expect(signals.body.signals.map((x: { name: string }) => x.name)).toContain("verifiedMonthlyIncomeUsd");
    expect(signals.body.cache).toMatchObject({ cached: true, invalidatedBy: expect.any(String) });
    const one = await get(`/api/wallet/${salaried}/signals/verifiedMonthlyIncomeUsd`);
    expect(one.body.value).toBe(results.salaried!.income.verifiedMonthlyUsd);
    const missing = await get(`/api/wallet/${salaried}/signals/creditKarma`);
    expect(missing.status).toBe(404);
    expect(missing.body.error).toMatchObject({
      code: "unknown_signal",
      details: { signals: expect.arrayContaining(["drainSharePct"]) },
    });

    const history = await get(`/api/wallet/${salaried}/history`);
    expect(history.body.history).toHaveLength(12);
    expect(history.body.history.at(-1).recommendation).toBe("approve");
    expect(
      history.body.history.every(
        (h: { financialHealth: number }) => h.financialHealth >= 0 && h.financialHealth <= 100,
      ),
    ).toBe(true);

    const bad = await get("/api/wallet/0xnope/signals");
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid_address");
  });
});
