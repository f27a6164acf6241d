import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { createPublicClient, createWalletClient, type Hex, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { anvilDevAccount } from "../../devnet/accounts.ts";
import { rpc as devnetRpc } from "../../devnet/rpc.ts";
import { type PrivatePostgres, startPrivatePostgres } from "../../harness/private-postgres.ts";
import { waitForReceipt } from "../../shared/receipt.ts";
import { startTestDevnet, type TestDevnet } from "../support/devnet.ts";
import {
  type DatabaseSlot,
  databaseSlot,
  type Indexer,
  startIndexer,
  testDatabase,
  waitFor,
  waitForBlock,
} from "../support/indexer.ts";
import { blockLocation, storedBlock } from "../support/ipfs-blocks.ts";
import { signAuthorization, specHeader, tokenBalance } from "../support/payments.ts";

type Answer = { status: number; headers: Headers; body: Record<string, unknown> };

const run = promisify(execFile);

// One indexer (`ponder start`, relayer anvil #4) and two API replicas (`ponder serve`, relayers #6
// and #7) on one Postgres database, as docs/operations.md deploys them; then the chain and the
// database fail under them. The database is a private cluster of this test's own (it is
// restarted), so the file runs once, in the Postgres project.
describe.runIf(testDatabase === "postgres")("API replicas on one Postgres", () => {
  let postgres: PrivatePostgres | undefined;
  let devnet: TestDevnet;
  let slot: DatabaseSlot;
  let indexer: Indexer;
  /** The two replicas serving (relayers #6 and #7). */
  const replicas: Indexer[] = [];
  /** A third replica started on #6 too: it must have refused to start. */
  let clash: Indexer;
  const started: Indexer[] = [];
  /** Each process's own IPFS_DIR, under one temporary directory: unused on Postgres, where IPFS content is in the service store. */
  let ipfsDir: string | undefined;
  let lender: { address: Hex; privateKey: Hex };
  let treasury: Hex;
  let borrower: Hex;
  const PRICE = 10_000n;
  const rpc = (method: string, params: unknown[] = []) => devnetRpc(devnet.manifest.rpcUrl, method, params);
  const treasuryUsdt = () => tokenBalance(devnet.manifest.rpcUrl, devnet.manifest.tokens.USDT.address, treasury);
  const pay = async () =>
    specHeader(
      await signAuthorization(lender.privateKey, devnet.manifest.tokens.USDT, { to: treasury }),
      devnet.manifest.tokens.USDT.address,
    );
  const screen = async (replica: Indexer, header: string, wallet = borrower): Promise<Answer> => {
    const res = await fetch(`${replica.url}/api/lender/screen`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-payment": header },
      body: JSON.stringify({ walletAddress: wallet, callerAddress: lender.address }),
    });
    return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
  };
  /** The screen's content: what differs between two payments for it (time of answer, billing) left out. */
  const content = ({ body }: Answer) => {
    const { screenedAt: _at, x402Billing: _billing, ...rest } = body;
    return rest;
  };
  /**
   * Screens `wallet` on both replicas with the chain's block production paused, so both compute on
   * the same indexed head; the two settlements are then mined together.
   */
  const screenOnBoth = async (wallet: Hex) => {
    await rpc("evm_setAutomine", [false]);
    try {
      const calls = replicas.map(async (r) => screen(r, await pay(), wallet));
      await waitFor(
        "both settlements in the mempool",
        async () => (Number(((await rpc("txpool_status")) as { pending: string }).pending) >= 2 ? true : undefined),
        undefined,
        60_000,
      );
      await rpc("evm_mine");
      return await Promise.all(calls);
    } finally {
      await rpc("evm_setAutomine", [true]);
    }
  };
  const ledgerRows = async (nonce: Hex) => {
    const client = new pg.Client({
      connectionString: slot.store.kind === "postgres" ? slot.store.connectionString : "",
    });
    await client.connect();
    try {
      return (
        await client.query<{ status: string; transaction: string | null }>(
          `select status, transaction from service.payment where nonce = $1`,
          [nonce],
        )
      ).rows;
    } finally {
      await client.end();
    }
  };
  /** An API process of this deployment: the indexer, or a replica settling with anvil key #relayer. */
  const service = async (relayer?: number, extra: Record<string, string> = {}) => {
    const own: Record<string, string> =
      relayer === undefined ? {} : { X402_RELAYER_PRIVATE_KEY: anvilDevAccount(relayer).privateKey, ...extra };
    const serving = await startIndexer(
      { DEVNET_MANIFEST: devnet.manifestPath, ...slot.env, IPFS_DIR: join(ipfsDir!, String(started.length)), ...own },
      { command: relayer === undefined ? "start" : "serve" },
    );
    started.push(serving);
    return serving;
  };
  const ready = (r: Indexer) =>
    waitFor(
      "the replica's API",
      async () => ((await fetch(`${r.url}/api/x402/config`).catch(() => undefined))?.ok ? true : undefined),
      r,
    );

  /** Anvil's process state (Linux): "T" once SIGSTOP has taken effect. */
  const anvilState = () => /^State:\s+(\w)/m.exec(readFileSync(`/proc/${devnet.anvil.pid}/status`, "utf8"))?.[1];
  const health = async (r: Indexer) => {
    const res = await fetch(`${r.url}/api/health/integrations`);
    return {
      status: res.status,
      body: (await res.json()) as { status: string; integrations: Record<string, { status: string }> },
    };
  };
  const healthy = (r: Indexer) =>
    waitFor(
      "health to be ok",
      async () => ((await health(r).catch(() => undefined))?.status === 200 ? true : undefined),
      r,
      60_000,
    );
  const usedOnChain = (nonce: Hex) =>
    createPublicClient({ transport: http(devnet.manifest.rpcUrl) }).readContract({
      address: devnet.manifest.tokens.USDT.address,
      abi: devStablecoinAbi,
      functionName: "authorizationState",
      args: [lender.address, nonce],
    });
  /**
   * "Charged with data, or neither": an answer with data means the authorization was used on chain,
   * a refusal that says nothing was charged means it was not (settlement_pending: not known yet).
   */
  const expectConsistent = async (answer: Answer, nonce: Hex) => {
    if (answer.status !== 200 && answer.body.code === "settlement_pending") return;
    expect({ status: answer.status, used: await usedOnChain(nonce) }).toEqual({
      status: answer.status,
      used: answer.status === 200,
    });
  };
  /** A client that retries a refused call with the same payment until it gets its data. */
  const payUntilAnswered = async (replica: Indexer, header: string) => {
    const refusals: string[] = [];
    for (let attempt = 0; attempt < 60; attempt++) {
      const answer = await screen(replica, header).catch(
        (error: Error) => ({ status: 0, body: { code: error.message } }) as unknown as Answer,
      );
      if (answer.status === 200) return answer;
      refusals.push(
        `${answer.status} ${String(answer.body.code ?? (answer.body.error as { code?: string } | undefined)?.code ?? "")}`,
      );
      await new Promise((r) => setTimeout(r, 500));
    }
    throw new Error(`no answer with data after 60 attempts: ${refusals.join(", ")}`);
  };

  beforeAll(async () => {
    ipfsDir = mkdtempSync(join(tmpdir(), "replicas-ipfs-"));
    postgres = await startPrivatePostgres();
    // A short history (~2k transfers, not a year's ~7k): what is checked here is how the processes
    // share one database, not what is indexed, which the indexer indexes in full before any test.
    devnet = await startTestDevnet({ wallets: 4, months: 3, seed: 31 });
    treasury = devnet.manifest.service.treasury.address;
    lender = devnet.manifest.lenders[0] as unknown as typeof lender;
    borrower = devnet.manifest.personas.salaried!.address;
    slot = databaseSlot("postgres", postgres.url);
    await slot.prepare();
    indexer = await service();
    // `ponder serve` needs the schema the indexer creates; the replicas then start during the backfill.
    await waitFor(
      "the indexer's schema",
      () =>
        slot.read(async (q) =>
          (await q(`select 1 from information_schema.schemata where schema_name = '${slot.schema}'`)).length
            ? true
            : undefined,
        ),
      indexer,
    );
    // Two of them on relayer #6: whichever takes the relayer's lock second must refuse to start.
    const [one, other, second] = await Promise.all([service(6), service(6), service(7)]);
    clash = await waitFor("one replica on relayer #6 to exit", async () =>
      [one, other].find((r) => r.child.exitCode !== null),
    );
    const first = clash === one ? other : one;
    replicas.push(first, second);
    await Promise.all([ready(first), ready(second)]);
    await waitForBlock(indexer, devnet.manifest.headBlock);
  }, 240_000);

  afterAll(async () => {
    if (devnet) process.kill(devnet.anvil.pid, "SIGCONT");
    await rpc("evm_setAutomine", [true]).catch(() => undefined);
    await Promise.all(started.map((r) => r.stop()));
    await devnet?.stop();
    postgres?.stop();
    if (ipfsDir) rmSync(ipfsDir, { recursive: true, force: true });
  });

  describe("sharing one database", () => {
    it("both replicas answer the same screen identically, and neither keeps a result the other's newer data made stale", async () => {
      const [a, b] = await screenOnBoth(borrower);
      expect([a!.status, b!.status]).toEqual([200, 200]);
      expect(content(a!)).toEqual(content(b!));
      expect(a!.body.cached).toBe(false);

      // New activity for the borrower: both replicas answer from it (the first one's cached result is
      // keyed on the wallet's indexed position, read from the shared database at every call).
      const sender = createWalletClient({
        account: privateKeyToAccount(lender.privateKey),
        transport: http(devnet.manifest.rpcUrl),
      });
      const hash = await sender.writeContract({
        chain: null,
        address: devnet.manifest.tokens.USDT.address,
        abi: devStablecoinAbi,
        functionName: "transfer",
        args: [borrower, 5_000_000n],
      });
      const { blockNumber } = await waitForReceipt(
        createPublicClient({
          transport: http(devnet.manifest.rpcUrl),
        }),
        { hash, pollingInterval: 50 },
      );
      const block = Number(blockNumber);
      await waitForBlock(indexer, block);
      const [c, d] = await screenOnBoth(borrower);
      expect([c!.status, d!.status]).toEqual([200, 200]);
      expect(content(c!)).toEqual(content(d!));
      expect([c!.body.cached, d!.body.cached]).toEqual([false, false]);
      const count = (x: Answer) => (x.body.whatLendersAlreadySee as { transactionCount: number }).transactionCount;
      expect(count(c!)).toBe(count(a!) + 1);
    });

    it("a payment settled through one replica is answered by the other with the stored answer and not charged again; on another request it is refused", async () => {
      const [first, second] = replicas as [Indexer, Indexer];
      const before = await treasuryUsdt();
      const header = await pay();
      const paid = await screen(first, header);
      expect(paid.status).toBe(200);
      const replayed = await screen(second, header);
      expect(replayed.status).toBe(200);
      expect(replayed.headers.get("x-payment-replayed")).toBe("true");
      expect(replayed.body).toEqual(paid.body);
      const other = Object.values(devnet.manifest.personas).find((p) => p.address !== borrower)!.address;
      const reused = await screen(second, header, other);
      expect(reused.status).toBe(409);
      expect((reused.body.error as { code: string }).code).toBe("payment_reused");
      expect((await treasuryUsdt()) - before).toBe(PRICE);
    });

    it("50 concurrent copies of one payment spread across both replicas settle it exactly once, and every copy gets that one answer", async () => {
      const before = await treasuryUsdt();
      const signed = await signAuthorization(lender.privateKey, devnet.manifest.tokens.USDT, { to: treasury });
      const header = specHeader(signed, devnet.manifest.tokens.USDT.address);
      const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => screen(replicas[i % 2]!, header)));
      // A copy that waited too long for the settling one (or, on a loaded machine, whose verification
      // could not be done in time) is told to retry with the same payment, nothing charged.
      for (const a of answers) {
        if (a.status !== 200)
          expect({ status: a.status, code: a.body.code }).toEqual({
            status: 503,
            code: expect.stringMatching(/^settlement_(pending|unavailable)$/),
          });
      }
      const retried = await Promise.all(
        answers.map((a, i) => (a.status === 200 ? a : screen(replicas[i % 2]!, header))),
      );
      expect(retried.map((a) => a.status)).toEqual(retried.map(() => 200));
      expect(new Set(retried.map((a) => JSON.stringify(a.body))).size).toBe(1);
      expect((await treasuryUsdt()) - before).toBe(PRICE);
      expect(await ledgerRows(signed.authorization.nonce)).toEqual([
        { status: "settled", transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) },
      ]);
    });

    it("a replica with X402_SETTLEMENT_WORKER=off answers deferred payments and leaves their settlement to the processes that run a worker", async () => {
      // Relayer #8 for this one: it still settles first what passes a cap, so it holds a key of its own.
      const answering = await service(8, { X402_SETTLEMENT: "deferred", X402_SETTLEMENT_WORKER: "off" });
      await ready(answering);
      const before = await treasuryUsdt();
      const signed = await signAuthorization(lender.privateKey, devnet.manifest.tokens.USDT, { to: treasury });
      const answer = await screen(answering, specHeader(signed, devnet.manifest.tokens.USDT.address));
      expect(answer.status).toBe(200);
      const settled = await waitFor(
        "the deferred payment settled by another process",
        async () => {
          const [row] = await slot.read((q) =>
            q(`select status, settler from service.payment where nonce = '${signed.authorization.nonce}'`),
          );
          return row?.status === "settled" ? (row as { settler: string }) : undefined;
        },
        answering,
        60_000,
      );
      const others = [4, 6, 7].map((n) => anvilDevAccount(n).address);
      expect(others).toContain(settled.settler);
      expect((await treasuryUsdt()) - before).toBe(PRICE);
      await answering.stop();
    });

    it("a monitor's events are delivered once each, whichever process's webhook worker takes them", async () => {
      // A receiver counting each webhook-id: every process (the indexer and both replicas) runs a worker.
      const seen = new Map<string, { type: string; wallet: string }[]>();
      const receiver = createServer((req, res) => {
        let body = "";
        req.on("data", (chunk) => (body += chunk));
        req.on("end", () => {
          const { type, data } = JSON.parse(body) as { type: string; data: { wallet: string } };
          const id = req.headers["webhook-id"] as string;
          seen.set(id, [...(seen.get(id) ?? []), { type, wallet: data.wallet }]);
          res.writeHead(204).end();
        });
      });
      await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
      try {
        const port = (receiver.address() as AddressInfo).port;
        const created = await fetch(`${replicas[0]!.url}/api/monitors`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-payment": await pay() },
          body: JSON.stringify({
            wallets: [borrower],
            events: ["sanctions.listed", "sanctions.delisted"],
            webhook: { url: `http://127.0.0.1:${port}/` },
            callerAddress: lender.address,
          }),
        });
        expect(created.status, await created.clone().text()).toBe(200);
        const { id } = ((await created.json()) as { monitors: { id: string }[] }).monitors[0]!;
        const store = new pg.Client({
          connectionString: slot.store.kind === "postgres" ? slot.store.connectionString : "",
        });
        await store.connect();
        try {
          const monitorRow = async () =>
            (await store.query<{ snapshot: unknown }>("select snapshot from service.monitor where id = $1", [id]))
              .rows[0];
          await waitFor("the first screen", async () => ((await monitorRow())?.snapshot ? true : undefined));
          // Listed, then removed (the docs' script): two events, each to be delivered once.
          for (const [flag, count] of [
            [[], 1],
            [["--remove"], 2],
          ] as const) {
            await run("npx", ["tsx", "docs/examples/sanction-wallet.ts", borrower, ...flag], {
              env: { ...process.env, DEVNET_MANIFEST: devnet.manifestPath },
            });
            await waitFor(
              `event ${count} delivered`,
              async () => (seen.size >= count ? true : undefined),
              indexer,
              60_000,
            );
          }
          // A second send would come within the workers' next rounds (every 500 ms): give it a few.
          await new Promise((r) => setTimeout(r, 3_000));
          expect([...seen.values()].map((arrivals) => arrivals.map((a) => a.type))).toEqual([
            ["sanctions.listed"],
            ["sanctions.delisted"],
          ]);
          const statuses = await store.query<{ status: string; attempts: number }>(
            "select status, attempts from service.webhook_delivery d join service.monitor_event e on e.id = d.event_id where e.monitor_id = $1",
            [id],
          );
          expect(statuses.rows).toEqual([
            { status: "delivered", attempts: 1 },
            { status: "delivered", attempts: 1 },
          ]);
        } finally {
          await store.end();
        }
      } finally {
        receiver.close();
      }
    });

    it("a second process on a relayer key already in use refuses to start, and says why", async () => {
      expect(clash.child.exitCode).toBe(1);
      expect(clash.output()).toContain(
        `Another process already settles payments with relayer ${anvilDevAccount(6).address}`,
      );
      // The replica that holds the key serves.
      expect((await fetch(`${replicas[0]!.url}/api/x402/config`)).status).toBe(200);
    });
  });

  describe("IPFS content, shared through the service store", () => {
    /** What the content tests pinned through replica A, for the restarted replica to serve. */
    const pinned: { statement?: { cid: string; csvCid: string }; reportId?: string } = {};
    const paidPost = async (replica: Indexer, path: string, body: Record<string, unknown>, value = PRICE) => {
      const header = specHeader(
        await signAuthorization(lender.privateKey, devnet.manifest.tokens.USDT, { to: treasury, value }),
        devnet.manifest.tokens.USDT.address,
      );
      const res = await fetch(`${replica.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-payment": header },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, any> };
    };
    const ipfs = async (replica: Indexer, cid: string) => {
      const res = await fetch(`${replica.url}/ipfs/${cid}`);
      return { status: res.status, type: res.headers.get("content-type"), bytes: Buffer.from(await res.arrayBuffer()) };
    };
    const verify = async (replica: Indexer, id: string) =>
      (await (await fetch(`${replica.url}/api/agent/verify/${id}`)).json()) as Record<string, any>;
    /** The block of pinned content holding `part`, a row of service.ipfs_block, to forge and restore. */
    const block = async (part: string | Uint8Array) => (await storedBlock(blockLocation(slot.store, ipfsDir!), part))!;

    it("a statement made through one replica is served byte-identical by the other and by the indexer; a block changed in the table is refused by all", async () => {
      const [a, b] = replicas as [Indexer, Indexer];
      const made = await paidPost(a, "/api/agent/statement", { walletAddress: borrower, period: "12M" });
      expect(made.status, JSON.stringify(made.body)).toBe(200);
      pinned.statement = { cid: made.body.cid, csvCid: made.body.csvCid };
      for (const cid of [made.body.cid, made.body.csvCid]) {
        const [fromA, fromB, fromIndexer] = await Promise.all([ipfs(a, cid), ipfs(b, cid), ipfs(indexer, cid)]);
        expect([fromA.status, fromB.status, fromIndexer.status]).toEqual([200, 200, 200]);
        expect([fromB.bytes.equals(fromA.bytes), fromIndexer.bytes.equals(fromA.bytes), fromB.type]).toEqual([
          true,
          true,
          fromA.type,
        ]);
      }
      expect((await ipfs(b, made.body.cid)).type).toBe("application/pdf");

      // The CSV's block, one byte changed in the table: no process serves it; restored, every one does.
      const csv = (await ipfs(a, made.body.csvCid)).bytes;
      const stored = await block(csv.subarray(0, 200));
      expect(stored.bytes.equals(csv)).toBe(true);
      const forged = Buffer.from(csv);
      forged[forged.length - 3]! ^= 1;
      await stored.overwrite(forged);
      try {
        for (const r of [a, b, indexer]) expect((await ipfs(r, made.body.csvCid)).status).toBe(500);
      } finally {
        await stored.overwrite(csv);
      }
      for (const r of [a, b, indexer]) expect((await ipfs(r, made.body.csvCid)).bytes.equals(csv)).toBe(true);
    });

    it("a passport issued through one replica verifies through the other, its content checked against the CID; changed in the table, it is tampered on every replica", async () => {
      const [a, b] = replicas as [Indexer, Indexer];
      const issued = await paidPost(
        a,
        "/api/agent/report",
        { walletAddress: borrower, callerAddress: lender.address },
        10n * PRICE,
      );
      expect(issued.status, JSON.stringify(issued.body)).toBe(200);
      const id = issued.body.reportId as string;
      pinned.reportId = id;
      await waitForBlock(indexer, Number(await rpc("eth_blockNumber")));
      const intact = {
        status: "confirmed",
        valid: true,
        integrity: { checked: true, contentMatchesCid: true, attestationMatchesContent: true },
      };
      expect(await verify(b, id)).toMatchObject(intact);
      expect((await ipfs(b, issued.body.ipfsCid)).type).toBe("application/json");

      const stored = await block(`"reportId":"${id}"`);
      const text = stored.bytes.toString("utf8");
      const score = issued.body.scores.reputation as number;
      await stored.overwrite(Buffer.from(text.replace(`"reputation":${score}`, `"reputation":${(score + 1) % 100}`)));
      try {
        for (const r of [a, b])
          expect(await verify(r, id)).toMatchObject({
            status: "tampered",
            valid: false,
            integrity: { checked: true, contentMatchesCid: false },
          });
      } finally {
        await stored.overwrite(stored.bytes);
      }
      expect(await verify(b, id)).toMatchObject(intact);
    });

    it("a replica started again serves and verifies what was pinned before; only the indexer opens the data listener, a replica only when told to", async () => {
      expect((await fetch(`${indexer.dataUrl}/metrics`)).status).toBe(200);
      for (const r of replicas) {
        await expect(fetch(`${r.dataUrl}/metrics`)).rejects.toThrow();
        expect(r.output()).not.toContain("[data] listening");
      }
      // The second replica (relayer #7) stopped and started again, this time with a data listener.
      await replicas[1]!.stop();
      const again = await service(7, { DATA_LISTENER: "on" });
      await ready(again);
      replicas[1] = again;
      expect((await fetch(`${again.dataUrl}/metrics`)).status).toBe(200);
      const { cid, csvCid } = pinned.statement!;
      for (const c of [cid, csvCid])
        expect((await ipfs(again, c)).bytes.equals((await ipfs(replicas[0]!, c)).bytes)).toBe(true);
      expect(await verify(again, pinned.reportId!)).toMatchObject({
        status: "confirmed",
        integrity: { checked: true, contentMatchesCid: true },
      });
    });
  });

  describe("faults they recover from without a restart", () => {
    it("the RPC frozen: health says it is down (503); resumed: ok (200) again, and a payment made during the freeze is charged once, with its data", async () => {
      const [first, second] = replicas as [Indexer, Indexer];
      const signed = await signAuthorization(lender.privateKey, devnet.manifest.tokens.USDT, { to: treasury });
      const header = specHeader(signed, devnet.manifest.tokens.USDT.address);
      expect((await health(first)).status).toBe(200);
      // Each replica has verified a payment lately. (Without one, @x402/evm 2.27 checks the token's
      // code in the background and drops that check when an earlier RPC call of the verification
      // fails: under a frozen chain its rejection goes unhandled, and Ponder exits on it. Reported.)
      for (const r of replicas) expect((await screen(r, await pay())).status).toBe(200);

      const before = await treasuryUsdt();
      process.kill(devnet.anvil.pid, "SIGSTOP");
      let during: Answer;
      try {
        await waitFor("anvil to stop", async () => (anvilState() === "T" ? true : undefined));
        const [report, answer] = await Promise.all([health(first), screen(second, header)]);
        expect(anvilState(), "anvil was resumed during the freeze by something else").toBe("T");
        expect(report.status, JSON.stringify(report.body)).toBe(503);
        expect(report.body.integrations.rpc!.status, JSON.stringify(report.body.integrations.rpc)).toBe("down");
        during = answer;
      } finally {
        process.kill(devnet.anvil.pid, "SIGCONT");
      }
      // The chain answers again: health is ok again on both replicas, nothing restarted.
      await Promise.all([healthy(first), healthy(second)]);
      await expectConsistent(during, signed.authorization.nonce);
      const paid = await payUntilAnswered(second, header);
      expect(paid.status).toBe(200);
      expect(await usedOnChain(signed.authorization.nonce)).toBe(true);
      expect((await treasuryUsdt()) - before).toBe(PRICE);
      expect(await ledgerRows(signed.authorization.nonce)).toEqual([
        { status: "settled", transaction: expect.any(String) },
      ]);
      // A new payment on the other replica works too.
      expect((await screen(first, await pay())).status).toBe(200);
    });

    it("Postgres restarted under the running service: every process recovers by itself; payments made across the restart are charged with their data, or not at all", async () => {
      const before = await treasuryUsdt();
      const payments = await Promise.all(
        Array.from({ length: 6 }, async () => {
          const signed = await signAuthorization(lender.privateKey, devnet.manifest.tokens.USDT, { to: treasury });
          return { nonce: signed.authorization.nonce, header: specHeader(signed, devnet.manifest.tokens.USDT.address) };
        }),
      );
      // The payments go out one after another, alternating replicas, while the server restarts.
      const restarted = postgres!.restart();
      const first = await Promise.all(
        payments.map(async (p, i) => {
          await new Promise((r) => setTimeout(r, i * 100));
          return screen(replicas[i % 2]!, p.header).catch(
            (error: Error) => ({ status: 0, headers: new Headers(), body: { error: error.message } }) as Answer,
          );
        }),
      );
      await restarted;
      for (const r of [...replicas, indexer]) expect(r.child.exitCode, r.output().slice(-2000)).toBeNull();
      await Promise.all([...replicas, indexer].map(healthy));
      // Each process holds its relayer's lock again, on a new connection.
      for (const r of [...replicas, indexer])
        await waitFor(
          "the relayer lock taken again",
          async () => (r.output().includes("relayer lock taken again") ? true : undefined),
          r,
          30_000,
        );
      for (const [i, p] of payments.entries()) await expectConsistent(first[i]!, p.nonce);

      // Retried as they were, the payments get their data, charged once. Except one claimed just
      // before the server went down, whose request could not record its release: its row stays
      // `pending` until it counts as abandoned (ABANDONED_AFTER_MS, 2 minutes), and a retry waits
      // for it. It was not charged; it is left out here (see the report of issue 15, item 5).
      const rows = await Promise.all(payments.map(async (p) => (await ledgerRows(p.nonce))[0]?.status));
      const retried = await Promise.all(
        payments.map(async (p, i) =>
          first[i]!.status === 200 || rows[i] === "pending" ? first[i]! : payUntilAnswered(replicas[i % 2]!, p.header),
        ),
      );
      for (const [i, p] of payments.entries()) {
        expect({ status: retried[i]!.status, used: await usedOnChain(p.nonce) }).toEqual(
          rows[i] === "pending" && first[i]!.status !== 200
            ? { status: first[i]!.status, used: false }
            : { status: 200, used: true },
        );
      }
      // New payments are served by both replicas, and the treasury gained the price of each answer with data.
      const fresh = await Promise.all(replicas.map(async (r) => screen(r, await pay())));
      expect(fresh.map((a) => a.status)).toEqual([200, 200]);
      const answered = retried.filter((a) => a.status === 200).length + fresh.length;
      expect((await treasuryUsdt()) - before).toBe(PRICE * BigInt(answered));
      // The indexer follows the chain again: a new block is indexed and served.
      const block = Number(await rpc("eth_blockNumber"));
      await waitForBlock(indexer, block, 60_000);
    });
  });
});
