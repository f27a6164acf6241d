import { readFileSync } from "node:fs";
import { PGlite } from "@electric-sql/pglite";
import { count, createClient, eq, sql, sum } from "@ponder/client";
import pg from "pg";
import { type Hex, zeroAddress } from "viem";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { devnetClients } from "../../devnet/chain.ts";
import { rpc } from "../../devnet/rpc.ts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as schema from "../../ponder.schema.ts";
import { devnetDatabaseUrl } from "../../config/target.ts";
import { type ChainTransfer, chainTransfers, expectedAggregates, normalise } from "../support/chain-truth.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { type Indexer, testDatabase, waitFor, waitForBlock } from "../support/indexer.ts";
import { x402Fetch } from "../support/payments.ts";

// docs/data.md: the data listener (GraphQL, SQL over HTTP, /metrics) apart from the public port,
// @ponder/client against it on both databases, and every example of the page run as written.
const page = readFileSync(new URL("../../docs/data.md", import.meta.url), "utf8");
const examples = (lang: string) => Object.fromEntries([...page.matchAll(new RegExp("```" + lang + " example=([\\w-]+)\\n([\\s\\S]*?)```", "g"))].map((m) => [m[1]!, m[2]!]));
const sqlExamples = examples("sql");
const graphqlExamples = examples("graphql");

describe(`data interfaces (${testDatabase})`, () => {
  let env: IndexedDevnet;
  let devnet: TestDevnet;
  let indexer: Indexer;
  let transfers: ChainTransfer[];
  let wallet: string;
  type Rows = Record<string, string | null>[];
  const truthOf = (w: string) => {
    const e = expectedAggregates(w, transfers);
    return { months: e.months as unknown as Rows, counterparties: e.counterparties as unknown as Rows };
  };
  const viewsSchema = () => `${env.slot.schema}_data`;

  beforeAll(async () => {
    env = await indexedDevnet({ wallets: 8, months: 12, seed: 43 });
    devnet = env.devnet;
    indexer = await env.index({ DATABASE_VIEWS_SCHEMA: viewsSchema(), DATA_HOST: "127.0.0.1" });
    await waitForBlock(indexer, devnet.manifest.headBlock);
    wallet = devnet.manifest.personas.merchant!.address.toLowerCase();
    // One paid screen: revenue for the ledger example (its settlement is one more transfer).
    const paidFetch = x402Fetch(devnet.manifest.lenders[0]!.privateKey as Hex, Object.values(devnet.manifest.tokens));
    const res = await paidFetch(`${indexer.url}/api/lender/screen`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ walletAddress: wallet }) });
    expect(res.status).toBe(200);
    // One realtime block with more than 20 updates of existing rows (`received` of 25 wallets): Ponder
    // flushes them through a TEMP table named like the real one, which on PGlite stays in the
    // session @ponder/client's SQL runs on (#2235).
    const before = await chainTransfers(devnet.manifest.rpcUrl, [devnet.manifest.tokens.USDT.address], BigInt(devnet.manifest.startBlock));
    const recipients = [...new Set(before.map((t) => t.to))].filter((w) => w !== zeroAddress).slice(0, 25);
    const lender = devnet.manifest.lenders[1]!;
    const { publicClient, walletClient } = devnetClients(devnet.manifest.rpcUrl, lender.privateKey as Hex);
    await rpc(devnet.manifest.rpcUrl, "evm_setAutomine", [false]);
    try {
      const nonce = await publicClient.getTransactionCount({ address: lender.address as Hex, blockTag: "pending" });
      const hashes: Hex[] = [];
      for (const [i, to] of recipients.entries())
        hashes.push(await walletClient.writeContract({ address: devnet.manifest.tokens.USDT.address as Hex, abi: devStablecoinAbi, functionName: "transfer", args: [to as Hex, 1000n + BigInt(i)], nonce: nonce + i, gas: 100_000n }));
      await rpc(devnet.manifest.rpcUrl, "evm_mine", []);
      for (const hash of hashes) expect((await publicClient.waitForTransactionReceipt({ hash })).status).toBe("success");
    } finally {
      await rpc(devnet.manifest.rpcUrl, "evm_setAutomine", [true]);
    }
    const tokens = [devnet.manifest.tokens.USDT.address, devnet.manifest.tokens.USDC.address];
    transfers = await chainTransfers(devnet.manifest.rpcUrl, tokens, BigInt(devnet.manifest.startBlock));
    await waitForBlock(indexer, Math.max(devnet.manifest.headBlock, ...transfers.map((t) => Number(t.block))));
  }, 300_000);

  afterAll(() => env?.stop());

  it("keeps GraphQL, SQL and /metrics off the public port (JSON 404) and serves them on the data listener", async () => {
    expect(indexer.output()).toContain(`[data] listening on ${indexer.dataUrl}`);
    for (const path of ["/graphql", "/graphql/", "/sql/db?sql=x", "/sql/live", "/metrics", "/metrics?x=1", "//metrics", "/%6Detrics"]) {
      for (const method of ["GET", "POST"]) {
        const res = await fetch(`${indexer.url}${path}`, { method });
        expect([path, method, res.status, res.headers.get("content-type")]).toEqual([path, method, 404, "application/json"]);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe("not_found");
      }
    }
    // The public API itself is untouched.
    expect((await fetch(`${indexer.url}/api/stats`)).status).toBe(200);
    const metrics = await fetch(`${indexer.dataUrl}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain("ponder_");
    const unknown = await fetch(`${indexer.dataUrl}/api/stats`);
    expect([unknown.status, ((await unknown.json()) as { error: { code: string } }).error.code]).toEqual([404, "not_found"]);
  });

  it("answers @ponder/client over SQL: counts and sums equal the chain's", async () => {
    const client = createClient(`${indexer.dataUrl}/sql`, { schema });
    const [all] = await client.db.select({ n: count(), total: sum(schema.transfer.value) }).from(schema.transfer);
    expect(all).toEqual({ n: transfers.length, total: String(transfers.reduce((s, t) => s + t.value, 0n)) });

    const expected = truthOf(wallet);
    const months = await client.db.select().from(schema.accountMonth).where(eq(schema.accountMonth.address, wallet as Hex));
    const byMonth = (rows: { token: string; month: string; inflow: unknown; outflow: unknown }[]) =>
      rows.map((r) => `${r.token} ${r.month} ${String(r.inflow)} ${String(r.outflow)}`).sort();
    expect(months.length).toBeGreaterThan(6);
    expect(byMonth(months)).toEqual(byMonth(expected.months as never));

    // `received` was just updated through Ponder's TEMP table of the same name: still every row.
    const received = await client.db.select({ n: count(), total: sum(schema.received.total) }).from(schema.received);
    const incoming = transfers.filter((t) => t.to !== zeroAddress);
    expect(received[0]).toEqual({ n: new Set(incoming.map((t) => t.to)).size, total: String(incoming.reduce((s, t) => s + t.value, 0n)) });

    const pairs = await client.db.select({ n: count() }).from(schema.counterparty).where(eq(schema.counterparty.address, wallet as Hex));
    expect(pairs[0]!.n).toBe(expected.counterparties.length);

    // A raw, unqualified statement, a CTE and a view over a join: the same answers.
    const raw = await client.db.execute(sql`with t as (select value from transfer) select count(*)::int as n, sum(value)::text as total from t`);
    expect(raw[0]).toEqual({ n: transfers.length, total: all!.total });

    // The read-only guard: writes and schema-qualified names are refused.
    await expect(client.db.execute(sql`delete from transfer`)).rejects.toThrow();
    await expect(client.db.execute(sql`select count(*) from pg_catalog.pg_class`)).rejects.toThrow();
  });

  it("runs the GraphQL examples of docs/data.md", async () => {
    expect(Object.keys(graphqlExamples)).toEqual(["monthly-flows", "top-counterparties", "latest-transfers"]);
    const run = async (name: string) => {
      const res = await fetch(`${indexer.dataUrl}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ query: graphqlExamples[name], variables: { wallet } }),
      });
      const body = (await res.json()) as { data?: Record<string, { items: Record<string, unknown>[]; totalCount?: number }>; errors?: unknown };
      expect([res.status, body.errors]).toEqual([200, undefined]);
      return Object.values(body.data!)[0]!;
    };
    const expected = truthOf(wallet);

    const months = await run("monthly-flows");
    expect(months.items.map((r) => `${r.token} ${r.month} ${r.inflow} ${r.outflow}`).sort()).toEqual(
      expected.months.map((r) => `${r.token} ${r.month} ${r.inflow} ${r.outflow}`).sort(),
    );

    const top = await run("top-counterparties");
    const topTruth = [...expected.counterparties].sort((a, b) => Number(BigInt(b.total_in!) - BigInt(a.total_in!))).slice(0, 10);
    expect(top.items.map((r) => String(r.totalIn))).toEqual(topTruth.map((r) => r.total_in));

    const latest = await run("latest-transfers");
    const sent = transfers.filter((t) => t.from === wallet);
    expect(latest.totalCount).toBe(sent.length);
    expect(latest.items.map((r) => String(r.timestamp))).toEqual(sent.map((t) => String(t.timestamp)).sort((a, b) => Number(b) - Number(a)).slice(0, 5));
  });

  it("runs the SQL examples of docs/data.md over the stable views schema", async () => {
    expect(Object.keys(sqlExamples)).toEqual(["monthly-flows", "top-counterparties", "passports-by-status", "revenue-by-day"]);
    const bind = (text: string) => text.replaceAll(":'wallet'", `'${wallet}'`);
    const results: Record<string, Record<string, unknown>[]> = {};
    if (env.slot.kind === "postgres") {
      // Read while the service runs, as a data team would; the views appear once the backfill is done.
      const client = new pg.Client({ connectionString: devnetDatabaseUrl(env.slot.env.DATABASE_URL!) });
      await client.connect();
      try {
        await waitFor("the views schema", async () => ((await client.query(`select 1 from information_schema.views where table_schema = $1 and table_name = 'account_month'`, [viewsSchema()])).rowCount ? true : undefined), indexer);
        await client.query(`set search_path to "${viewsSchema()}"`);
        for (const [name, text] of Object.entries(sqlExamples)) results[name] = (await client.query(bind(text))).rows;
      } finally {
        await client.end();
      }
    } else {
      // PGlite: one process at a time; stop the service, then open its database and its store.
      await indexer.stop();
      const db = new PGlite(env.slot.env.PGLITE_DIR!);
      try {
        await db.exec(`set search_path to "${viewsSchema()}"`);
        for (const [name, text] of Object.entries(sqlExamples)) if (name !== "revenue-by-day") results[name] = (await db.query<Record<string, unknown>>(bind(text))).rows;
      } finally {
        await db.close();
      }
      if (env.slot.store.kind !== "pglite") throw new Error("a PGlite slot has a PGlite store");
      const store = new PGlite(env.slot.store.directory);
      try {
        results["revenue-by-day"] = (await store.query<Record<string, unknown>>(sqlExamples["revenue-by-day"]!)).rows;
      } finally {
        await store.close();
      }
    }
    const expected = truthOf(wallet);

    const months = normalise(results["monthly-flows"]!);
    expect(months.map((r) => `${r.token} ${r.month} ${r.inflow} ${r.outflow} ${r.transfers_in} ${r.transfers_out}`)).toEqual(
      expected.months.map((r) => `${r.token} ${r.month} ${r.inflow} ${r.outflow} ${r.transfers_in} ${r.transfers_out}`).sort(),
    );

    const volumes = new Map<string, bigint>();
    for (const p of expected.counterparties) volumes.set(p.counterparty!, (volumes.get(p.counterparty!) ?? 0n) + BigInt(p.total_in!) + BigInt(p.total_out!));
    const topTruth = [...volumes].sort(([a, x], [b, y]) => (x === y ? a.localeCompare(b) : y > x ? 1 : -1)).slice(0, 10);
    expect(normalise(results["top-counterparties"]!).map((r) => [r.counterparty, r.volume])).toEqual(topTruth.map(([c, v]) => [c, String(v)]));

    // No passport was issued on this devnet: the query runs and finds none.
    expect(results["passports-by-status"]).toEqual([]);

    // The one paid screen: 0.01 in one token, today.
    const revenue = normalise(results["revenue-by-day"]!);
    expect(revenue).toHaveLength(1);
    expect([revenue[0]!.payments, revenue[0]!.revenue, revenue[0]!.payers]).toEqual(["1", "10000", "1"]);
    expect(new Date(revenue[0]!.day!).toISOString().slice(0, 10)).toBe(new Date().toISOString().slice(0, 10));
  });
});
