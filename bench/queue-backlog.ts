import { parseArgs } from "node:util";
import { sql } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import pg from "pg";
import { EXPOSURE_TOTAL, OPEN_EXPOSURE } from "../api/payments/ledger/sql/rules.ts";
import { createSqlLedger } from "../api/payments/ledger/sql/sql-ledger.ts";
import { EXPIRY_MARGIN_SECONDS } from "../api/payments/lifecycle.ts";
import { payment } from "../api/store/schema.ts";
import { openServiceStore } from "../api/store/store.ts";
import { databaseSlot } from "../harness/indexer.ts";
import { log, ms, pct } from "./support/figures.ts";

// npm run bench:queue -- [--backlog 20000] [--settled 180000] [--batch 40] [--runs 20]
// The deferred settlement queue after an outage (the RPC down, say): `backlog` answers queued and
// not sent yet, among `settled` payments settled long ago, in a Postgres store of their own. What
// the settlement worker pays on each run for the queue: taking one batch (soonest validBefore
// first) and looking for authorizations about to expire (none here). Measured with the queue's
// index (payment_queued_valid_before) and again without it, dropped in this run's database: the
// ratio is what the index saves. The total cap bounds the queue: 2,000 one-cent answers at the
// default X402_DEFERRED_MAX_TOTAL (20 USD), 20,000 (the default backlog here) at 200 USD. And what
// the total cap reads on each deferred answer: the total kept by triggers, against summing it.
const { values } = parseArgs({
  options: {
    backlog: { type: "string", default: "20000" },
    settled: { type: "string", default: "180000" },
    batch: { type: "string", default: "40" },
    runs: { type: "string", default: "20" },
  },
});
const backlog = Number(values.backlog);
const settled = Number(values.settled);
const batch = Number(values.batch);
const runs = Number(values.runs);
const TOKEN = "0x00000000000000000000000000000000000000a1";

// A database of its own on the test server, dropped at the end (harness/indexer.ts's slot).
const slot = databaseSlot("postgres");
await slot.prepare();
if (slot.store.kind !== "postgres") throw new Error("a Postgres slot has a Postgres store");
const store = await openServiceStore(slot.store);
const client = new pg.Client({ connectionString: slot.store.connectionString });
await client.connect();

try {
  log(`${backlog} queued payments among ${backlog + settled}, answers of 2.5 kB each…`);
  // Every (backlog + settled)/backlog-th row queued, the rest settled: the queue spread over the table.
  const every = Math.max(1, Math.round((backlog + settled) / backlog));
  await client.query(
    `insert into service.payment (token, payer, nonce, amount, route, fingerprint, signature_hash, encoding,
       status, deferred, signature, valid_after, valid_before, response_status, response_type, response_body)
     select $1, '0x' || lpad(to_hex(g % 64), 40, '0'), '0x' || lpad(to_hex(g), 64, '0'), 10000, 'POST /api/lender/screen', 'f', 's', 'spec',
       case when g % $2 = 0 then 'queued' else 'settled' end, true, '0x01', 0, 4000000000 + g, 200, 'application/json', repeat('x', 2500)
     from generate_series(1, $3) g`,
    [TOKEN, every, backlog + settled],
  );
  await client.query("analyze service.payment");
  const ledger = createSqlLedger(store.db);

  /** Median time of `runs` takes of one batch, then of `runs` expiry checks (nothing expires). */
  const measure = async () => {
    const takes: number[] = [];
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now();
      const taken = await ledger.takeQueued(batch, [TOKEN]);
      takes.push(performance.now() - t0);
      if (taken.length !== batch) throw new Error(`took ${taken.length} rows, not ${batch}`);
    }
    const expiries: number[] = [];
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now();
      await ledger.expireQueued(Math.floor(Date.now() / 1000), EXPIRY_MARGIN_SECONDS);
      expiries.push(performance.now() - t0);
    }
    return { take: pct(takes, 50), expire: pct(expiries, 50) };
  };

  // The total cap, read by every deferred answer's queue statement: the kept total (migration
  // 0020's triggers moved it as the rows above went in) against the sum over the open payments
  // it replaced, which grows with what is open (these rows fresh: no dead versions to skip).
  const timed = async (query: string) => {
    const times: number[] = [];
    let value = "";
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now();
      value = (await client.query<{ total: string }>(query)).rows[0]!.total;
      times.push(performance.now() - t0);
    }
    return { p50: pct(times, 50), value };
  };
  const dialect = new PgDialect();
  const kept = await timed(dialect.sqlToQuery(sql`select ${EXPOSURE_TOTAL}::text as total`).sql);
  const summed = await timed(
    dialect.sqlToQuery(
      sql`select coalesce(sum(${payment.amount}), 0)::text as total from ${payment} where ${OPEN_EXPOSURE}`,
    ).sql,
  );
  if (kept.value !== summed.value) throw new Error(`the kept total ${kept.value} is not the open sum ${summed.value}`);

  const indexed = await measure();
  await client.query("drop index service.payment_queued_valid_before");
  await client.query("analyze service.payment");
  const scanned = await measure();

  console.log(
    `\nSettlement queue with a backlog: ${backlog} queued among ${backlog + settled} payments, p50 of ${runs} runs each`,
  );
  const line = (what: string, a: number, b: number) =>
    console.log(`  ${what.padEnd(44)} ${ms(a)} with the queue's index, ${ms(b)} without: x${(b / a).toFixed(1)}`);
  line(`take a batch of ${batch} (soonest validBefore first)`, indexed.take, scanned.take);
  line("look for authorizations about to expire", indexed.expire, scanned.expire);
  console.log(
    `  ${`the total cap's read (${backlog} open, ${Number(kept.value) / 1e6} USD)`.padEnd(44)} ${ms(kept.p50)} kept (payment_exposure), ${ms(summed.p50)} summed over the open payments: x${(summed.p50 / kept.p50).toFixed(1)}`,
  );
} finally {
  await client.end();
  await store.close();
  await slot.drop();
}
