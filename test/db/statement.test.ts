import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { type Hex, parseAbi, parseUnits } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cidOf } from "../../api/ipfs/node.ts";
import { loadStatement, periodStart } from "../../api/statement/data.ts";
import { CSV_HEADER, formatAmount } from "../../api/statement/format.ts";
import { renderStatement } from "../../api/statement/make.ts";
import { type StatementResult, statementResultSchema } from "../../api/statement/schema.ts";
import { devnetClients } from "../../devnet/chain.ts";
import { monthOf } from "../../shared/month.ts";
import { waitForReceipt } from "../../shared/receipt.ts";
import { artifactsDir } from "../support/artifacts.ts";
import { type ChainTransfer, chainTransfers } from "../support/chain-truth.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { withIndexDb } from "../support/index-db.ts";
import { type Indexer, type Query, testDatabase, waitForBlock } from "../support/indexer.ts";
import { signAuthorization, specHeader, tokenBalance } from "../support/payments.ts";

type Pinned = { cid: string; name: string; auth: string | undefined };

// Statements against the chain itself: the PDF read back with pdftotext (poppler-utils) and its CSV
// equal eth_getLogs and the aggregate tables; both files are served back by CID; remote pinning
// against a fake IPFS Pinning Service API.
describe(`statements (${testDatabase})`, () => {
  let env: IndexedDevnet;
  let devnet: TestDevnet;
  let indexer: Indexer;
  let lender: { address: Hex; privateKey: Hex };
  let wallet: Hex;
  let treasury: Hex;
  let tokens: { USDT: string; USDC: string };
  let first: StatementResult;
  let latest: StatementResult;
  let pinningServer: Server;
  let pinningMode: "ok" | "fail" = "ok";
  const remotePins: Pinned[] = [];
  const work = mkdtempSync(join(artifactsDir(), "statement-"));
  console.log(`statement test files: ${work}`);

  const treasuryUsdt = () => tokenBalance(devnet.manifest.rpcUrl, devnet.manifest.tokens.USDT.address, treasury);
  const pay = async () => ({
    "x-payment": specHeader(
      await signAuthorization(lender.privateKey, devnet.manifest.tokens.USDT, { to: treasury, value: 10_000n }),
      devnet.manifest.tokens.USDT.address,
    ),
  });
  const statement = async (body: Record<string, unknown>, paid = true) => {
    const res = await fetch(`${indexer.url}/api/agent/statement`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(paid ? await pay() : {}) },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const fetchBytes = async (path: string) => {
    const res = await fetch(`${indexer.url}${path}`);
    return { res, bytes: new Uint8Array(await res.arrayBuffer()) };
  };
  const pdfText = (pdf: Uint8Array, args: string[] = []) => {
    const file = join(work, `s-${Math.random().toString(36).slice(2)}.pdf`);
    writeFileSync(file, pdf);
    const out = spawnSync("pdftotext", ["-layout", ...args, file, "-"], { encoding: "utf8" });
    if (out.status !== 0) throw new Error(`pdftotext: ${out.stderr}`);
    return out.stdout;
  };
  const symbolOf = (token: string) => (token === tokens.USDT ? "USDT" : "USDC");
  const units = (text: string) => parseUnits(text.replace(/,/g, ""), 6);

  /** The wallet's side of every Transfer log in the period, as the chain has them, in chain order. */
  const chainRows = (all: ChainTransfer[], w: string, s: StatementResult) => {
    const from = BigInt(Date.parse(s.from) / 1000);
    const to = BigInt(Date.parse(s.to) / 1000);
    return all
      .filter((t) => t.timestamp >= from && t.timestamp <= to && t.block <= BigInt(s.dataAsOf.block))
      .flatMap((t) => [
        ...(t.to === w ? [{ t, dir: "in" as const, other: t.from }] : []),
        ...(t.from === w ? [{ t, dir: "out" as const, other: t.to }] : []),
      ])
      .sort((a, b) =>
        a.t.block === b.t.block
          ? a.t.logIndex - b.t.logIndex || a.dir.localeCompare(b.dir)
          : a.t.block < b.t.block
            ? -1
            : 1,
      );
  };

  beforeAll(async () => {
    pinningServer = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        const { cid, name } = JSON.parse(body || "{}");
        if (req.method !== "POST" || req.url !== "/pins") return res.writeHead(404).end();
        if (pinningMode === "fail")
          return res
            .writeHead(500, { "content-type": "application/json" })
            .end(JSON.stringify({ error: { reason: "INTERNAL_SERVER_ERROR", details: "pinning backend down" } }));
        remotePins.push({ cid, name, auth: req.headers.authorization });
        res.writeHead(202, { "content-type": "application/json" }).end(
          JSON.stringify({
            requestid: `req-${remotePins.length}`,
            status: "queued",
            created: new Date().toISOString(),
            pin: { cid, name },
            delegates: [],
          }),
        );
      });
    });
    await new Promise<void>((resolve) => pinningServer.listen(0, "127.0.0.1", resolve));
    env = await indexedDevnet({ wallets: 4, months: 13, seed: 23 });
    devnet = env.devnet;
    indexer = await env.index({
      PINNING_SERVICE_URL: `http://127.0.0.1:${(pinningServer.address() as AddressInfo).port}`,
      PINNING_SERVICE_TOKEN: "secret-token",
      // As in production: the PDF renderer warmed a second after start (the suite's default is off).
      STATEMENT_WARMUP: "on",
    });
    await waitForBlock(indexer, devnet.manifest.headBlock);
    lender = devnet.manifest.lenders[1] as unknown as typeof lender;
    wallet = devnet.manifest.personas.salaried!.address.toLowerCase() as Hex;
    treasury = devnet.manifest.service.treasury.address;
    tokens = {
      USDT: devnet.manifest.tokens.USDT.address.toLowerCase(),
      USDC: devnet.manifest.tokens.USDC.address.toLowerCase(),
    };
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
    pinningServer?.close();
  });

  it("refuses a period that is not 1M, 3M, 6M or 12M with 400 invalid_period listing them, and charges nothing", async () => {
    const before = await treasuryUsdt();
    for (const period of ["2M", "12m", 3, ""]) {
      const res = await statement({ walletAddress: wallet, period });
      expect([res.status, res.body.error.code], String(period)).toEqual([400, "invalid_period"]);
      expect(res.body.error.details.allowed).toEqual(["1M", "3M", "6M", "12M"]);
      expect(res.body.error.message).toContain("1M, 3M, 6M, 12M");
    }
    const bad = await statement({ walletAddress: "0x123" });
    expect([bad.status, bad.body.error.code]).toEqual([400, "invalid_request"]);
    expect(await treasuryUsdt()).toBe(before);
    // Unpaid: the 402, not a statement.
    expect((await statement({ walletAddress: wallet }, false)).status).toBe(402);
  });

  it("makes a 12-month statement whose PDF and CSV equal the chain's logs, pinned locally and remotely, served back by CID", async () => {
    const res = await statement({ walletAddress: wallet, period: "12M" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    first = latest = statementResultSchema.parse(res.body);
    expect(first).toMatchObject({
      walletAddress: wallet,
      period: "12M",
      x402Billing: { chargedUsdt: "0.01", payer: lender.address.toLowerCase() },
    });
    expect(Date.parse(first.to) / 1000).toBe(Date.parse(first.dataAsOf.time) / 1000);
    expect(Date.parse(first.from) / 1000).toBe(periodStart(Date.parse(first.to) / 1000, "12M"));
    expect(first.pinned).toEqual({
      local: true,
      remote: {
        service: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
        ok: true,
        pins: [
          expect.objectContaining({ cid: first.cid, status: "queued" }),
          expect.objectContaining({ cid: first.csvCid, status: "queued" }),
        ],
      },
    });
    expect(remotePins).toHaveLength(2);
    expect(remotePins).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ cid: first.cid, auth: "Bearer secret-token" }),
        expect.objectContaining({ cid: first.csvCid, auth: "Bearer secret-token" }),
      ]),
    );

    // Served back by CID: the bytes hash to it, with their media type and an immutable cache header.
    const { res: pdfRes, bytes: pdf } = await fetchBytes(new URL(first.url).pathname);
    expect(pdfRes.status).toBe(200);
    expect(pdfRes.headers.get("content-type")).toBe("application/pdf");
    expect(pdfRes.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(await cidOf(pdf)).toBe(first.cid);
    expect([pdf.length, (await import("node:crypto")).createHash("sha256").update(pdf).digest("hex")]).toEqual([
      first.size,
      first.sha256,
    ]);
    const { res: csvRes, bytes: csv } = await fetchBytes(new URL(first.csvUrl).pathname);
    expect(csvRes.headers.get("content-type")).toBe("text/csv; charset=utf-8");
    expect(await cidOf(csv)).toBe(first.csvCid);

    const all = await chainTransfers(devnet.manifest.rpcUrl, Object.values(tokens), BigInt(devnet.manifest.startBlock));
    const mine = all.filter((t) => t.from === wallet || t.to === wallet);
    const expected = chainRows(all, wallet, first);
    expect(expected.length).toBeGreaterThan(20);
    expect(first.transferCount).toBe(expected.length);

    // The CSV: exactly the chain's rows.
    const lines = new TextDecoder().decode(csv).trimEnd().split("\r\n");
    expect(lines[0]).toBe(CSV_HEADER.join(","));
    expect(lines.slice(1).map((l) => l.split(","))).toEqual(
      expected.map(({ t, dir, other }) => [
        new Date(Number(t.timestamp) * 1000).toISOString().slice(0, 19).replace("T", " "),
        String(t.timestamp),
        String(t.block),
        t.txHash,
        String(t.logIndex),
        dir,
        wallet,
        other,
        symbolOf(t.token),
        t.token,
        expect.any(String),
        String(t.value),
      ]),
    );

    // The PDF, read back: every transfer row equals the chain's.
    const text = pdfText(pdf);
    writeFileSync(join(work, "statement.txt"), text);
    const rowPattern =
      /^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s+(in|out)\s+(0x[0-9a-f]{40})\s+(USDT|USDC)\s+([\d,]+\.\d+)\s+(0x[0-9a-f]{8}…[0-9a-f]{8})$/;
    const printed = text
      .split("\n")
      .map((l) => l.trim().match(rowPattern))
      .filter((m) => m !== null)
      .map((m) => m.slice(1, 7));
    expect(printed).toEqual(
      expected.map(({ t, dir, other }) => [
        new Date(Number(t.timestamp) * 1000).toISOString().slice(0, 19).replace("T", " "),
        dir,
        other,
        symbolOf(t.token),
        formatAmount(t.value, 6),
        `${t.txHash.slice(0, 10)}…${t.txHash.slice(-8)}`,
      ]),
    );

    // Its totals: opening and closing balances, in, out and net per token and together, from the chain.
    const from = BigInt(Date.parse(first.from) / 1000);
    const field = (label: string) => text.match(new RegExp(`^\\s*${label}\\s+(-?[\\d,]+\\.\\d+) USD$`, "m"))?.[1];
    let allIn = 0n;
    let allOut = 0n;
    for (const [symbol, token] of Object.entries(tokens)) {
      const side = (t: ChainTransfer) =>
        t.token !== token ? 0n : (t.to === wallet ? t.value : 0n) - (t.from === wallet ? t.value : 0n);
      const opening = mine.filter((t) => t.timestamp < from).reduce((n, t) => n + side(t), 0n);
      const closing = mine.filter((t) => t.block <= BigInt(first.dataAsOf.block)).reduce((n, t) => n + side(t), 0n);
      const inflow = expected.filter((r) => r.dir === "in" && r.t.token === token).reduce((n, r) => n + r.t.value, 0n);
      const outflow = expected
        .filter((r) => r.dir === "out" && r.t.token === token)
        .reduce((n, r) => n + r.t.value, 0n);
      const row = text.match(
        new RegExp(`^\\s*${symbol}\\s+(\\S+)\\s+(\\S+)\\s+(\\S+)\\s+(\\S+)\\s+(\\S+)\\s+(\\d+)\\s+(\\d+)$`, "m"),
      );
      expect(
        row?.slice(1).map((v, i) => (i < 5 ? units(v) : BigInt(v))),
        symbol,
      ).toEqual([
        opening,
        inflow,
        outflow,
        inflow - outflow,
        closing,
        BigInt(expected.filter((r) => r.dir === "in" && r.t.token === token).length),
        BigInt(expected.filter((r) => r.dir === "out" && r.t.token === token).length),
      ]);
      expect(first.balances.find((b) => b.token === symbol)).toMatchObject({
        openingUnits: String(opening),
        closingUnits: String(closing),
        inUnits: String(inflow),
        outUnits: String(outflow),
      });
      allIn += inflow;
      allOut += outflow;
    }
    expect([field("Total in"), field("Total out"), field("Net")].map((v) => units(v!))).toEqual([
      allIn,
      allOut,
      allIn - allOut,
    ]);
    expect(text).toMatch(new RegExp(`Transfers\\s+${expected.length} \\(`));

    // Every page: its number, and how to verify (the CSV's CID and the verify route).
    // pdftotext ends every page with a form feed: the pages of the text read above, not one run each.
    const pages = Number(text.match(/Page 1 of (\d+)/)?.[1]);
    expect(pages).toBeGreaterThanOrEqual(1);
    const pageTexts = text.split("\f");
    expect([pageTexts.length, pageTexts.at(-1)!.trim()]).toEqual([pages + 1, ""]);
    for (let p = 1; p <= pages; p++) {
      const page = pageTexts[p - 1]!.replace(/\s+/g, " ");
      expect(page).toContain(`Page ${p} of ${pages}`);
      expect(page).toContain(`Verify: GET /ipfs/<cid>`);
      expect(page).toContain(first.csvCid);
    }
  });

  it("renders a first page that is not blank and reads as text", async () => {
    const { bytes: pdf } = await fetchBytes(`/ipfs/${first.cid}`);
    const file = join(work, "render.pdf");
    writeFileSync(file, pdf);
    expect(
      spawnSync("pdftoppm", ["-png", "-r", "100", "-f", "1", "-l", "1", "-singlefile", file, join(work, "page1")])
        .status,
    ).toBe(0);
    const gray = spawnSync("pdftoppm", ["-gray", "-r", "30", "-f", "1", "-l", "1", "-singlefile", file]);
    expect(gray.status).toBe(0);
    // PGM (P5): a text header, then one byte per pixel.
    const pgm = gray.stdout as Buffer;
    const [, w, h] = pgm
      .subarray(0, 40)
      .toString("latin1")
      .match(/^P5\s+(\d+)\s+(\d+)\s+255\s/)!;
    const pixels = pgm.subarray(pgm.length - Number(w) * Number(h));
    const dark = pixels.filter((v) => v < 160).length / pixels.length;
    expect(dark).toBeGreaterThan(0.01);
    expect(dark).toBeLessThan(0.5);
    const page1 = pdfText(pdf, ["-f", "1", "-l", "1"]);
    for (const words of [
      "Wallet statement",
      "Summary",
      wallet,
      "Balances and totals by token",
      "How to verify this statement",
      "Month by month",
      "Data as of",
      `block ${first.dataAsOf.block}`,
    ])
      expect(page1).toContain(words);
    expect(readFileSync(join(work, "page1.png")).subarray(1, 4).toString()).toBe("PNG");
  });

  it("answers the wallet's statement signal with its latest statement", async () => {
    const res = await fetch(`${indexer.url}/api/wallet/${wallet}/signals/statement`, { headers: await pay() });
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body).toMatchObject({
      name: "latestStatement",
      value: {
        cid: first.cid,
        csvCid: first.csvCid,
        period: "12M",
        from: first.from,
        to: first.to,
        url: `/ipfs/${first.cid}`,
        createdAt: expect.any(String),
      },
    });
  });

  it("makes a valid statement that says so for a wallet with no transfers in the period", async () => {
    const quiet = "0x00000000000000000000000000000000000c0de5";
    const res = await statement({ walletAddress: quiet, period: "1M" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({
      transferCount: 0,
      totals: { inUsd: "0.00", outUsd: "0.00", netUsd: "0.00", openingUsd: "0.00", closingUsd: "0.00" },
    });
    const { bytes } = await fetchBytes(`/ipfs/${res.body.cid}`);
    const text = pdfText(bytes);
    expect(text).toContain("0: no transfers in this period");
    expect(text).toContain("No transfers in this period");
    expect(text).toContain("Page 1 of 1");
  });

  it("reports a remote pinning failure in the answer without failing the statement", async () => {
    pinningMode = "fail";
    try {
      const res = await statement({ walletAddress: wallet, period: "1M" });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.pinned.local).toBe(true);
      expect(res.body.pinned.remote).toMatchObject({
        ok: false,
        pins: [
          { status: "failed", error: expect.stringContaining("HTTP 500 INTERNAL_SERVER_ERROR: pinning backend down") },
          { status: "failed" },
        ],
      });
      expect((await fetchBytes(`/ipfs/${res.body.cid}`)).res.status).toBe(200);
    } finally {
      pinningMode = "ok";
    }
  });

  it("gives a new CID when a new transfer touches the wallet, with that transfer in it", async () => {
    const { walletClient, publicClient } = devnetClients(devnet.manifest.rpcUrl, lender.privateKey);
    const hash = await walletClient.writeContract({
      address: devnet.manifest.tokens.USDC.address,
      abi: parseAbi(["function transfer(address to, uint256 value) returns (bool)"]),
      functionName: "transfer",
      args: [wallet, 1_234_567n],
    });
    const receipt = await waitForReceipt(publicClient, { hash });
    await waitForBlock(indexer, Number(receipt.blockNumber));
    const res = await statement({ walletAddress: wallet, period: "12M" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    latest = statementResultSchema.parse(res.body);
    expect(latest.cid).not.toBe(first.cid);
    expect(latest.csvCid).not.toBe(first.csvCid);
    expect(latest.transferCount).toBeGreaterThanOrEqual(first.transferCount + 1);
    const csv = new TextDecoder().decode((await fetchBytes(`/ipfs/${latest.csvCid}`)).bytes);
    served.set(latest.cid, (await fetchBytes(`/ipfs/${latest.cid}`)).bytes);
    expect(csv).toContain(`${hash},`);
    expect(csv).toContain(",in,");
  });

  it("serves /ipfs/{cid}: unknown CID 404, malformed 400, wrong method 405", async () => {
    const unknown = await fetch(`${indexer.url}/ipfs/${await cidOf(new TextEncoder().encode("never pinned here"))}`);
    expect([unknown.status, ((await unknown.json()) as any).error.code]).toEqual([404, "unknown_cid"]);
    for (const bad of ["not-a-cid", "bafy", "Qm123"]) {
      const res = await fetch(`${indexer.url}/ipfs/${bad}`);
      expect([res.status, ((await res.json()) as any).error.code], bad).toEqual([400, "invalid_cid"]);
    }
    expect((await fetch(`${indexer.url}/ipfs/${first.cid}`, { method: "POST" })).status).toBe(405);
  });

  it("prints figures equal to the aggregate tables, and the same data gives the same bytes", async () => {
    // Read the tables themselves (PGlite admits one process at a time: stop the indexer first).
    await indexer.stop();
    const month = (t: string) => monthOf(Date.parse(t) / 1000);
    const [aggregates, balances] = await env.slot.read(async (query: Query) => [
      await query<{
        token: string;
        month: string;
        inflow: string;
        outflow: string;
        transfers_in: number;
        transfers_out: number;
      }>(
        `select token, month, inflow::text, outflow::text, transfers_in, transfers_out from account_month where address = '${wallet}' and month > '${month(latest.from)}' and month < '${month(latest.to)}' order by month, token`,
      ),
      await query<{ token: string; balance: string }>(
        `select token, balance::text from balance where address = '${wallet}'`,
      ),
    ]);
    // The month table of the PDF: every whole month of the period equals account_month.
    const text = pdfText((await readPinned(latest.cid))!);
    const printedMonths = [
      ...text.matchAll(/^\s*(\d{4}-\d\d)\s+(USDT|USDC)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)\s+(\d+)$/gm),
    ]
      .filter((m) => m[1]! > month(latest.from) && m[1]! < month(latest.to))
      .map((m) => [m[1], m[2], units(m[3]!).toString(), units(m[4]!).toString(), Number(m[6]), Number(m[7])]);
    expect(printedMonths.length).toBeGreaterThanOrEqual(10);
    expect(printedMonths).toEqual(
      aggregates.map((a) => [
        a.month,
        symbolOf(a.token),
        a.inflow,
        a.outflow,
        Number(a.transfers_in),
        Number(a.transfers_out),
      ]),
    );
    // Closing balances: the balance view (nothing moved after the statement's block).
    for (const b of balances)
      expect(latest.balances.find((x) => x.tokenAddress === b.token)?.closingUnits).toBe(b.balance);

    // The generator itself, on the same tables twice: the same bytes, so the same CIDs.
    const target = {
      schema: env.slot.schema,
      tokens: [devnet.manifest.tokens.USDT, devnet.manifest.tokens.USDC].map((t, i) => ({
        ...t,
        symbol: i ? "USDC" : "USDT",
      })) as never,
    };
    const renders = await withIndexDb(env.slot, async (db) => {
      const out = [];
      for (let i = 0; i < 2; i++)
        out.push(await renderStatement(await loadStatement(db, target, wallet, "12M"), cidOf));
      return out;
    });
    expect(Buffer.compare(renders[0]!.pdf, renders[1]!.pdf)).toBe(0);
    expect([await cidOf(renders[0]!.pdf), renders[0]!.csvCid]).toEqual([
      await cidOf(renders[1]!.pdf),
      renders[1]!.csvCid,
    ]);
    expect(renders[0]!.pdf.length).toBeGreaterThan(1000);
  });

  /** Content this service pinned, fetched while its indexer still ran (kept from earlier tests). */
  const served = new Map<string, Uint8Array>();
  async function readPinned(cid: string) {
    return served.get(cid) ?? (await fetchBytes(`/ipfs/${cid}`).catch(() => undefined))?.bytes;
  }
});
