import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { base36 } from "multiformats/bases/base36";
import { CID } from "multiformats/cid";
import puppeteer, { type Browser } from "puppeteer-core";
import { type Hex, keccak256, parseEventLogs, toBytes, toEventSelector } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { reputationReporterAbi } from "../../abis/ReputationReporter.ts";
import { UNPAID_REASON } from "../../api/passport/report-route.ts";
import { createReporter } from "../../api/passport/reporter.ts";
import type { Ledger, PaymentKey } from "../../api/payments/ledger/ledger.ts";
import { createSqlLedger } from "../../api/payments/ledger/sql/sql-ledger.ts";
import { openServiceStore } from "../../api/store/store.ts";
import { reputationReporterArtifact } from "../../contracts/artifacts.ts";
import { anvilDevAccount } from "../../devnet/accounts.ts";
import { devnetClients } from "../../devnet/chain.ts";
import { rpc } from "../../devnet/rpc.ts";
import { waitForReceipt } from "../../shared/receipt.ts";
import { artifactsDir } from "../support/artifacts.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import {
  healthyIntegrations,
  type Indexer,
  startIndexer,
  testDatabase,
  waitFor,
  waitForBlock,
} from "../support/indexer.ts";
import { blockLocation, storedBlock } from "../support/ipfs-blocks.ts";
import { signAuthorization, specHeader, tokenBalance } from "../support/payments.ts";

const exec = promisify(execFile);
const ORIGINAL_EVENT = "FinancialReportPublished(bytes32,string,address,address,uint8,uint8,string,string,uint256)";

// Passports end to end: issued through the paid route (IPFS + chain), verified from the indexed rows
// by id, CID and hash, through their lifecycle, and read by a person in Chromium.
describe(`passports: report and verify (${testDatabase})`, () => {
  let env: IndexedDevnet;
  let devnet: TestDevnet;
  let indexer: Indexer;
  /** The service's settings (env), to start it again on the same database and IPFS directory. */
  let serviceEnv: Record<string, string>;
  let ipfsDir: string;
  let original: Hex;
  let lender: { address: Hex; privateKey: Hex };
  let treasury: Hex;
  const issued: Record<string, any> = {};
  const rpcUrl = () => devnet.manifest.rpcUrl;
  const usdt = () => devnet.manifest.tokens.USDT;
  const treasuryUsdt = () => tokenBalance(rpcUrl(), usdt().address, treasury);
  const persona = (name: string) => devnet.manifest.personas[name]!.address as Hex;

  const api = async (method: string, path: string, headers: Record<string, string> = {}, body?: unknown) => {
    const res = await fetch(`${indexer.url}${path}`, {
      method,
      headers: { ...(body ? { "content-type": "application/json" } : {}), ...headers },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return {
      status: res.status,
      headers: res.headers,
      body: res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : text,
    };
  };
  /** The service's ledger, read directly: on PGlite only while the service is stopped. */
  const withLedger = async <T>(fn: (ledger: Ledger) => Promise<T>): Promise<T> => {
    const store = await openServiceStore(env.slot.store);
    try {
      return await fn(createSqlLedger(store.db));
    } finally {
      await store.close();
    }
  };
  const pay = async (value = 100_000n) => ({
    "x-payment": specHeader(
      await signAuthorization(lender.privateKey, usdt(), { to: treasury, value }),
      usdt().address,
    ),
  });
  const issue = async (wallet: Hex, extra: Record<string, unknown> = {}) =>
    api("POST", "/api/agent/report", await pay(), { walletAddress: wallet, callerAddress: lender.address, ...extra });
  const verify = (id: string) => api("GET", `/api/agent/verify/${id}`);
  const indexedUpTo = async () => waitForBlock(indexer, Number(BigInt(await rpc<string>(rpcUrl(), "eth_blockNumber"))));
  const asReporter = () => devnetClients(rpcUrl(), devnet.manifest.service.reporter.privateKey as Hex);
  /** The stored block of a passport document: a file under IPFS_DIR (PGlite) or a row of service.ipfs_block (Postgres). */
  const documentBlock = async (text: string) => (await storedBlock(blockLocation(env.slot.store, ipfsDir), text))!;
  /** Transactions from `from` waiting in anvil's mempool (automine off). */
  const pooled = async (from: string) => {
    const pool = await rpc<{ pending: Record<string, Record<string, { hash: Hex }>> }>(rpcUrl(), "txpool_content");
    return Object.entries(pool.pending).flatMap(([sender, txs]) =>
      sender.toLowerCase() === from.toLowerCase() ? Object.values(txs).map((tx) => tx.hash) : [],
    );
  };
  const send = async (client: ReturnType<typeof devnetClients>, hash: Promise<Hex>) => {
    const receipt = await waitForReceipt(client.publicClient, { hash: await hash, pollingInterval: 50 });
    expect(receipt.status).toBe("success");
    return receipt;
  };

  beforeAll(async () => {
    env = await indexedDevnet({ wallets: 4, months: 12, seed: 11 });
    devnet = env.devnet;
    lender = devnet.manifest.lenders[1] as unknown as typeof lender;
    treasury = devnet.manifest.service.treasury.address;
    // A second reporter standing in for the original OnchainReporter on Celo: published through the
    // original's function, it emits the original's event (same signature, checked below).
    const deployer = devnetClients(rpcUrl(), devnet.manifest.deployer.privateKey as Hex);
    const deployed = await send(
      deployer,
      deployer.walletClient.deployContract({
        ...reputationReporterArtifact,
        args: [devnet.manifest.service.reporter.address],
      }),
    );
    original = deployed.contractAddress!.toLowerCase() as Hex;
    await send(
      asReporter(),
      asReporter().walletClient.writeContract({
        address: original,
        abi: reputationReporterAbi,
        functionName: "publishFinancialReport",
        args: [persona("merchant"), lender.address, 77, 70, "2000-4000 USD", "REP-ORIGINAL01", `0x${"ab".repeat(32)}`],
      }),
    );
    ipfsDir = mkdtempSync(join(tmpdir(), "passport-ipfs-"));
    serviceEnv = { IPFS_DIR: ipfsDir, ONCHAIN_REPORTER_ADDRESS: original, VERIFY_RATE_LIMIT_PER_MINUTE: "120" };
    indexer = await env.index(serviceEnv);
    await indexedUpTo();
  }, 300_000);

  afterAll(async () => {
    await indexer?.stop(); // the service started again by a test, if any (env.stop() stops the first)
    await env?.stop();
    if (ipfsDir) rmSync(ipfsDir, { recursive: true, force: true });
  });

  it("reports IPFS and the reporter in health", async () => {
    // The node opens on this first check; until it answers, health says it is opening.
    const health = await healthyIntegrations(indexer);
    expect(health.body.integrations.ipfs).toMatchObject({ status: "ok", writable: true });
    expect(health.body.integrations.ipfs?.pinnedCount).toBeGreaterThanOrEqual(1);
    expect(health.body.integrations.reporter).toMatchObject({
      status: "ok",
      codePresent: true,
      holdsReporterRole: true,
      contract: devnet.manifest.reporter.address,
    });
  });

  it("issues a passport (charged 0.10) that goes from pending to confirmed, verifiable by id, CID and hash", async () => {
    const before = await treasuryUsdt();
    const res = await issue(persona("salaried"));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const p = res.body;
    issued.first = p;
    expect(p.reportId).toMatch(/^REP-[A-Z0-9]{10}$/);
    expect(p.x402Billing).toMatchObject({ chargedUsdt: "0.10", chargedUnits: "100000", token: "USDT" });
    expect(await treasuryUsdt()).toBe(before + 100_000n);
    expect(p.attestation).toMatchObject({ contract: devnet.manifest.reporter.address, chainId: 42220 });
    expect(["pending", "confirmed"]).toContain(p.attestation.status);
    expect(p.reportHash).toBe(p.ipfsCid);
    expect(p.supersedes).toBeNull();
    expect(Date.parse(p.expiresAt) - Date.parse(p.issuedAt)).toBe(90 * 86_400_000);
    expect(p.verifyUrl).toBe(`${indexer.url}/api/agent/verify/${p.reportId}`);

    // Before the indexer has the event: pending (read from the contract); then confirmed.
    const early = await verify(p.reportId);
    expect(["pending", "confirmed"]).toContain(early.body.status);
    console.log(`attestation.status in the answer: ${p.attestation.status}; first verify: ${early.body.status}`);
    await indexedUpTo();
    const byId = await verify(p.reportId);
    expect(byId.status).toBe(200);
    expect(byId.body).toMatchObject({
      status: "confirmed",
      valid: true,
      reportId: p.reportId,
      walletAddress: persona("salaried"),
      source: "reputation-reporter",
      supersededBy: null,
      revokedAt: null,
    });
    expect(byId.body.scores).toEqual({ financialHealth: p.scores.financialHealth, reputation: p.scores.reputation });
    expect(byId.body.integrity).toMatchObject({
      checked: true,
      contentMatchesCid: true,
      attestationMatchesContent: true,
    });
    expect(byId.body.report).toMatchObject({
      reportId: p.reportId,
      walletAddress: persona("salaried"),
      buyer: lender.address.toLowerCase(),
      modelVersion: p.modelVersion,
    });
    expect(byId.body.attestation).toMatchObject({ transaction: p.attestation.transaction, block: p.attestation.block });
    for (const id of [p.ipfsCid, p.contentHash, keccak256(toBytes(p.reportId))]) {
      const other = await verify(id);
      expect(other.body, id).toMatchObject({ status: "confirmed", reportId: p.reportId });
    }
    // The IPFS content is the canonical document, and its CID is what the chain attests.
    // Pinned with its media type recorded: served as JSON, not sniffed.
    const doc = await api("GET", `/ipfs/${p.ipfsCid}`);
    expect([doc.status, doc.headers.get("content-type")]).toEqual([200, expect.stringContaining("application/json")]);
    expect(doc.body).toMatchObject({ reportId: p.reportId });

    // The contract's own view agrees.
    const [exists, a] = await asReporter().publicClient.readContract({
      address: devnet.manifest.reporter.address,
      abi: reputationReporterAbi,
      functionName: "verifyReport",
      args: [p.reportId],
    });
    expect(exists).toBe(true);
    expect({
      wallet: a.wallet.toLowerCase(),
      reputation: a.reputationScore,
      health: a.financialHealthScore,
      hash: a.reportHash,
      loan: a.loanCapacity,
    }).toEqual({
      wallet: byId.body.walletAddress,
      reputation: byId.body.scores.reputation,
      health: byId.body.scores.financialHealth,
      hash: byId.body.reportHash,
      loan: byId.body.loanCapacity,
    });

    // Screen and analyze point at it.
    const screen = await api(
      "POST",
      "/api/lender/screen",
      { "x-payment": (await pay(10_000n))["x-payment"] },
      { walletAddress: persona("salaried"), callerAddress: lender.address },
    );
    expect(screen.body.verification).toEqual({
      hasOnchainPassport: true,
      reportId: p.reportId,
      verifyUrl: p.verifyUrl,
      onchainReporterContract: devnet.manifest.reporter.address,
    });
    const analyze = await api(
      "POST",
      "/api/agent/analyze",
      { "x-payment": (await pay(10_000n))["x-payment"] },
      { walletAddress: persona("salaried"), callerAddress: lender.address, fields: ["attestation"] },
    );
    expect(analyze.body.attestation).toMatchObject({ reportId: p.reportId, reportHash: p.ipfsCid });
  });

  it("a second report of the same wallet supersedes the first", async () => {
    const res = await issue(persona("salaried"), { expiresInDays: 30 });
    expect(res.status).toBe(200);
    issued.second = res.body;
    expect(res.body.supersedes).toBe(issued.first.reportId);
    await indexedUpTo();
    expect((await verify(issued.first.reportId)).body).toMatchObject({
      status: "superseded",
      valid: false,
      supersededBy: res.body.reportId,
    });
    expect((await verify(res.body.reportId)).body).toMatchObject({
      status: "confirmed",
      valid: true,
      supersedes: issued.first.reportId,
    });
  });

  it("issues a passport paid from prepaid credit: its price held, then spent once it is published", async () => {
    const bought = await api("POST", "/api/credit", await pay(200_000n), { amount: "0.20" });
    expect(bought.status, JSON.stringify(bought.body)).toBe(200);
    const treasury = await treasuryUsdt();
    const res = await api(
      "POST",
      "/api/agent/report",
      { authorization: `Bearer ${bought.body.creditToken}` },
      { walletAddress: persona("dormant"), callerAddress: lender.address },
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.reportId).toMatch(/^REP-[A-Z0-9]{10}$/);
    expect(res.headers.get("credit-balance")).toBe("100000");
    expect(res.headers.get("credit-spend")).toBeTruthy();
    // Nothing settled per call: only the attestation went on chain.
    expect(await treasuryUsdt()).toBe(treasury);
    await indexedUpTo();
    expect((await verify(res.body.reportId)).body).toMatchObject({
      status: "confirmed",
      valid: true,
      walletAddress: persona("dormant"),
      revokedAt: null,
    });
  });

  it("shows the passport to a person: the page in Chromium, and the badge", async () => {
    const p = issued.second;
    const badge = await fetch(`${p.verifyUrl}/badge.svg`);
    expect(badge.headers.get("content-type")).toMatch(/^image\/svg\+xml/);
    expect(await badge.text()).toContain(">valid<");
    // Same URL, JSON to API clients.
    expect(((await (await fetch(p.verifyUrl, { headers: { accept: "application/json" } })).json()) as any).status).toBe(
      "confirmed",
    );

    let browser: Browser | undefined;
    try {
      browser = await puppeteer.launch({
        executablePath: "/usr/bin/chromium",
        headless: true,
        args: ["--no-sandbox", "--headless=new"],
      });
      const page = await browser.newPage();
      await page.setViewport({ width: 900, height: 1300 });
      const elsewhere: string[] = [];
      await page.setRequestInterception(true);
      page.on("request", (request) => {
        if (!request.url().startsWith(indexer.url)) {
          elsewhere.push(request.url());
          void request.abort();
        } else void request.continue();
      });
      const response = await page.goto(p.verifyUrl, { waitUntil: "load" });
      expect(response?.headers()["content-type"]).toMatch(/^text\/html/);
      const shot = join(artifactsDir(), `passport-${testDatabase}.png`);
      await page.screenshot({ path: shot, fullPage: true });
      console.log(`screenshot of ${p.verifyUrl}: ${shot}`);
      const read = (selector: string): Promise<string | undefined> =>
        page.$eval(selector, (el) => el.textContent?.trim());
      expect(await page.$eval("#status", (el) => el.getAttribute("data-status"))).toBe("confirmed");
      expect(await read("#status")).toBe("valid");
      expect(Number(await read("#score-financial-health"))).toBe(p.scores.financialHealth);
      expect(Number(await read("#score-reputation"))).toBe(p.scores.reputation);
      expect(await read("#wallet")).toBe(persona("salaried"));
      expect(await read("#transaction")).toBe(p.attestation.transaction);
      expect(await page.$$eval("#history-chart circle", (els) => els.length)).toBe(24);
      expect(elsewhere).toEqual([]);
    } finally {
      await browser?.close();
    }
  });

  it("revokes through `npm run passport:revoke`", async () => {
    const p = issued.second;
    const script = (...args: string[]) =>
      exec("npx", ["tsx", "scripts/passport-revoke.ts", ...args], {
        env: { ...process.env, DEVNET_MANIFEST: devnet.manifestPath },
      });
    // Both runs at once (each spends seconds loading modules): the one without a reason is refused
    // before it reads the chain, so it cannot touch what the other does.
    const [{ stdout }, bad] = await Promise.all([
      script(p.reportId, "--reason", "wallet reported compromised"),
      script(p.reportId).catch((e) => e),
    ]);
    expect(JSON.parse(stdout.trim().split("\n").at(-1)!)).toMatchObject({ reportId: p.reportId, revoked: true });
    expect([bad.code, bad.stderr]).toEqual([1, expect.stringContaining("--reason")]);
    await indexedUpTo();
    expect((await verify(p.reportId)).body).toMatchObject({
      status: "revoked",
      valid: false,
      revocationReason: "wallet reported compromised",
    });
  });

  it("detects tampering: content changed in the blockstore, and a CID attested with other scores", async () => {
    // A pinned document attested again (the same CID spelled in base36) with other scores.
    const first = issued.first;
    const spelled = CID.parse(first.ipfsCid).toString(base36);
    const r = asReporter();
    await send(
      r,
      r.walletClient.writeContract({
        address: devnet.manifest.reporter.address,
        abi: reputationReporterAbi,
        functionName: "publishFinancialReport",
        args: [persona("salaried"), lender.address, 99, 99, "1-2 USD", "REP-TAMPERED01", spelled],
      }),
    );
    await indexedUpTo();
    const forged = await verify("REP-TAMPERED01");
    expect(forged.body).toMatchObject({
      status: "tampered",
      valid: false,
      integrity: { contentMatchesCid: true, attestationMatchesContent: false },
    });

    // A fresh passport whose block is changed on disk.
    const res = await issue(persona("gig-worker"));
    expect(res.status).toBe(200);
    await indexedUpTo();
    expect((await verify(res.body.reportId)).body.status).toBe("confirmed");
    const block = await documentBlock(res.body.reportId);
    expect(block).toBeDefined();
    const text = block.bytes.toString("utf8");
    await block.overwrite(
      Buffer.from(
        text.replace(
          `"reputation":${res.body.scores.reputation}`,
          `"reputation":${(res.body.scores.reputation + 1) % 100}`,
        ),
      ),
    );
    const changed = await verify(res.body.reportId);
    expect(changed.body).toMatchObject({
      status: "tampered",
      valid: false,
      integrity: { checked: true, contentMatchesCid: false },
    });
    await block.overwrite(block.bytes);
    expect((await verify(res.body.reportId)).body.status).toBe("confirmed");
  });

  it("checks the content on every verification: a block changed after a successful one, keeping its size and mtime, is tampered", async () => {
    const p = issued.first; // superseded by now: its content is checked all the same
    expect((await verify(p.reportId)).body).toMatchObject({
      status: "superseded",
      integrity: { checked: true, contentMatchesCid: true, attestationMatchesContent: true },
    });
    expect((await api("GET", `/ipfs/${p.ipfsCid}`)).status).toBe(200);
    // Its own document (the second one names it too, in `supersedes`).
    const block = await documentBlock(`"reportId":"${p.reportId}"`);
    const text = block.bytes.toString("utf8");
    const score = String(p.scores.reputation);
    const forged = text.replace(
      `"reputation":${score},`,
      `"reputation":${score.slice(0, -1)}${(Number(score.at(-1)) + 1) % 10},`,
    );
    expect([forged.length, forged === text]).toEqual([text.length, false]);
    await block.overwrite(Buffer.from(forged)); // a file keeps its size and times: only the bytes tell
    try {
      expect((await verify(p.reportId)).body).toMatchObject({
        status: "tampered",
        valid: false,
        integrity: { checked: true, contentMatchesCid: false },
      });
      // GET /ipfs/{cid} refuses the forged bytes too.
      const served = await api("GET", `/ipfs/${p.ipfsCid}`);
      expect(served.status).toBe(500);
      expect(JSON.stringify(served.body)).not.toContain(p.reportId);
    } finally {
      await block.overwrite(block.bytes);
    }
    expect((await verify(p.reportId)).body).toMatchObject({
      status: "superseded",
      integrity: { contentMatchesCid: true },
    });
  });

  it("verifies passports of the original OnchainReporter (its event, through the indexer)", async () => {
    const { publicClient } = asReporter();
    const [log] = await publicClient
      .getLogs({ address: original, fromBlock: 0n, toBlock: "latest" })
      .then((logs) => logs.filter((l) => l.topics[0] === toEventSelector(ORIGINAL_EVENT)));
    expect(log).toBeDefined();
    const res = await verify("REP-ORIGINAL01");
    expect(res.body).toMatchObject({
      status: "confirmed",
      valid: true,
      source: "onchain-reporter",
      walletAddress: persona("merchant"),
      scores: { reputation: 77, financialHealth: 70 },
      integrity: { checked: false },
    });
    expect(res.body.attestation).toMatchObject({ contract: original, transaction: log!.transactionHash });
    expect((await verify(`0x${"ab".repeat(32)}`)).body.reportId).toBe("REP-ORIGINAL01");
  });

  it("answers 400 to malformed ids and 404 not_found to unknown ones", async () => {
    for (const id of ["REP-abc", "REP-ABCDEFGHIJK", "hello!", "0x1234"]) {
      const res = await verify(encodeURIComponent(id));
      expect([res.status, res.body.error?.code], id).toEqual([400, "invalid_report_id"]);
    }
    const unknown = await verify("REP-ZZZZZZZZZZ");
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ status: "not_found", valid: false, reportId: null });
    expect((await fetch(`${indexer.url}/api/agent/verify/REP-ZZZZZZZZZZ/badge.svg`)).status).toBe(404);
  });

  it("publishing fails: nothing is charged", async () => {
    const admin = devnetClients(rpcUrl(), devnet.manifest.deployer.privateKey as Hex);
    const reporterKey = devnet.manifest.service.reporter.address;
    await send(
      admin,
      admin.walletClient.writeContract({
        address: devnet.manifest.reporter.address,
        abi: reputationReporterAbi,
        functionName: "setReporter",
        args: [reporterKey, false],
      }),
    );
    try {
      const before = await treasuryUsdt();
      const res = await issue(persona("merchant"));
      expect([res.status, res.body.error?.code]).toEqual([503, "passport_publish_failed"]);
      expect(await treasuryUsdt()).toBe(before);
    } finally {
      await send(
        admin,
        admin.walletClient.writeContract({
          address: devnet.manifest.reporter.address,
          abi: reputationReporterAbi,
          functionName: "setReporter",
          args: [reporterKey, true],
        }),
      );
    }
  });

  it("settlement fails after publishing: the passport is revoked on chain and the answer is 402 without it", async () => {
    const sink = anvilDevAccount(6);
    const payer = devnetClients(rpcUrl(), lender.privateKey);
    const balance = await tokenBalance(rpcUrl(), usdt().address, lender.address);
    const before = await treasuryUsdt();
    const headers = await pay();
    await rpc(rpcUrl(), "evm_setAutomine", [false]);
    let answer: Awaited<ReturnType<typeof api>>;
    try {
      const request = api("POST", "/api/agent/report", headers, {
        walletAddress: persona("merchant"),
        callerAddress: lender.address,
      });
      // Once the publication waits in the mempool, the payer empties its balance in the same block.
      await waitFor("the publication in the mempool", async () => {
        const pool = await rpc<{ pending: Record<string, unknown> }>(rpcUrl(), "txpool_content");
        return Object.keys(pool.pending).some((from) => from.toLowerCase() === devnet.manifest.service.reporter.address)
          ? true
          : undefined;
      });
      await payer.walletClient.writeContract({
        address: usdt().address,
        abi: devStablecoinAbi,
        functionName: "transfer",
        args: [sink.address as Hex, balance],
      });
      await rpc(rpcUrl(), "evm_mine");
      await rpc(rpcUrl(), "evm_setAutomine", [true]);
      answer = await request;
    } finally {
      await rpc(rpcUrl(), "evm_setAutomine", [true]);
    }
    expect([answer.status, answer.body.code]).toEqual([402, "settlement_failed"]);
    expect(JSON.stringify(answer.body)).not.toContain("REP-");
    expect(await treasuryUsdt()).toBe(before);
    // Give the money back.
    const refund = devnetClients(rpcUrl(), sink.privateKey as Hex);
    await send(
      refund,
      refund.walletClient.writeContract({
        address: usdt().address,
        abi: devStablecoinAbi,
        functionName: "transfer",
        args: [lender.address, balance],
      }),
    );

    await indexedUpTo();
    const logs = parseEventLogs({
      abi: reputationReporterAbi,
      logs: await asReporter().publicClient.getLogs({
        address: devnet.manifest.reporter.address,
        fromBlock: 0n,
        toBlock: "latest",
      }),
    });
    const published = logs
      .filter((l) => l.eventName === "FinancialReportPublished" && l.args.wallet.toLowerCase() === persona("merchant"))
      .at(-1)! as { args: { reportId: string } };
    const revoked = logs.find((l) => l.eventName === "ReportRevoked" && l.args.reportId === published.args.reportId) as
      | { args: { reason: string } }
      | undefined;
    expect(revoked?.args.reason).toBe("payment not settled");
    expect((await verify(published.args.reportId)).body).toMatchObject({
      status: "revoked",
      valid: false,
      revocationReason: "payment not settled",
    });
  });

  it("settlement outcome unknown, then the service restarts: when the chain says the payment failed, the reconciler revokes the passport its ledger row names", async () => {
    const relayer = devnet.manifest.service.relayer;
    const reporterAddress = devnet.manifest.service.reporter.address;
    const before = await treasuryUsdt();
    const outcomes = async () =>
      (await api("GET", "/api/stats")).body.payments as { settling: number; failed: number; reconciled: number };
    const signed = await signAuthorization(lender.privateKey, usdt(), { to: treasury, value: 100_000n });
    const headers = { "x-payment": specHeader(signed, usdt().address) };
    await rpc(rpcUrl(), "evm_setAutomine", [false]);
    try {
      const request = api("POST", "/api/agent/report", headers, {
        walletAddress: persona("merchant"),
        callerAddress: lender.address,
      });
      await waitFor("the publication in the mempool", async () =>
        (await pooled(reporterAddress)).length ? true : undefined,
      );
      await rpc(rpcUrl(), "evm_mine"); // published; the settlement sent next is never mined
      const [settlement] = await waitFor("the settlement in the mempool", async () =>
        (await pooled(relayer.address)).length ? pooled(relayer.address) : undefined,
      );
      const answer = await request; // no receipt in time: the outcome is unknown
      expect([answer.status, answer.body.code]).toEqual([503, "settlement_pending"]);
      // The service stops with the row `settling`: no process holds the passport in memory any more.
      await indexer.stop();
      // The settlement never makes it: dropped, and the relayer's nonce taken by another transaction.
      await rpc(rpcUrl(), "anvil_dropTransaction", [settlement]);
    } finally {
      await rpc(rpcUrl(), "evm_setAutomine", [true]);
    }
    // Counted from the ledger itself while no process holds it (PGlite admits one), not from
    // /api/stats, whose figures may be LEDGER_STATS_TTL_MS old (earlier tests' failures missing).
    const key: PaymentKey = {
      token: usdt().address.toLowerCase() as Hex,
      payer: signed.authorization.from,
      nonce: signed.authorization.nonce,
    };
    const counted = await withLedger(async (ledger) => {
      expect(await ledger.find(key)).toMatchObject({ status: "settling", reconciledAt: null });
      return ledger.outcomeCounts();
    });
    const asRelayer = devnetClients(rpcUrl(), relayer.privateKey as Hex);
    await send(asRelayer, asRelayer.walletClient.sendTransaction({ to: relayer.address, value: 0n }));

    const logs = parseEventLogs({
      abi: reputationReporterAbi,
      logs: await asReporter().publicClient.getLogs({
        address: devnet.manifest.reporter.address,
        fromBlock: 0n,
        toBlock: "latest",
      }),
    });
    const { reportId } = (
      logs
        .filter(
          (l) => l.eventName === "FinancialReportPublished" && l.args.wallet.toLowerCase() === persona("merchant"),
        )
        .at(-1)! as { args: { reportId: string } }
    ).args;
    const status = () =>
      asReporter().publicClient.readContract({
        address: devnet.manifest.reporter.address,
        abi: reputationReporterAbi,
        functionName: "reportStatus",
        args: [reportId],
      });
    expect((await status())[1]).toBe(false); // standing while nobody runs

    // Started again on the same store: the start-up sweep reads the outcome (failed) from the chain
    // and revokes the passport named in the row's stored answer.
    indexer = await startIndexer({ DEVNET_MANIFEST: devnet.manifestPath, ...env.slot.env, ...serviceEnv });
    await waitFor("the revocation", async () => ((await status())[1] ? true : undefined), indexer);
    expect((await status())[4]).toBe(UNPAID_REASON);
    await indexedUpTo();
    expect((await verify(reportId)).body).toMatchObject({
      status: "revoked",
      valid: false,
      revocationReason: UNPAID_REASON,
    });
    expect(await treasuryUsdt()).toBe(before);
    // The ledger row was decided from the chain by the new process: failed. (Read from /api/stats
    // once its figures show the row decided: they may be a little older than the revocation.)
    const decided = await waitFor(
      "the row decided in /api/stats",
      async () => {
        const now = await outcomes();
        return now.settling < counted.settling ? now : undefined;
      },
      indexer,
    );
    expect(decided).toMatchObject({
      settling: counted.settling - 1,
      failed: counted.failed + 1,
      reconciled: counted.reconciled + 1,
    });
    // Asked again (another sweep, another replica): already revoked, nothing is sent.
    const reporter = createReporter({
      rpcUrl: rpcUrl(),
      contract: devnet.manifest.reporter.address,
      privateKey: devnet.manifest.service.reporter.privateKey as Hex,
      original,
    });
    expect(await reporter.revokeOnce(reportId, UNPAID_REASON)).toBe(false);
  });

  it("a reorg that removes the attestation's block: verify no longer says confirmed", async () => {
    const snapshot = await rpc<string>(rpcUrl(), "evm_snapshot");
    const r = asReporter();
    await send(
      r,
      r.walletClient.writeContract({
        address: devnet.manifest.reporter.address,
        abi: reputationReporterAbi,
        functionName: "publishFinancialReport",
        args: [persona("whale"), lender.address, 50, 50, "0-0 USD", "REP-REORGED001", `0x${"cd".repeat(32)}`],
      }),
    );
    await indexedUpTo();
    expect((await verify("REP-REORGED001")).body.status).toBe("confirmed");
    expect(await rpc<boolean>(rpcUrl(), "evm_revert", [snapshot])).toBe(true);
    for (let i = 0; i < 3; i++) await rpc(rpcUrl(), "evm_mine");
    await waitFor(
      "the reorg to be indexed",
      async () => ((await verify("REP-REORGED001")).body.status === "confirmed" ? undefined : true),
      indexer,
      60_000,
    );
    expect((await verify("REP-REORGED001")).body).toMatchObject({ status: "not_found", valid: false });
  });

  it("expires once the latest indexed block's time passes expiresAt (anvil time travel)", async () => {
    const res = await issue(persona("one-off"), { expiresInDays: 1 });
    expect(res.status).toBe(200);
    await indexedUpTo();
    expect((await verify(res.body.reportId)).body.status).toBe("confirmed");
    await rpc(rpcUrl(), "evm_increaseTime", [2 * 86_400]);
    await rpc(rpcUrl(), "evm_mine");
    await indexedUpTo();
    expect((await verify(res.body.reportId)).body).toMatchObject({ status: "expired", valid: false });
  });

  it("limits verify per client: 429 with Retry-After", async () => {
    let limited: Response | undefined;
    for (let i = 0; i < 200 && !limited; i++) {
      const res = await fetch(`${indexer.url}/api/agent/verify/REP-ZZZZZZZZZZ`);
      if (res.status === 429) limited = res;
    }
    expect(limited?.status).toBe(429);
    expect(Number(limited!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(((await limited!.json()) as any).error.code).toBe("rate_limited");
  });
});
