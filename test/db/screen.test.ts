import { type ChildProcess, execFile, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { type Hex, zeroAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { DAY, type WalletFacts, type WalletTransfer, WINDOW_DAYS } from "../../api/scoring/facts.ts";
import { DUST_FLOOR_UNITS, drainCandidates, isDrain } from "../../api/scoring/rules.ts";
import { type LenderScreenResult, lenderScreenResultSchema } from "../../api/screen/schema.ts";
import { loadWalletFacts } from "../../api/wallet/queries.ts";
import type { Address } from "../../config/addresses.ts";
import { devnetClients } from "../../devnet/chain.ts";
import { freePort } from "../../devnet/ports.ts";
import { rpc } from "../../devnet/rpc.ts";
import type { ErrorBody } from "../../shared/errors.ts";
import { waitForReceipt } from "../../shared/receipt.ts";
import { type ChainTransfer, chainListings, chainTransfers } from "../support/chain-truth.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { withIndexDb } from "../support/index-db.ts";
import { type Indexer, testDatabase, waitFor, waitForBlock } from "../support/indexer.ts";
import { signAuthorization, specHeader, tokenBalance, x402Fetch } from "../support/payments.ts";

const run = promisify(execFile);

// One seeded devnet and indexer for the file: the screens of its personas first, then the drain
// rule's SQL against the same chain (both read what scoring reads; one indexer start, not two).
let env: IndexedDevnet;
let devnet: TestDevnet;
let indexer: Indexer;

beforeAll(async () => {
  env = await indexedDevnet({ wallets: 40, months: 15, seed: 21 });
  devnet = env.devnet;
  indexer = await env.index();
  await waitForBlock(indexer, devnet.manifest.headBlock);
}, 240_000);

afterAll(() => env?.stop());

// Screening the devnet personas end to end (chain -> indexer -> SQL -> scoring -> response),
// against the ground truth the devnet seeded on purpose.
describe(`POST /api/lender/screen (${testDatabase})`, () => {
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
    paidFetch = x402Fetch(devnet.manifest.lenders[0]!.privateKey as Hex, Object.values(devnet.manifest.tokens));
    for (const [name, persona] of Object.entries(devnet.manifest.personas)) {
      const res = await screen({ walletAddress: persona.address, callerAddress: devnet.manifest.lenders[0]!.address });
      expect(res.status, name).toBe(200);
      results[name] = lenderScreenResultSchema.parse(await res.json());
    }
  }, 240_000);

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
    const receipt = await waitForReceipt(publicClient, { hash, pollingInterval: 50 });
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

  // Sanctions, read from the oracle's logs (eth_getLogs), not from the indexer.
  it("declines a wallet listed on the sanctions oracle with no loan, says since which block; a delisted one is clear; exposure is a concern", async () => {
    const oracle = devnet.manifest.sanctions!.address;
    const listings = await chainListings(devnet.manifest.rpcUrl, oracle);
    const persona = devnet.manifest.personas.sanctioned!;
    const listing = listings.find((l) => l.address === persona.address && l.delistedBlock === null)!;
    const sanctioned = results.sanctioned!;
    expect(sanctioned.recommendation).toBe("decline");
    expect(sanctioned.recommendationRationale).toMatch(/sanctions oracle/);
    expect(sanctioned.lending).toMatchObject({ recommendedMinUsd: 0, recommendedMaxUsd: 0 });
    expect(sanctioned.sanctions).toMatchObject({
      status: "listed",
      listed: true,
      listedSince: { block: Number(listing.listedBlock) },
      source: { contract: oracle, chain: "celo" },
      asOf: { block: sanctioned.dataAsOf.block },
    });
    expect(sanctioned.signals.concerns?.some((c) => c.includes("listed on the sanctions oracle"))).toBe(true);

    const removal = listings.find((l) => l.address === devnet.manifest.personas.delisted!.address)!;
    expect(removal.delistedBlock).not.toBeNull();
    expect(results.delisted!.sanctions).toMatchObject({
      status: "not_listed",
      listed: false,
      listedSince: null,
      delistedAt: { block: Number(removal.delistedBlock) },
    });
    expect(results.delisted!.recommendation).toBe("approve");
    expect(results.salaried!.sanctions).toMatchObject({ status: "not_listed", exposure: { wallets: [] } });

    const counterparty = persona.truth.counterparty as Address;
    const exposed = lenderScreenResultSchema.parse(await (await screen({ walletAddress: counterparty })).json());
    expect(exposed.sanctions.exposure.wallets).toEqual([expect.objectContaining({ wallet: persona.address })]);
    expect(exposed.recommendation).not.toBe("approve");
    expect(exposed.signals.concerns?.some((c) => c.includes(persona.address))).toBe(true);

    const signal = await get(`/api/wallet/${persona.address}/signals/sanctioned`);
    expect(signal.body.value).toMatchObject({ status: "listed", listedSince: { block: Number(listing.listedBlock) } });
  });

  it("follows a listing as the chain moves: the next screen declines and the payer is refused with nothing charged; delisted, both recover", async () => {
    const { publicClient } = devnetClients(devnet.manifest.rpcUrl, devnet.manifest.deployer.privateKey as Hex);
    // docs/devnet.md's way to list a wallet by hand, run as written: it prints the block it was mined in.
    const change = async (wallets: Address[], remove = false) => {
      let block = 0;
      for (const wallet of wallets) {
        const { stdout } = await run(
          "npx",
          ["tsx", "docs/examples/sanction-wallet.ts", wallet, ...(remove ? ["--remove"] : [])],
          { env: { ...process.env, DEVNET_MANIFEST: devnet.manifestPath } },
        );
        expect(stdout).toContain(`isSanctioned(${wallet}) = ${!remove}`);
        block = Number(/^block (\d+) \(success\)/.exec(stdout)![1]);
      }
      await waitForBlock(indexer, block);
      return block;
    };
    const merchant = devnet.manifest.personas.merchant!.address;
    const lender = devnet.manifest.lenders[1]!;
    const { USDT } = devnet.manifest.tokens;
    const balance = () => tokenBalance(devnet.manifest.rpcUrl, USDT.address, lender.address);
    const listedAt = await change([lender.address, merchant]);

    const after = lenderScreenResultSchema.parse(await (await screen({ walletAddress: merchant })).json());
    expect(after.recommendation).toBe("decline");
    expect(after.sanctions).toMatchObject({ status: "listed", listedSince: { block: listedAt } });
    expect(after.cached).toBe(false);

    const held = await balance();
    const signed = await signAuthorization(lender.privateKey as Hex, USDT, {
      to: devnet.manifest.service.treasury.address,
      value: 10_000n,
    });
    const paidBy = () =>
      fetch(`${indexer.url}/api/lender/screen`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-payment": specHeader(signed, USDT.address) },
        body: JSON.stringify({ walletAddress: merchant, callerAddress: lender.address }),
      });
    const refused = await paidBy();
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as ErrorBody).error.code).toBe("sanctioned_payer");
    const used = () =>
      publicClient.readContract({
        address: USDT.address,
        abi: devStablecoinAbi,
        functionName: "authorizationState",
        args: [lender.address, signed.authorization.nonce],
      });
    expect(await used()).toBe(false);
    expect(await balance()).toBe(held);

    const delistedAt = await change([lender.address, merchant], true);
    const recovered = lenderScreenResultSchema.parse(await (await screen({ walletAddress: merchant })).json());
    expect(recovered.recommendation).toBe(results.merchant!.recommendation);
    expect(recovered.sanctions).toMatchObject({ status: "not_listed", delistedAt: { block: delistedAt } });
    // The refused payment was never touched: the same one now buys the answer.
    const paid = await paidBy();
    expect(paid.status).toBe(200);
  });
});

/** A wallet's transfers over the scoring window, from the chain's own logs (not the indexer's tables). */
// Monitors end to end: a lender pays to watch wallets, with a webhook to the receiver of
// docs/examples/webhook-receiver.ts (run as written), and the chain moves under them.
describe(`monitors: what the chain does to watched wallets, pushed as signed webhooks (${testDatabase})`, () => {
  type Received = { id: string; type: string; timestamp: string; data: Record<string, any> };
  let receiver: ChildProcess | undefined;
  const received: Received[] = [];
  afterAll(() => {
    if (receiver?.pid) process.kill(-receiver.pid, "SIGTERM");
  });
  const waitForEvent = (what: string, match: (e: Received) => boolean) =>
    waitFor(what, async () => received.find(match), indexer, 60_000);

  it("delivers a listing, its removal and a drain of watched wallets, signed, within 3 blocks; retracts the drain a reorg removed", async () => {
    const { manifest } = devnet;
    const lender = manifest.lenders[0]!;
    const salaried = manifest.personas.salaried!.address as Address;
    const gig = manifest.personas["gig-worker"]!.address as Address;
    const paidFetch = x402Fetch(lender.privateKey as Hex, Object.values(manifest.tokens));
    const port = await freePort();
    const created = await paidFetch(`${indexer.url}/api/monitors`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        wallets: [salaried, gig],
        webhook: { url: `http://127.0.0.1:${port}/hooks` },
        callerAddress: lender.address,
      }),
    });
    const body = (await created.json()) as Record<string, any>;
    expect(created.status, JSON.stringify(body)).toBe(200);
    expect(body.x402Billing).toMatchObject({ chargedUnits: "20000" });
    const secret = body.endpoint.secret as string;
    expect(secret).toMatch(/^whsec_/);

    receiver = spawn("npx", ["tsx", "docs/examples/webhook-receiver.ts", String(port)], {
      env: { ...process.env, WEBHOOK_SECRET: secret },
      detached: true,
      stdio: ["ignore", "pipe", "inherit"],
    });
    createInterface({ input: receiver.stdout! }).on("line", (line) => received.push(JSON.parse(line)));
    // The watcher's first screen of each wallet is what later screens are compared with.
    const ids = body.monitors.map((m: { id: string }) => `'${m.id}'`).join(", ");
    await waitFor("the first screens", async () => {
      const [row] = await env.slot.read((query) =>
        query<{ n: string }>(`select count(*) as n from service.monitor where id in (${ids}) and snapshot is not null`),
      );
      return Number(row!.n) === 2 ? true : undefined;
    });

    // A listing on the sanctions oracle, then its removal (the docs' script), each an event.
    await run("npx", ["tsx", "docs/examples/sanction-wallet.ts", gig], {
      env: { ...process.env, DEVNET_MANIFEST: devnet.manifestPath },
    });
    const listed = await waitForEvent(
      "sanctions.listed",
      (e) => e.type === "sanctions.listed" && e.data.wallet === gig,
    );
    expect(listed.data.after).toEqual({ sanctions: "listed" });
    await waitForEvent(
      "the recommendation",
      (e) => e.type === "screen.recommendation_changed" && e.data.after === "decline",
    );
    await run("npx", ["tsx", "docs/examples/sanction-wallet.ts", gig, "--remove"], {
      env: { ...process.env, DEVNET_MANIFEST: devnet.manifestPath },
    });
    await waitForEvent("sanctions.delisted", (e) => e.type === "sanctions.delisted" && e.data.wallet === gig);

    // A drain, on a branch a reorg then removes: money comes in, and most of the balance leaves at
    // once for an address never seen before (moved by the token owner's seeding function, as the
    // devnet's history was).
    const snapshot = await rpc<string>(manifest.rpcUrl, "evm_snapshot");
    const { publicClient, walletClient } = devnetClients(manifest.rpcUrl, lender.privateKey as Hex);
    const usdt = manifest.tokens.USDT.address;
    await waitForReceipt(publicClient, {
      hash: await walletClient.writeContract({
        address: usdt,
        abi: devStablecoinAbi,
        functionName: "transfer",
        args: [salaried, 100_000_000n],
      }),
      pollingInterval: 50,
    });
    const held = await tokenBalance(manifest.rpcUrl, usdt, salaried);
    const owner = devnetClients(manifest.rpcUrl, manifest.deployer.privateKey as Hex).walletClient;
    const drained = await waitForReceipt(publicClient, {
      hash: await owner.writeContract({
        address: usdt,
        abi: devStablecoinAbi,
        functionName: "seedTransfers",
        args: [[salaried], ["0x00000000000000000000000000000000d2a10001"], [(held * 9n) / 10n]],
      }),
      pollingInterval: 50,
    });
    const drain = await waitForEvent(
      "drain.detected",
      (e) => e.type === "drain.detected" && e.data.wallet === salaried,
    );
    expect(Number(drain.data.block) - Number(drained.blockNumber)).toBeLessThanOrEqual(3);
    expect(drain.data.after.drainedUsd).toBeGreaterThan(drain.data.before.drainedUsd);
    expect(drain.id).toBe(drain.data.id);

    // The drain's blocks are reorganised away: the event is retracted, by id, to the same receiver.
    expect(await rpc<boolean>(manifest.rpcUrl, "evm_revert", [snapshot])).toBe(true);
    for (let i = 0; i < 4; i++) await rpc(manifest.rpcUrl, "evm_mine");
    const retracted = await waitForEvent(
      "event.retracted",
      (e) => e.type === "event.retracted" && e.data.retracts === drain.id,
    );
    expect(retracted.data).toMatchObject({ wallet: salaried });
    expect(retracted.data.before).toMatchObject({ type: "drain.detected", block: drain.data.block });
    // The receiver verified each signature (it drops what does not verify) and dedupes by webhook-id.
    expect(new Set(received.map((e) => e.id)).size).toBe(received.length);
  });
});

function chainWindow(wallet: Address, transfers: ChainTransfer[], asOf: number): WalletTransfer[] {
  const out: WalletTransfer[] = [];
  for (const t of transfers) {
    const at = Number(t.timestamp);
    if (at <= asOf - WINDOW_DAYS * DAY) continue;
    const common = { token: t.token as Address, value: t.value, at };
    if (t.from === wallet) out.push({ direction: "out", counterparty: t.to as Address, ...common });
    if (t.to === wallet) out.push({ direction: "in", counterparty: t.from as Address, ...common });
  }
  return out;
}

const sorted = (xs: Iterable<string>) => [...new Set(xs)].sort();
const key = (t: WalletTransfer) => `${t.direction}|${t.counterparty}|${t.token}|${t.value}|${t.at}`;

// The drain-candidate rule is written once (api/scoring/rules.ts) and applied in SQL to preselect
// the payees whose first activity a screen reads (WalletFacts.firstSeen). On a seeded chain, the
// SQL's candidates equal the rule applied in TypeScript to the wallet's transfers from eth_getLogs.
describe(`drain candidates: the SQL equals the rule (${testDatabase})`, () => {
  let transfers: ChainTransfer[];
  const facts = new Map<string, WalletFacts>();
  const wallets: { label: string; address: Address }[] = [];

  beforeAll(async () => {
    // The screens above paid, so the chain has moved on: the index is read at the head it has now.
    const { publicClient } = devnetClients(devnet.manifest.rpcUrl, devnet.manifest.lenders[0]!.privateKey as Hex);
    const head = Number(await publicClient.getBlockNumber());
    const tokens = [devnet.manifest.tokens.USDT.address, devnet.manifest.tokens.USDC.address];
    transfers = await chainTransfers(devnet.manifest.rpcUrl, tokens, BigInt(devnet.manifest.startBlock));
    await waitForBlock(indexer, head);
    // PGlite admits one process at a time: stop the indexer before opening its database.
    await indexer.stop();

    for (const [name, persona] of Object.entries(devnet.manifest.personas))
      wallets.push({ label: name, address: persona.address });
    const personas = new Set(wallets.map((w) => w.address));
    const background = sorted(transfers.flatMap((t) => [t.from, t.to])).filter(
      (w) => !personas.has(w as Address) && w !== zeroAddress,
    );
    for (const address of background.filter((_, i) => i % 4 === 0)) {
      wallets.push({ label: `background ${address}`, address: address as Address });
    }

    await withIndexDb(env.slot, async (db) => {
      for (const w of wallets) facts.set(w.address, (await loadWalletFacts(db, env.slot.schema, w.address)).facts);
    });
  }, 300_000);

  it("reads the same window of transfers the rule is applied to", () => {
    for (const w of wallets) {
      const f = facts.get(w.address)!;
      expect(sorted(f.transfers.map(key)), w.label).toEqual(sorted(chainWindow(w.address, transfers, f.asOf).map(key)));
    }
  });

  it("looks up first activity for exactly the rule's candidates, every persona and a sample of wallets", () => {
    let candidates = 0;
    for (const w of wallets) {
      const f = facts.get(w.address)!;
      const rule = sorted(
        drainCandidates(w.address, chainWindow(w.address, transfers, f.asOf)).map((t) => t.counterparty),
      );
      expect(sorted(f.firstSeen.map((s) => s.address)), w.label).toEqual(rule);
      candidates += rule.length;
    }
    expect(candidates).toBeGreaterThan(20);
  });

  it("gives each candidate its first activity on the chain", () => {
    for (const w of wallets) {
      for (const seen of facts.get(w.address)!.firstSeen) {
        const first = Math.min(
          ...transfers.filter((t) => t.from === seen.address || t.to === seen.address).map((t) => Number(t.timestamp)),
        );
        expect(seen.firstAt, `${w.label}: ${seen.address}`).toBe(first);
      }
    }
  });

  it("finds the drainer's fresh sinks, each a drain", () => {
    const drainer = devnet.manifest.personas.drainer!;
    const f = facts.get(drainer.address)!;
    const candidates = drainCandidates(drainer.address, f.transfers);
    // 2-4 inflows a month, each drained to a new sink: a year's worth fall in the window.
    expect(candidates.length).toBeGreaterThanOrEqual(12);
    expect(candidates.length).toBeLessThanOrEqual(Number(drainer.truth.freshSinks));
    const firstSeen = new Map(f.firstSeen.map((s) => [s.address, s.firstAt]));
    for (const t of candidates) expect(isDrain(t, firstSeen.get(t.counterparty)), t.counterparty).toBe(true);
  });

  it("follows no dust inflow: the dust-spammed wallet's payments after dust alone are not candidates", () => {
    const spammed = devnet.manifest.personas["dust-spammed"]!;
    const f = facts.get(spammed.address)!;
    // The same transfers with every dust inflow counted as a real one: more candidates, which the
    // SQL (like the rule) must not name.
    const dustCounted = f.transfers.map((t) =>
      t.direction === "in" && t.value < DUST_FLOOR_UNITS ? { ...t, value: DUST_FLOOR_UNITS } : t,
    );
    const withDust = sorted(drainCandidates(spammed.address, dustCounted).map((t) => t.counterparty));
    const sql = sorted(f.firstSeen.map((s) => s.address));
    expect(withDust.length).toBeGreaterThan(sql.length);
  });
});
