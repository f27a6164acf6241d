import { createPublicClient, type Hex, http } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { cancelOnChain, chainAuthorizations, settleOnChain } from "../support/authorizations.ts";
import { normalise } from "../support/chain-truth.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { type DatabaseSlot, type Query, testDatabase, waitForBlock } from "../support/indexer.ts";
import { randomNonce, signAuthorization } from "../support/payments.ts";

// The indexer keeps the tokens' EIP-3009 AuthorizationUsed / AuthorizationCanceled events
// (authorization_state): after real settlements and cancellations on the devnet, its rows are
// exactly what eth_getLogs says, and each is an authorization the token reports as spent. On Postgres
// only: PGlite's rows are read back by test/db/local-verify.test.ts (vitest.config.ts says why).
describe(`authorization_state matches the chain's events (${testDatabase})`, () => {
  let env: IndexedDevnet;
  let devnet: TestDevnet;
  let slot: DatabaseSlot;
  let rows: Record<string, unknown>[];
  let chain: Awaited<ReturnType<typeof chainAuthorizations>>;
  const ours: { nonce: Hex; kind: "used" | "canceled" }[] = [];

  beforeAll(async () => {
    env = await indexedDevnet({ wallets: 2, months: 2, slotHours: 24 * 7 });
    ({ devnet, slot } = env);
    const indexer = await env.index();
    const { rpcUrl, tokens, lenders, service } = devnet.manifest;
    const [lender, lender2] = lenders;
    const relayer = service.relayer.privateKey as Hex;
    const pay = async (payer: typeof lender, token: typeof tokens.USDT, value: bigint) => {
      const signed = await signAuthorization(payer!.privateKey as Hex, token, { to: service.treasury.address, value });
      ours.push({ nonce: signed.authorization.nonce, kind: "used" });
      return settleOnChain(rpcUrl, relayer, token, signed);
    };
    const cancel = async (payer: typeof lender, token: typeof tokens.USDT) => {
      const nonce = randomNonce();
      ours.push({ nonce, kind: "canceled" });
      return cancelOnChain(rpcUrl, relayer, payer!.privateKey as Hex, token, nonce);
    };
    // Settlements in both tokens and by two payers, and cancellations (one payer cancels in both tokens).
    await pay(lender, tokens.USDT, 10_000n);
    await pay(lender, tokens.USDC, 20_000n);
    await pay(lender2 ?? lender, tokens.USDT, 10_000n);
    await cancel(lender, tokens.USDT);
    const last = await cancel(lender2 ?? lender, tokens.USDC);

    chain = await chainAuthorizations(
      rpcUrl,
      [tokens.USDT.address, tokens.USDC.address],
      BigInt(devnet.manifest.startBlock),
    );
    await waitForBlock(indexer, Number(last), 360_000); // generous: other suites may share the machine
    // PGlite admits one process at a time: stop the indexer before reading its tables.
    await indexer.stop();
    rows = await slot.read((query: Query) =>
      query(
        "select token, authorizer, nonce, kind, block_number, transaction_hash from authorization_state order by block_number, transaction_hash, nonce",
      ),
    );
  }, 480_000);

  afterAll(() => env?.stop());

  it("holds one row per AuthorizationUsed / AuthorizationCanceled log, equal to eth_getLogs", () => {
    // Our five are among the chain's logs (the seeding may have made others).
    for (const { nonce, kind } of ours)
      expect(
        chain.filter((l) => l.nonce === nonce).map((l) => l.kind),
        nonce,
      ).toEqual([kind]);
    const order = (xs: Record<string, string | null>[]) =>
      xs.sort((a, b) =>
        `${a.block_number}${a.transaction_hash}${a.nonce}`.localeCompare(
          `${b.block_number}${b.transaction_hash}${b.nonce}`,
        ),
      );
    expect(order(normalise(rows))).toEqual(order(normalise(chain)));
  });

  it("has a row exactly for authorizations the token reports as spent", async () => {
    const client = createPublicClient({ transport: http(devnet.manifest.rpcUrl) });
    const spent = (token: string, authorizer: string, nonce: string) =>
      client.readContract({
        address: token as Hex,
        abi: devStablecoinAbi,
        functionName: "authorizationState",
        args: [authorizer as Hex, nonce as Hex],
      });
    expect(rows.length).toBeGreaterThanOrEqual(ours.length);
    for (const row of rows)
      expect(await spent(String(row.token), String(row.authorizer), String(row.nonce))).toBe(true);
  });
});
