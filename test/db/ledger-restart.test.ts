import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { createPublicClient, type Hex, http } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { chainAnchor, payment } from "../../api/store/schema.ts";
import { openServiceStore } from "../../api/store/store.ts";
import { readEnv } from "../../config/env.ts";
import { resolveIndexTarget } from "../../config/target.ts";
import { rpc } from "../../devnet/rpc.ts";
import { prepareDevnetData } from "../../scripts/devnet-data.ts";
import { startTestDevnet, type TestDevnet } from "../support/devnet.ts";
import {
  type DatabaseSlot,
  databaseSlot,
  type Indexer,
  POSTGRES_URL,
  testDatabase,
  waitFor,
  waitForBlock,
} from "../support/indexer.ts";
import { startLauncher } from "../support/launcher.ts";
import { signAuthorization, specHeader, tokenBalance } from "../support/payments.ts";

const PAYMENTS = 4;
const PRICE = 10_000n; // a screen: 0.01 USDT
const DEVNET = { wallets: 10, months: 2, seed: 47, slotHours: 24 * 7 };

// `npm run indexer` started again on a devnet that is still running rebuilds its index but keeps the
// payment ledger: a client retrying a paid, answered request with its payment gets its answer, not
// a 402 for a nonce already used (money without data). A new chain resets the ledger with the rest.
describe(`the payment ledger outlives the indexer (${testDatabase})`, () => {
  let devnet: TestDevnet;
  let slot: DatabaseSlot;
  let launcher: Indexer | undefined;
  let lender: { address: Hex; privateKey: Hex };
  const devnets: TestDevnet[] = [];
  const ipfsDir = mkdtempSync(join(tmpdir(), "ipfs-"));

  // On Postgres the launcher creates `<name>_devnet` from a connection to DATABASE_URL's database.
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    await client.query(sql).finally(() => client.end());
  };
  const baseDatabase = () => decodeURIComponent(new URL(slot.env.DATABASE_URL!).pathname.slice(1));

  const launch = async (manifestPath: string) =>
    (launcher = await startLauncher({ DEVNET_MANIFEST: manifestPath, IPFS_DIR: ipfsDir, ...slot.env }));
  const stop = async () => {
    await launcher?.stop();
    launcher = undefined;
  };
  const screen = (indexer: Indexer, header: string) =>
    fetch(`${indexer.url}/api/lender/screen`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-payment": header },
      body: JSON.stringify({
        walletAddress: devnet.manifest.personas.salaried!.address,
        callerAddress: lender.address,
      }),
    }).then(async (res) => ({ status: res.status, body: await res.text() }));
  /** A paid call, retried while the index is not current (503: nothing charged, come back later). */
  const paidCall = (indexer: Indexer, header: string) =>
    waitFor(
      "an answer other than 503",
      async () => {
        const answer = await screen(indexer, header);
        return answer.status === 503 ? undefined : answer;
      },
      indexer,
      60_000,
    );
  const head = async (d: TestDevnet) => Number(BigInt(await rpc<string>(d.manifest.rpcUrl, "eth_blockNumber")));
  const readStore = async () => {
    const store = await openServiceStore(slot.store);
    try {
      return { payments: await store.db.select().from(payment), anchors: await store.db.select().from(chainAnchor) };
    } finally {
      await store.close();
    }
  };

  beforeAll(async () => {
    // Two months of weekly blocks: the screens need a salaried persona with a history, not a long one.
    devnet = await startTestDevnet(DEVNET);
    devnets.push(devnet);
    lender = devnet.manifest.lenders[0] as unknown as typeof lender;
    slot = databaseSlot();
    await slot.prepare();
    if (slot.kind === "postgres") await admin(`create database "${baseDatabase()}"`);
  }, 240_000);

  afterAll(async () => {
    await stop();
    await slot?.drop();
    if (slot?.kind === "postgres") await admin(`drop database if exists "${baseDatabase()}" with (force)`);
    for (const d of devnets) await d.stop();
    rmSync(ipfsDir, { recursive: true, force: true });
  });

  it("a restart on the same chain answers every paid retry with its stored answer, each payment charged once", async () => {
    const USDT = devnet.manifest.tokens.USDT;
    const treasury = devnet.manifest.service.treasury.address;
    const treasuryUsdt = () => tokenBalance(devnet.manifest.rpcUrl, USDT.address, treasury);

    const first = await launch(devnet.manifestPath);
    await waitForBlock(first, devnet.manifest.headBlock);
    const before = await treasuryUsdt();
    const signed = await Promise.all(
      Array.from({ length: PAYMENTS }, () =>
        signAuthorization(lender.privateKey, USDT, { to: treasury, value: PRICE }),
      ),
    );
    const headers = signed.map((s) => specHeader(s, USDT.address));
    const answers = [];
    for (const header of headers) answers.push(await paidCall(first, header));
    expect(
      answers.map((a) => a.status),
      answers.at(-1)!.body,
    ).toEqual(headers.map(() => 200));
    expect((await treasuryUsdt()) - before).toBe(PRICE * BigInt(PAYMENTS));
    await stop();

    // What `npm run indexer` does again on the running devnet: the index is rebuilt, the ledger kept.
    const second = await launch(devnet.manifestPath);
    await waitForBlock(second, await head(devnet));
    for (const [i, header] of headers.entries()) {
      const retry = await paidCall(second, header);
      expect(retry, `retry ${i}`).toEqual(answers[i]);
    }
    expect(second.output()).toContain("Same devnet chain as the last run");
    expect((await treasuryUsdt()) - before).toBe(PRICE * BigInt(PAYMENTS));
    const chain = createPublicClient({ transport: http(devnet.manifest.rpcUrl) });
    for (const { authorization: a } of signed) {
      expect(
        await chain.readContract({
          address: USDT.address,
          abi: devStablecoinAbi,
          functionName: "authorizationState",
          args: [a.from, a.nonce],
        }),
      ).toBe(true);
    }
    await stop();
    const { payments } = await readStore();
    expect(payments.map((p) => p.status)).toEqual(headers.map(() => "settled"));
    // Two launches of `npm run indexer` (each a preflight and a Ponder start): past the default 120 s on a loaded machine.
  }, 240_000);

  it("a new chain (a fresh anvil under the same addresses) resets the store", async () => {
    const fresh = await startTestDevnet(DEVNET, { fresh: true });
    devnets.push(fresh);
    expect(fresh.manifest.tokens.USDT.address).toBe(devnet.manifest.tokens.USDT.address);
    // What the launcher does before it starts Ponder (the indexing itself is the first test's).
    const target = resolveIndexTarget(readEnv({ DEVNET_MANIFEST: fresh.manifestPath, IPFS_DIR: ipfsDir, ...slot.env }));
    expect(await prepareDevnetData(target, slot.env.DATABASE_URL)).toBe("new chain");
    const { payments, anchors } = await readStore();
    expect(payments).toEqual([]);
    const block = await rpc<{ hash: string }>(fresh.manifest.rpcUrl, "eth_getBlockByNumber", [
      `0x${BigInt(anchors[0]!.blockNumber).toString(16)}`,
      false,
    ]);
    expect(anchors[0]!.blockHash).toBe(block.hash);
  });
});
