import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { PGlite } from "@electric-sql/pglite";
import { count, createClient, eq, sql, sum } from "@ponder/client";
import pg from "pg";
import { type Hex, zeroAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { type DataExecutor, pgliteExecutor, postgresExecutor } from "../../api/data/executor.ts";
import { readOnlyRunner } from "../../api/data/run.ts";
import { devnetDatabaseUrl } from "../../config/target.ts";
import { devnetClients } from "../../devnet/chain.ts";
import { rpc } from "../../devnet/rpc.ts";
import * as schema from "../../ponder.schema.ts";
import { ApiError } from "../../shared/errors.ts";
import { waitForReceipt } from "../../shared/receipt.ts";
import { type ChainTransfer, chainTransfers, expectedAggregates, normalise } from "../support/chain-truth.ts";
import type { TestDevnet } from "../support/devnet.ts";
import { type IndexedDevnet, indexedDevnet } from "../support/harness.ts";
import { type Indexer, testDatabase, waitFor, waitForBlock } from "../support/indexer.ts";
import { x402Fetch } from "../support/payments.ts";

// docs/data.md: the data listener (GraphQL, SQL over HTTP, /metrics) apart from the public port,
// @ponder/client against it on both databases, read-only whatever a query tries, within its limits,
// and every example of the page run as written.
const page = readFileSync(new URL("../../docs/data.md", import.meta.url), "utf8");
const examples = (lang: string) =>
  Object.fromEntries(
    [...page.matchAll(new RegExp(`\`\`\`${lang} example=([\\w-]+)\\n([\\s\\S]*?)\`\`\``, "g"))].map((m) => [
      m[1]!,
      m[2]!,
    ]),
  );
const sqlExamples = examples("sql");
const graphqlExamples = examples("graphql");

const MAX_ROWS = 100;
/** Ponder 0.17.7's guard caches its verdict under these 40 bits of the query's sha256. */
const cacheKey = (text: string) => createHash("sha256").update(text).digest("hex").slice(0, 10);
/** Writes, however disguised, and function calls with side effects: none may change anything. */
const WRITES = {
  update: "update transfer set value = 0",
  insert: "insert into transfer select * from transfer limit 1",
  delete: "delete from transfer",
  "a write in a CTE": "with gone as (delete from transfer returning 1) select count(*) from gone",
  "select into": "select * into stolen from transfer",
  "for update": "select * from transfer for update",
  copy: "copy transfer to stdout",
  set: "set transaction read write",
  "a second statement": "select 1; commit; update transfer set value = 0",
  set_config: "select set_config('data.probe', 'written', false)",
  nextval: "select nextval('some_sequence')",
  "an advisory lock": "select pg_advisory_lock(4202200001)", // the service store's migration lock
  lo_create: "select lo_create(0)",
  "ending a backend": "select pg_terminate_backend(pg_backend_pid())",
};

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
    // Low limits, so that a cross join is cut off within seconds and a plain select hits the row cap.
    indexer = await env.index({
      DATABASE_VIEWS_SCHEMA: viewsSchema(),
      DATA_HOST: "127.0.0.1",
      // Long enough for the test to see the cross join running on a loaded machine (with 1 s, a
      // clean-clone CI run missed it and waited out its timeout).
      DATA_QUERY_TIMEOUT_MS: "3000",
      DATA_QUERY_MAX_ROWS: String(MAX_ROWS),
    });
    await waitForBlock(indexer, devnet.manifest.headBlock);
    wallet = devnet.manifest.personas.merchant!.address.toLowerCase();
    // One paid screen: revenue for the ledger example (its settlement is one more transfer).
    const paidFetch = x402Fetch(devnet.manifest.lenders[0]!.privateKey as Hex, Object.values(devnet.manifest.tokens));
    const res = await paidFetch(`${indexer.url}/api/lender/screen`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ walletAddress: wallet }),
    });
    expect(res.status).toBe(200);
    // One realtime block with more than 20 updates of existing rows (`received` of 25 wallets): Ponder
    // flushes them through a TEMP table named like the real one, which on PGlite stays in the
    // session @ponder/client's SQL runs on (#2235).
    const before = await chainTransfers(
      devnet.manifest.rpcUrl,
      [devnet.manifest.tokens.USDT.address],
      BigInt(devnet.manifest.startBlock),
    );
    const recipients = [...new Set(before.map((t) => t.to))].filter((w) => w !== zeroAddress).slice(0, 25);
    const lender = devnet.manifest.lenders[1]!;
    const { publicClient, walletClient } = devnetClients(devnet.manifest.rpcUrl, lender.privateKey as Hex);
    await rpc(devnet.manifest.rpcUrl, "evm_setAutomine", [false]);
    try {
      const nonce = await publicClient.getTransactionCount({ address: lender.address as Hex, blockTag: "pending" });
      const hashes: Hex[] = [];
      for (const [i, to] of recipients.entries())
        hashes.push(
          await walletClient.writeContract({
            address: devnet.manifest.tokens.USDT.address as Hex,
            abi: devStablecoinAbi,
            functionName: "transfer",
            args: [to as Hex, 1000n + BigInt(i)],
            nonce: nonce + i,
            gas: 100_000n,
          }),
        );
      await rpc(devnet.manifest.rpcUrl, "evm_mine", []);
      for (const hash of hashes) expect((await waitForReceipt(publicClient, { hash })).status).toBe("success");
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
    for (const path of [
      "/graphql",
      "/graphql/",
      "/sql/db?sql=x",
      "/sql/live",
      "/metrics",
      "/metrics?x=1",
      "//metrics",
      "/%6Detrics",
    ]) {
      for (const method of ["GET", "POST"]) {
        const res = await fetch(`${indexer.url}${path}`, { method });
        expect([path, method, res.status, res.headers.get("content-type")]).toEqual([
          path,
          method,
          404,
          "application/json",
        ]);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe("not_found");
      }
    }
    // The public API itself is untouched.
    expect((await fetch(`${indexer.url}/api/stats`)).status).toBe(200);
    const metrics = await fetch(`${indexer.dataUrl}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain("ponder_");
    const unknown = await fetch(`${indexer.dataUrl}/api/stats`);
    expect([unknown.status, ((await unknown.json()) as { error: { code: string } }).error.code]).toEqual([
      404,
      "not_found",
    ]);
  });

  it("answers @ponder/client over SQL: counts and sums equal the chain's", async () => {
    const client = createClient(`${indexer.dataUrl}/sql`, { schema });
    const [all] = await client.db.select({ n: count(), total: sum(schema.transfer.value) }).from(schema.transfer);
    expect(all).toEqual({ n: transfers.length, total: String(transfers.reduce((s, t) => s + t.value, 0n)) });

    const expected = truthOf(wallet);
    const months = await client.db
      .select()
      .from(schema.accountMonth)
      .where(eq(schema.accountMonth.address, wallet as Hex));
    const byMonth = (rows: { token: string; month: string; inflow: unknown; outflow: unknown }[]) =>
      rows.map((r) => `${r.token} ${r.month} ${String(r.inflow)} ${String(r.outflow)}`).sort();
    expect(months.length).toBeGreaterThan(6);
    expect(byMonth(months)).toEqual(byMonth(expected.months as never));

    // `received` was just updated through Ponder's TEMP table of the same name: still every row.
    const received = await client.db.select({ n: count(), total: sum(schema.received.total) }).from(schema.received);
    const incoming = transfers.filter((t) => t.to !== zeroAddress);
    expect(received[0]).toEqual({
      n: new Set(incoming.map((t) => t.to)).size,
      total: String(incoming.reduce((s, t) => s + t.value, 0n)),
    });

    const pairs = await client.db
      .select({ n: count() })
      .from(schema.counterparty)
      .where(eq(schema.counterparty.address, wallet as Hex));
    expect(pairs[0]!.n).toBe(expected.counterparties.length);

    // A raw, unqualified statement, a CTE and a view over a join: the same answers.
    const raw = await client.db.execute(
      sql`with t as (select value from transfer) select count(*)::int as n, sum(value)::text as total from t`,
    );
    expect(raw[0]).toEqual({ n: transfers.length, total: all!.total });

    // The read-only guard: writes and schema-qualified names are refused.
    await expect(client.db.execute(sql`delete from transfer`)).rejects.toThrow();
    await expect(client.db.execute(sql`select count(*) from pg_catalog.pg_class`)).rejects.toThrow();
  });

  type Refusal = {
    status: number;
    type: string | null;
    body: { error?: { code: string; message: string }; rows?: Record<string, unknown>[] };
  };
  /** A query as @ponder/client sends it: `?sql=` superjson of { sql, params } (plain JSON under `json`). */
  const sqlUrl = (path: "db" | "live", text: string) =>
    `${indexer.dataUrl}/sql/${path}?sql=${encodeURIComponent(JSON.stringify({ json: { sql: text, params: [] } }))}`;
  const query = async (text: string): Promise<Refusal> => {
    const res = await fetch(sqlUrl("db", text));
    return { status: res.status, type: res.headers.get("content-type"), body: (await res.json()) as Refusal["body"] };
  };
  const answer = (r: Refusal) => [r.status, r.type, r.body.error?.code];
  const intact = async () => {
    const [all] = (await query("select count(*)::int as n, sum(value)::text as total from transfer")).body.rows!;
    expect(all).toEqual({ n: transfers.length, total: String(transfers.reduce((s, t) => s + t.value, 0n)) });
  };

  it("refuses every write over SQL, in JSON, and nothing changes", async () => {
    for (const [name, text] of Object.entries(WRITES))
      expect([name, ...answer(await query(text))]).toEqual([name, 400, "application/json", "query_not_allowed"]);
    // A read, then a write with the same 40-bit cache key in Ponder's guard (found offline in 5 s):
    // Ponder's guard let the write through on the read's verdict; ours parses every query.
    const read = "select count(*) as n from transfer /* b6zv */";
    const write = "update transfer set value = 0 /* j584 */";
    expect(cacheKey(read)).toBe(cacheKey(write));
    expect(Number((await query(read)).body.rows![0]!.n)).toBe(transfers.length);
    expect(answer(await query(write))).toEqual([400, "application/json", "query_not_allowed"]);
    // Live queries go through the same guard.
    const live = await fetch(sqlUrl("live", write));
    expect([live.status, ((await live.json()) as Refusal["body"]).error?.code]).toEqual([400, "query_not_allowed"]);
    await intact();
    if (env.slot.kind === "postgres") {
      // No connection of the listener holds an advisory lock (a held one would block the service store's migrations).
      const client = new pg.Client({ connectionString: devnetDatabaseUrl(env.slot.env.DATABASE_URL!) });
      await client.connect();
      try {
        const held = await client.query(
          `select 1 from pg_locks l join pg_stat_activity a using (pid) where l.locktype = 'advisory' and a.application_name = 'data_listener'`,
        );
        expect(held.rowCount).toBe(0);
      } finally {
        await client.end();
      }
    }
  });

  it("serves the indexed tables and views only: not Ponder's internal tables, the service store or the catalogs", async () => {
    const schemaName = env.slot.schema;
    for (const text of [
      "select * from _ponder_meta",
      "select * from _ponder_checkpoint",
      "select * from _reorg__transfer",
      "select * from live_query_tables",
      "select * from service.payment",
      "select * from payment",
      `select * from "${schemaName}".transfer`,
      "select * from pg_class",
      "select * from information_schema.tables",
      "with meta as (select * from _ponder_meta) select * from meta",
      // A CTE's name covers its own statement, after its definition: these `_ponder_meta` are the table.
      "with _ponder_meta as (select * from _ponder_meta) select * from _ponder_meta",
      "select * from _ponder_meta, (with _ponder_meta as (select 1) select * from _ponder_meta) s",
    ])
      expect([text, ...answer(await query(text))]).toEqual([text, 400, "application/json", "query_not_allowed"]);
  });

  it("answers a query's faults in JSON and caps the rows", async () => {
    const missing = await fetch(`${indexer.dataUrl}/sql/db`);
    expect([missing.status, ((await missing.json()) as Refusal["body"]).error?.code]).toEqual([400, "invalid_query"]);
    expect(answer(await query("selec * from transfer"))).toEqual([400, "application/json", "invalid_query"]);
    expect(answer(await query("select nosuch from transfer"))).toEqual([400, "application/json", "query_error"]);
    expect(transfers.length).toBeGreaterThan(MAX_ROWS);
    expect(answer(await query("select * from transfer"))).toEqual([413, "application/json", "too_many_rows"]);
    expect((await query(`select * from transfer order by block_number limit ${MAX_ROWS}`)).body.rows).toHaveLength(
      MAX_ROWS,
    );
  });

  it("cuts off a cross join, and the public API answers meanwhile", async () => {
    const cross = "select count(*) from transfer a, transfer b, transfer c, transfer d";
    if (env.slot.kind === "pglite") {
      // PGlite cannot interrupt a running query (it runs on the process's one thread, and ignores
      // statement_timeout): the listener refuses it before it runs, from the planner's estimate.
      expect(answer(await query(cross))).toEqual([400, "application/json", "query_too_expensive"]);
      expect((await fetch(`${indexer.url}/api/stats`)).status).toBe(200);
      return;
    }
    const client = new pg.Client({ connectionString: devnetDatabaseUrl(env.slot.env.DATABASE_URL!) });
    await client.connect();
    try {
      let finished = false;
      const pending = query(cross).finally(() => (finished = true));
      // Once the listener's connection runs it, the public API answers from connections of its own.
      const running = `select 1 from pg_stat_activity where datname = current_database() and application_name = 'data_listener' and state = 'active' and query like 'fetch%'`;
      const seen = await waitFor(
        "the cross join to run",
        async () => ((await client.query(running)).rowCount ? true : finished ? false : undefined),
        indexer,
      );
      expect(seen, "the cross join seen running before it ended").toBe(true);
      expect((await fetch(`${indexer.url}/api/stats`)).status).toBe(200);
      expect(finished).toBe(false);
      expect(answer(await pending)).toEqual([400, "application/json", "query_timeout"]);
    } finally {
      await client.end();
    }
    await intact();
  });

  it("streams live queries of the indexed tables", async () => {
    const live = await waitFor(
      "live queries",
      async () => {
        const res = await fetch(sqlUrl("live", "select count(*) from transfer"));
        if (res.status === 200) return res;
        await res.body?.cancel();
        return undefined;
      },
      indexer,
    );
    expect(live.headers.get("content-type")).toContain("text/event-stream");
    await live.body?.cancel();
  });

  it("runs the GraphQL examples of docs/data.md", async () => {
    expect(Object.keys(graphqlExamples)).toEqual(["monthly-flows", "top-counterparties", "latest-transfers"]);
    const run = async (name: string) => {
      const res = await fetch(`${indexer.dataUrl}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ query: graphqlExamples[name], variables: { wallet } }),
      });
      const body = (await res.json()) as {
        data?: Record<string, { items: Record<string, unknown>[]; totalCount?: number }>;
        errors?: unknown;
      };
      expect([res.status, body.errors]).toEqual([200, undefined]);
      return Object.values(body.data!)[0]!;
    };
    const expected = truthOf(wallet);

    const months = await run("monthly-flows");
    expect(months.items.map((r) => `${r.token} ${r.month} ${r.inflow} ${r.outflow}`).sort()).toEqual(
      expected.months.map((r) => `${r.token} ${r.month} ${r.inflow} ${r.outflow}`).sort(),
    );

    const top = await run("top-counterparties");
    const topTruth = [...expected.counterparties]
      .sort((a, b) => Number(BigInt(b.total_in!) - BigInt(a.total_in!)))
      .slice(0, 10);
    expect(top.items.map((r) => String(r.totalIn))).toEqual(topTruth.map((r) => r.total_in));

    const latest = await run("latest-transfers");
    const sent = transfers.filter((t) => t.from === wallet);
    expect(latest.totalCount).toBe(sent.length);
    expect(latest.items.map((r) => String(r.timestamp))).toEqual(
      sent
        .map((t) => String(t.timestamp))
        .sort((a, b) => Number(b) - Number(a))
        .slice(0, 5),
    );
  });

  it("runs the SQL examples of docs/data.md over the stable views schema", async () => {
    expect(Object.keys(sqlExamples)).toEqual([
      "monthly-flows",
      "top-counterparties",
      "passports-by-status",
      "revenue-by-day",
    ]);
    const bind = (text: string) => text.replaceAll(":'wallet'", `'${wallet}'`);
    const results: Record<string, Record<string, unknown>[]> = {};
    if (env.slot.kind === "postgres") {
      // Read while the service runs, as a data team would; the views appear once the backfill is done.
      const client = new pg.Client({ connectionString: devnetDatabaseUrl(env.slot.env.DATABASE_URL!) });
      await client.connect();
      try {
        await waitFor(
          "the views schema",
          async () =>
            (
              await client.query(
                `select 1 from information_schema.views where table_schema = $1 and table_name = 'account_month'`,
                [viewsSchema()],
              )
            ).rowCount
              ? true
              : undefined,
          indexer,
        );
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
        for (const [name, text] of Object.entries(sqlExamples))
          if (name !== "revenue-by-day") results[name] = (await db.query<Record<string, unknown>>(bind(text))).rows;
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
    expect(
      months.map((r) => `${r.token} ${r.month} ${r.inflow} ${r.outflow} ${r.transfers_in} ${r.transfers_out}`),
    ).toEqual(
      expected.months
        .map((r) => `${r.token} ${r.month} ${r.inflow} ${r.outflow} ${r.transfers_in} ${r.transfers_out}`)
        .sort(),
    );

    const volumes = new Map<string, bigint>();
    for (const p of expected.counterparties)
      volumes.set(p.counterparty!, (volumes.get(p.counterparty!) ?? 0n) + BigInt(p.total_in!) + BigInt(p.total_out!));
    const topTruth = [...volumes]
      .sort(([a, x], [b, y]) => (x === y ? a.localeCompare(b) : y > x ? 1 : -1))
      .slice(0, 10);
    expect(normalise(results["top-counterparties"]!).map((r) => [r.counterparty, r.volume])).toEqual(
      topTruth.map(([c, v]) => [c, String(v)]),
    );

    // No passport was issued on this devnet: the query runs and finds none.
    expect(results["passports-by-status"]).toEqual([]);

    // The one paid screen: 0.01 in one token, today.
    const revenue = normalise(results["revenue-by-day"]!);
    expect(revenue).toHaveLength(1);
    expect([revenue[0]!.payments, revenue[0]!.revenue, revenue[0]!.payers]).toEqual(["1", "10000", "1"]);
    expect(new Date(revenue[0]!.day!).toISOString().slice(0, 10)).toBe(new Date().toISOString().slice(0, 10));
  });

  // After the examples: on PGlite the service is stopped by now, so its database can be opened here.
  it("has the database refuse writes even with the guard out of the way", async () => {
    let executor: DataExecutor;
    let pglite: PGlite | undefined;
    if (env.slot.kind === "postgres")
      executor = postgresExecutor(devnetDatabaseUrl(env.slot.env.DATABASE_URL!), 1); // one connection: what a query leaves is seen by the next
    else executor = pgliteExecutor((pglite = new PGlite(env.slot.env.PGLITE_DIR!)));
    const run = readOnlyRunner(executor, {
      namespace: env.slot.schema,
      limits: { timeoutMs: 5000, maxRows: 1_000_000 },
    });
    const outcome = (text: string) =>
      run({ sql: text, params: [] }).then(
        () => "ran",
        (error: unknown) => (error instanceof ApiError ? `${error.status} ${error.code}` : String(error)),
      );
    try {
      const [sequence] = (
        await run({
          sql: "select format('%I.%I', schemaname, sequencename) as name from pg_sequences limit 1",
          params: [],
        })
      ).rows;
      expect(sequence?.name).toBeTruthy();
      const writes = { ...WRITES, nextval: `select nextval('${sequence!.name}')` };
      // Not run here: ending a backend. A read-only transaction may do it; only the guard stops it.
      const allowed = [
        "set_config",
        "an advisory lock",
        "ending a backend",
        ...(env.slot.kind === "postgres" ? ["lo_create"] : []),
      ];
      const outcomes: Record<string, string> = {};
      for (const [name, text] of Object.entries(writes))
        if (!allowed.includes(name)) outcomes[name] = await outcome(text);
      // The cursor takes one SELECT only (a second statement is refused by the extended protocol),
      // and the READ ONLY transaction refuses what writes from inside a SELECT.
      expect(outcomes).toEqual({
        update: "400 query_error",
        insert: "400 query_error",
        delete: "400 query_error",
        "a write in a CTE": "400 query_not_allowed",
        "select into": "400 query_error",
        "for update": "400 read_only",
        copy: "400 query_error",
        set: "400 query_error",
        "a second statement": "400 query_error",
        nextval: "400 read_only",
        ...(env.slot.kind === "pglite" ? { lo_create: "400 read_only" } : {}),
      });
      // What the database allows a read-only transaction is undone: each query ends in ROLLBACK and
      // its advisory locks are released.
      expect(await outcome(writes.set_config)).toBe("ran");
      expect(await outcome(writes["an advisory lock"])).toBe("ran");
      if (env.slot.kind === "postgres") expect(await outcome(writes.lo_create)).toBe("ran");
      const [after] = (
        await run({
          sql: `select current_setting('data.probe', true) as probe, (select count(*)::int from pg_locks where locktype = 'advisory' and pid = pg_backend_pid()) as locks, (select count(*)::int from pg_largeobject_metadata) as objects`,
          params: [],
        })
      ).rows;
      expect(after).toEqual({ probe: expect.not.stringMatching(/written/), locks: 0, objects: 0 });
      const [all] = (
        await run({ sql: "select count(*)::int as n, sum(value)::text as total from transfer", params: [] })
      ).rows;
      expect(all).toEqual({ n: transfers.length, total: String(transfers.reduce((s, t) => s + t.value, 0n)) });
    } finally {
      await executor.close();
      await pglite?.close();
    }
  });
});
