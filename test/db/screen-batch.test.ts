import { decodePaymentRequiredHeader } from "@x402/core/http";
import type { Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { type ScreenBatchResult, screenBatchResultSchema } from "../../api/screen/batch-schema.ts";
import { type LenderScreenResult, lenderScreenResultSchema } from "../../api/screen/schema.ts";
import { type Assessment, WalletAssessor } from "../../api/wallet/assess.ts";
import { devnetClients } from "../../devnet/chain.ts";
import { actorAddress } from "../../devnet/scenario/random.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { withIndexDb } from "../support/index-db.ts";
import {
  type DatabaseSlot,
  databaseSlot,
  type Indexer,
  startIndexer,
  testDatabase,
  waitForBlock,
} from "../support/indexer.ts";
import { documentMismatch, type OpenApiDocument } from "../support/openapi.ts";
import { signAuthorization, specHeader, tokenBalance, x402Fetch } from "../support/payments.ts";

const PRICE = 10_000n; // 0.01 per wallet, in 6-decimal units
const PATH = "/api/lender/screen/batch";

// POST /api/lender/screen/batch on the indexed devnet, paid with real signatures: one payment for
// the wallets answered, results in request order and equal to the single screen's.
describe(`POST ${PATH} (${testDatabase})`, () => {
  let env: IndexedDevnet;
  let devnet: TestDevnet;
  let indexer: Indexer;
  let doc: OpenApiDocument;
  let treasury: Hex;
  let lender: { address: Hex; privateKey: Hex };
  /** 100 distinct wallets with indexed history: the personas and background wallets. */
  let wallets: Hex[];
  let tracked: { slot: DatabaseSlot; indexer: Indexer } | undefined;

  const treasuryBalance = async () => {
    const { USDT, USDC } = devnet.manifest.tokens;
    return (
      (await tokenBalance(devnet.manifest.rpcUrl, USDT.address, treasury)) +
      (await tokenBalance(devnet.manifest.rpcUrl, USDC.address, treasury))
    );
  };
  const authorizationUsed = (from: Hex, nonce: Hex) => {
    const { publicClient } = devnetClients(devnet.manifest.rpcUrl, lender.privateKey);
    return publicClient.readContract({
      address: devnet.manifest.tokens.USDT.address,
      abi: devStablecoinAbi,
      functionName: "authorizationState",
      args: [from, nonce],
    });
  };
  const post = (url: string, path: string, body: unknown, headers: Record<string, string> = {}, pay?: typeof fetch) =>
    (pay ?? fetch)(`${url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
  const signed = async (value: bigint) => {
    const s = await signAuthorization(lender.privateKey, devnet.manifest.tokens.USDT, { to: treasury, value });
    return { ...s, header: { "x-payment": specHeader(s, devnet.manifest.tokens.USDT.address) } };
  };

  beforeAll(async () => {
    env = await indexedDevnet({ wallets: 90, months: 12, seed: 14 });
    devnet = env.devnet;
    treasury = devnet.manifest.service.treasury.address;
    lender = devnet.manifest.lenders[0] as unknown as typeof lender;
    const personas = Object.values(devnet.manifest.personas).map((p) => p.address as Hex);
    const background = Array.from(
      { length: 90 },
      (_, i) => actorAddress(devnet.manifest.population.seed, `wallet-${i}`) as Hex,
    );
    wallets = [...new Set([...personas, ...background])].slice(0, 100);
    expect(wallets).toHaveLength(100);
    indexer = await env.index();
    // Generous: on a loaded machine the first backfill of 100 wallets' history can take minutes.
    await waitForBlock(indexer, devnet.manifest.headBlock, 200_000);
    doc = (await (await fetch(`${indexer.url}/openapi.json`)).json()) as OpenApiDocument;
  }, 300_000);

  afterAll(async () => {
    await tracked?.indexer.stop();
    await tracked?.slot.drop();
    await env?.stop();
  });

  it("prices the route per wallet in the OpenAPI document and in /api/x402/config", async () => {
    const operation = doc.paths[PATH]!.post as unknown as Record<string, any>;
    expect(operation["x-price"]).toEqual({ amountUnits: "10000", usd: 0.01, per: "wallet" });
    expect(operation.description).toMatch(/per wallet answered/);
    const config = (await (await fetch(`${indexer.url}/api/x402/config`)).json()) as {
      prices: Record<string, unknown>[];
    };
    expect(config.prices.find((p) => p.route === `POST ${PATH}`)).toMatchObject({
      amountUnits: "10000",
      usd: 0.01,
      per: "wallet",
      free: false,
      available: true,
    });
    expect(config.prices.find((p) => p.route === "POST /api/lender/screen")).not.toHaveProperty("per");
  });

  it("asks for exactly 100 x the price for 100 wallets, in the v1 body and the v2 header", async () => {
    const res = await post(indexer.url, PATH, { wallets });
    expect(res.status).toBe(402);
    const body = (await res.json()) as Record<string, any>;
    expect(documentMismatch(doc, "POST", PATH, 402, body)).toBe("");
    expect(body.code).toBe("payment_required");
    expect(body.accepts.map((a: { maxAmountRequired: string }) => a.maxAmountRequired)).toEqual(["1000000", "1000000"]);
    expect(decodePaymentRequiredHeader(res.headers.get("payment-required")!).accepts.map((a) => a.amount)).toEqual([
      "1000000",
      "1000000",
    ]);
    // Three wallets, three units.
    const three = await post(indexer.url, PATH, { wallets: wallets.slice(0, 3) });
    expect(((await three.json()) as Record<string, any>).accepts[0].maxAmountRequired).toBe("30000");
  });

  it("screens 100 wallets for one payment by the x402 client: the treasury gets exactly 100 x 0.01, results in order, each the single screen's", async () => {
    // The client's own spending cap raised to the batch's 1.00 (its default is 0.10 a call).
    const pay = x402Fetch(lender.privateKey, Object.values(devnet.manifest.tokens), 100n * PRICE);
    const before = await treasuryBalance();
    const res = await post(indexer.url, PATH, { wallets, callerAddress: lender.address }, {}, pay);
    expect(res.status).toBe(200);
    const raw = await res.json();
    expect(documentMismatch(doc, "POST", PATH, 200, raw)).toBe("");
    const batch = screenBatchResultSchema.parse(raw);
    expect((await treasuryBalance()) - before).toBe(100n * PRICE);
    expect(batch).toMatchObject({
      answered: 100,
      failed: 0,
      x402Billing: { chargedUsdt: "1.00", chargedUnits: "1000000", payer: lender.address.toLowerCase() },
    });
    expect(batch.results.map((r) => r.walletAddress)).toEqual(wallets);

    // The single screen of each wallet, paid one by one: the same object, but for when it was made,
    // whether it came from the result cache (the batch's screen filled it), and the block it was
    // read at (each payment settled since is a block: the same data, confirmed at a later block).
    // What moves with time and the head (the sanctions answer's `asOf` is dataAsOf again).
    const volatile = ({ screenedAt: _s, cached: _c, dataAsOf: _d, sanctions, ...rest }: LenderScreenResult) => ({
      ...rest,
      sanctions: { ...sanctions, asOf: undefined },
    });
    for (const [i, wallet] of wallets.entries()) {
      const single = await post(
        indexer.url,
        "/api/lender/screen",
        { walletAddress: wallet, callerAddress: lender.address },
        {},
        pay,
      );
      expect(single.status, wallet).toBe(200);
      const one = lenderScreenResultSchema.parse(await single.json());
      expect(one.dataAsOf.block).toBeGreaterThanOrEqual((batch.results[i] as LenderScreenResult).dataAsOf.block);
      expect(volatile(batch.results[i] as LenderScreenResult), wallet).toEqual(volatile(one));
    }
  }, 120_000);

  it("refuses an authorization for less than the batch costs before anything runs, charging nothing", async () => {
    const before = await treasuryBalance();
    const short = await signed(99n * PRICE);
    const res = await post(indexer.url, PATH, { wallets }, short.header);
    expect(res.status).toBe(402);
    const body = (await res.json()) as Record<string, any>;
    expect(body.code).toBe("insufficient_amount");
    expect(body.accepts[0].maxAmountRequired).toBe("1000000");
    expect(documentMismatch(doc, "POST", PATH, 402, body)).toBe("");
    expect(await authorizationUsed(short.authorization.from, short.authorization.nonce)).toBe(false);
    expect(await treasuryBalance()).toBe(before);
  });

  it("refuses bad input with a 400 for the whole request before any payment: the same payment then buys the corrected request", async () => {
    const payment = await signed(3n * PRICE);
    const before = await treasuryBalance();
    const upper = `0x${wallets[1]!.slice(2).toUpperCase()}`;
    const cases: [string, unknown, RegExp][] = [
      ["a bad address", { wallets: [wallets[0], "0x123", wallets[2]] }, /wallets\.1/],
      ["no wallets", { wallets: [] }, /wallets/],
      ["101 wallets", { wallets: [...wallets, actorAddress(1, "one too many")] }, /wallets/],
      [
        "a repeated wallet (in another case)",
        { wallets: [wallets[0], wallets[1], upper] },
        /wallets\.2: the same wallet as wallets\.1/,
      ],
      ["a bad callerAddress", { wallets: wallets.slice(0, 3), callerAddress: "lender" }, /callerAddress/],
      ["no wallets field", { walletAddress: wallets[0] }, /wallets/],
    ];
    for (const [name, body, message] of cases) {
      const res = await post(indexer.url, PATH, body, payment.header);
      expect(res.status, name).toBe(400);
      const error = (await res.json()) as Record<string, any>;
      expect(error.error.code, name).toBe("invalid_request");
      expect(error.error.message, name).toMatch(message);
      expect(documentMismatch(doc, "POST", PATH, 400, error), name).toBe("");
    }
    expect(await authorizationUsed(payment.authorization.from, payment.authorization.nonce)).toBe(false);
    expect(await treasuryBalance()).toBe(before);
    // No ledger row was claimed for the refused requests: a row would tie the payment to them (409 payment_reused).
    const ok = await post(indexer.url, PATH, { wallets: wallets.slice(0, 3) }, payment.header);
    expect(ok.status).toBe(200);
    expect((await treasuryBalance()) - before).toBe(3n * PRICE);
  });

  // One database is enough for the tracked-set rule (it starts a second indexer): Postgres.
  it.runIf(testDatabase === "postgres")(
    "in tracked mode, answers a wallet outside the tracked set with a per-wallet error, not charged",
    async () => {
      const [a, b, outside] = [wallets[0]!, wallets[1]!, wallets[2]!];
      const slot = databaseSlot();
      await slot.prepare();
      // A relayer of its own, so its settlements never race the other indexer's nonces.
      const relayer = devnet.manifest.lenders[1]!.privateKey;
      tracked = {
        slot,
        indexer: await startIndexer({
          DEVNET_MANIFEST: devnet.manifestPath,
          ...slot.env,
          INDEX_MODE: "tracked",
          TRACKED_WALLETS: `${a},${b}`,
          X402_RELAYER_PRIVATE_KEY: relayer,
        }),
      };
      const url = tracked.indexer.url;
      await waitForBlock(tracked.indexer, devnet.manifest.headBlock);

      const asked = await post(url, PATH, { wallets: [a, outside, b] });
      expect(((await asked.json()) as Record<string, any>).accepts[0].maxAmountRequired).toBe(String(2n * PRICE));
      // Nothing to answer: a 404 before any payment, as the single screen's.
      const none = await post(url, PATH, { wallets: [outside] });
      expect(none.status).toBe(404);
      expect(((await none.json()) as Record<string, any>).error.code).toBe("wallet_not_indexed");

      const before = await treasuryBalance();
      const res = await post(
        url,
        PATH,
        { wallets: [a, outside, b] },
        {},
        x402Fetch(lender.privateKey, Object.values(devnet.manifest.tokens)),
      );
      expect(res.status).toBe(200);
      const raw = await res.json();
      expect(documentMismatch(doc, "POST", PATH, 200, raw)).toBe("");
      const batch: ScreenBatchResult = screenBatchResultSchema.parse(raw);
      expect((await treasuryBalance()) - before).toBe(2n * PRICE);
      expect(batch).toMatchObject({ answered: 2, failed: 1, x402Billing: { chargedUnits: String(2n * PRICE) } });
      expect(batch.results.map((r) => r.walletAddress)).toEqual([a, outside, b]);
      expect(batch.results[1]).toEqual({
        walletAddress: outside,
        error: { code: "wallet_not_indexed", message: expect.stringMatching(/not charged/) },
      });
      expect(lenderScreenResultSchema.parse(batch.results[0]).x402Billing).toMatchObject({
        chargedUnits: "10000",
        chargedUsdt: "0.01",
      });
    },
    180_000,
  );

  it("reads 100 wallets in one round of statements exactly as it reads each wallet alone", async () => {
    // The service's result cache made the single screens above equal by construction; here the
    // batched reads (one statement per kind for all wallets, funding hops shared) meet the
    // one-wallet reads, each on an empty cache. PGlite admits one process: the indexer stops first.
    await indexer.stop();
    await withIndexDb(env.slot, async (db) => {
      const target = { schema: env.slot.schema, tracked: null, sanctions: null };
      const comparable = ({ computedAt: _t, facts, ...rest }: Assessment) => ({
        ...rest,
        facts: {
          ...facts,
          funding: [...facts.funding].sort((x, y) => `${x.wallet}${x.funder}`.localeCompare(`${y.wallet}${y.funder}`)),
        },
      });
      const batch = await new WalletAssessor({ db, target }).assessMany(wallets);
      expect(batch.some((a) => a.facts.funding.length > 0)).toBe(true);
      for (const [i, wallet] of wallets.entries()) {
        const alone = await new WalletAssessor({ db, target }).assess(wallet);
        expect(comparable(batch[i]!), wallet).toEqual(comparable(alone));
      }
    });
  });
});
