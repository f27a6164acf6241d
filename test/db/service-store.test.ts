import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { readMigrationFiles } from "drizzle-orm/migrator";
import { getTableConfig } from "drizzle-orm/pg-core";
import { afterAll, describe, expect, it } from "vitest";
import { batchRows, EXPOSURE_TOTAL, OPEN_EXPOSURE } from "../../api/payments/ledger/sql/rules.ts";
import { createSqlLedger } from "../../api/payments/ledger/sql/sql-ledger.ts";
import { EXPOSURE_SLOTS, PAYMENT_STATUSES, payment, paymentExposure } from "../../api/store/schema.ts";
import {
  MIGRATIONS_FOLDER,
  openServiceStore,
  type ServiceStore,
  type ServiceStoreLocation,
} from "../../api/store/store.ts";
import { type DatabaseSlot, databaseSlot, testDatabase } from "../support/indexer.ts";

// The service store is built by the committed drizzle-kit migrations, applied at open (see also
// test/service-store-migrations.test.ts, which keeps those migrations in step with schema.ts).

const slots: DatabaseSlot[] = [];
async function freshLocation(): Promise<ServiceStoreLocation> {
  // What the migrations make is the subject here: a store none has touched (not the slots' migrated copy).
  const slot = databaseSlot(testDatabase, undefined, { migrated: false });
  slots.push(slot);
  await slot.prepare();
  return slot.store;
}
afterAll(async () => {
  for (const slot of slots) await slot.drop();
});

type Row = Record<string, unknown>;

const rows = async (store: ServiceStore, query: ReturnType<typeof sql>) =>
  ((await store.db.execute(query)) as unknown as { rows: Row[] }).rows;

/** The table as the catalog sees it: columns, constraints, indexes. */
async function describeLedger(store: ServiceStore) {
  const columns = await rows(
    store,
    sql`select a.attname as name, format_type(a.atttypid, a.atttypmod) as type, a.attnotnull as "notNull",
               pg_get_expr(d.adbin, d.adrelid) as "default"
        from pg_attribute a left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
        where a.attrelid = 'service.payment'::regclass and a.attnum > 0 and not a.attisdropped order by a.attnum`,
  );
  const constraints = await rows(
    store,
    sql`select conname as name, contype as type, pg_get_constraintdef(oid) as definition
        from pg_constraint where conrelid = 'service.payment'::regclass order by conname`,
  );
  const indexes = await rows(
    store,
    sql`select indexname as name, indexdef as definition from pg_indexes where schemaname = 'service' and tablename = 'payment' order by indexname`,
  );
  return { columns, constraints, indexes };
}

const applied = async (store: ServiceStore) =>
  rows(store, sql`select hash, created_at from service.__drizzle_migrations order by id`);
const migrations = readMigrationFiles({ migrationsFolder: MIGRATIONS_FOLDER });

const entry = (nonce: string) => ({
  token: "0x00000000000000000000000000000000000000aa",
  payer: "0x00000000000000000000000000000000000000bb",
  nonce,
  amount: "10000",
  route: "POST /api/lender/screen",
  fingerprint: "f",
  signatureHash: "s",
  encoding: "x402",
  status: "settled" as const,
});

/** Opens `location` with the migrations a release before `tag` shipped, lets `write` fill it, and closes it. */
async function asReleasedBefore(
  tag: string,
  location: ServiceStoreLocation,
  write: (store: ServiceStore) => Promise<void>,
) {
  const earlier = mkdtempSync(join(tmpdir(), "migrations-before-"));
  try {
    cpSync(MIGRATIONS_FOLDER, earlier, { recursive: true });
    const journalPath = join(earlier, "meta/_journal.json");
    const journal = JSON.parse(readFileSync(journalPath, "utf8")) as { entries: { tag: string }[] };
    const upTo = journal.entries.findIndex((e) => e.tag === tag);
    writeFileSync(journalPath, JSON.stringify({ ...journal, entries: journal.entries.slice(0, upTo) }));
    const old = await openServiceStore(location, earlier);
    try {
      await write(old);
    } finally {
      await old.close();
    }
  } finally {
    rmSync(earlier, { recursive: true, force: true });
  }
}

describe(`service store migrations (${testDatabase})`, () => {
  it("a fresh store gets the table schema.ts declares, and drizzle's journal in the service schema", async () => {
    const store = await openServiceStore(await freshLocation());
    try {
      const fresh = await describeLedger(store);
      const config = getTableConfig(payment);
      expect(fresh.columns.map((c) => [c.name, c.type, c.notNull, c.default !== null])).toEqual(
        config.columns.map((c) => [c.name, c.getSQLType().replace(/, /g, ","), c.notNull, c.hasDefault]),
      );
      const pk = config.primaryKeys[0]!;
      expect(fresh.constraints).toEqual([
        { name: pk.getName(), type: "p", definition: `PRIMARY KEY (${pk.columns.map((c) => c.name).join(", ")})` },
        {
          name: config.checks[0]!.name,
          type: "c",
          definition: expect.stringMatching(/^CHECK .*'pending'.*'settled'.*'failed'.*'waived'/),
        },
      ]);
      expect(fresh.indexes.map((i) => i.name)).toEqual(
        [pk.getName(), ...config.indexes.map((i) => i.config.name)].sort(),
      );
      expect((await applied(store)).map((m) => Number(m.created_at))).toEqual(migrations.map((m) => m.folderMillis));

      await store.db.insert(payment).values(entry("0x01"));
      await expect(
        store.db.execute(sql`insert into service.payment (token, payer, nonce, amount, route, fingerprint, signature_hash, encoding, status)
        values ('t', 'p', 'n', 1, 'r', 'f', 's', 'e', 'bogus')`),
      ).rejects.toThrow(/payment_status_check/);
      await expect(store.db.insert(payment).values(entry("0x01"))).rejects.toThrow(/payment_pkey|duplicate key/);
    } finally {
      await store.close();
    }
  });

  it("reopening applies nothing twice and keeps the rows", async () => {
    const location = await freshLocation();
    const first = await openServiceStore(location);
    await first.db.insert(payment).values(entry("0x02"));
    await first.close();
    const again = await openServiceStore(location);
    try {
      expect(await applied(again)).toHaveLength(migrations.length);
      expect(await again.db.select().from(payment)).toHaveLength(1);
    } finally {
      await again.close();
    }
  });

  it("moves the signed transactions payment rows held (before migration 0011) to their own table, each once", async () => {
    const location = await freshLocation();
    // The migrations as the release before settlement_transaction shipped them.
    await asReleasedBefore("0011_settlement_transaction", location, async (old) => {
      await old.db.execute(sql`insert into service.payment
        (token, payer, nonce, amount, route, fingerprint, signature_hash, encoding, status, transaction, settler, settler_nonce, raw_transaction)
        values ('t', 'p', 'n1', 1, 'r', 'f', 's', 'e', 'settling', '0xa', '0xr', 5, '0xsigned-a'),
               ('t', 'p', 'n2', 1, 'r', 'f', 's', 'e', 'settling', '0xa', '0xr', 5, '0xsigned-a'),
               ('t', 'p', 'n3', 1, 'r', 'f', 's', 'e', 'settled', '0xb', '0xr', 6, '0xsigned-b'),
               ('t', 'p', 'n4', 1, 'r', 'f', 's', 'e', 'settled', '0xc', null, null, null)`);
    });
    const store = await openServiceStore(location);
    try {
      expect(
        await rows(
          store,
          sql`select transaction, settler, settler_nonce, raw_transaction from service.settlement_transaction order by transaction`,
        ),
      ).toEqual([
        { transaction: "0xa", settler: "0xr", settler_nonce: 5, raw_transaction: "0xsigned-a" },
        { transaction: "0xb", settler: "0xr", settler_nonce: 6, raw_transaction: "0xsigned-b" },
      ]);
      expect(await createSqlLedger(store.db).signedTransaction("0xa")).toBe("0xsigned-a");
      expect((await describeLedger(store)).columns.map((c) => c.name)).not.toContain("raw_transaction");
      expect(await store.db.select().from(payment)).toHaveLength(4);
    } finally {
      await store.close();
    }
  });

  it.runIf(testDatabase === "postgres")(
    "replicas opening one fresh store together all succeed, and migrate it once",
    async () => {
      const location = await freshLocation();
      const opened = await Promise.allSettled(Array.from({ length: 4 }, () => openServiceStore(location)));
      const stores = opened.flatMap((o) => (o.status === "fulfilled" ? [o.value] : []));
      try {
        expect(opened.flatMap((o) => (o.status === "rejected" ? [String(o.reason)] : []))).toEqual([]);
        expect(await applied(stores[0]!)).toHaveLength(migrations.length);
        await stores[1]!.db.insert(payment).values(entry("0x03"));
        expect(await stores[2]!.db.select().from(payment)).toHaveLength(1);
      } finally {
        await Promise.all(stores.map((s) => s.close()));
      }
    },
  );
});

/** `n` deferred payments in `status` over 64 payers, their nonces `prefix` and a number: a ledger's bulk, for the plans. */
const fill = (status: string, prefix: string, n: number) => sql`
  insert into ${payment} (token, payer, nonce, amount, route, fingerprint, signature_hash, encoding, status, deferred, valid_before, response_body)
  select '0xa1', '0xpayer' || (i % 64), ${prefix} || i, 10000, 'POST /api/lender/screen', 'f', 's', 'spec', ${status}, true, 9999999999, '{}'
  from generate_series(1, ${n}::int) as i`;

describe.runIf(testDatabase === "postgres")("payment ledger: what the exposure caps read (postgres)", () => {
  it("sums the open deferred rows from their own index: no index of every status offers a scan of the rewrites' dead entries", async () => {
    const store = await openServiceStore(await freshLocation());
    try {
      // A ledger that has run a while: settled rows, a queue of open deferred ones, each open row
      // rewritten as a payment moves (its dead versions left for vacuum), statistics taken.
      await store.db.execute(fill("settled", "0xs", 10_000));
      await store.db.execute(fill("pending", "0xq", 600));
      await store.db.execute(sql`update ${payment} set status = 'queued' where status = 'pending'`);
      await store.db.execute(sql`analyze ${payment}`);
      const plan = await rows(
        store,
        sql`explain (format json) select coalesce(sum(${payment.amount}), 0) from ${payment} where ${OPEN_EXPOSURE}`,
      );
      const text = JSON.stringify(plan);
      expect(text).toContain("payment_open_deferred");
      expect(text).not.toContain("payment_status_updated");
      // What the reconciler and /health read by age is all that index holds.
      const [partial] = await rows(
        store,
        sql`select pg_get_expr(indpred, indrelid) as predicate from pg_index where indexrelid = 'service.payment_status_updated'::regclass`,
      );
      expect(partial?.predicate).toBe("(status = ANY (ARRAY['pending'::text, 'settling'::text]))");
    } finally {
      await store.close();
    }
  });
});

describe.runIf(testDatabase === "postgres")("payment ledger: writes of rows named by key (postgres)", () => {
  it("look each row up by its primary key, even in a generic plan made on statistics that saw few rows open", async () => {
    const store = await openServiceStore(await freshLocation());
    try {
      // Statistics taken while nothing was open; then a busy queue, each open row rewritten.
      await store.db.execute(fill("settled", "0xs", 10_000));
      await store.db.execute(sql`analyze ${payment}`);
      await store.db.execute(fill("pending", "0xq", 600));
      await store.db.execute(
        sql`update ${payment} set status = 'settling', updated_at = now() where status = 'pending'`,
      );
      const plans = await store.db.transaction(async (tx) => {
        await tx.execute(sql`set local plan_cache_mode = force_generic_plan`);
        const explain = async (name: string, event: "settling" | "settled") => {
          await tx.execute(sql`prepare ${sql.raw(name)}(text[], text[], text[]) as
            update ${payment} set updated_at = now() from unnest($1::text[], $2::text[], $3::text[]) as v(token, payer, nonce)
            where ${batchRows(event)}`);
          const plan = await tx.execute(
            sql`explain (format json) execute ${sql.raw(name)}('{0xa1}', '{0xpayer1}', '{0xq1}')`,
          );
          return JSON.stringify((plan as unknown as { rows: Row[] }).rows);
        };
        return [await explain("settling_batch", "settling"), await explain("settled_batch", "settled")];
      });
      for (const plan of plans) {
        expect(plan).toContain("payment_pkey");
        expect(plan).not.toContain("payment_open_payer");
        expect(plan).not.toContain("payment_status_updated");
      }
    } finally {
      await store.close();
    }
  });
});

describe(`payment ledger: the total exposure kept by triggers (${testDatabase})`, () => {
  // Every combination of what OPEN_EXPOSURE reads: status, deferred, repaid or not, answered or not.
  // Amounts are powers of two, so equal sums mean the same rows.
  const combos = PAYMENT_STATUSES.flatMap((status) =>
    [true, false].flatMap((deferred) =>
      [null, "0xrepaid"].flatMap((repaidBy) => [null, "{}"].map((body) => ({ status, deferred, repaidBy, body }))),
    ),
  );
  /** Asserts the kept total equals the sum over OPEN_EXPOSURE's rows, and returns that sum. */
  const keptEqualsSum = async (store: ServiceStore) => {
    const [row] = await rows(
      store,
      sql`select ${EXPOSURE_TOTAL}::text as kept,
                 (select coalesce(sum(${payment.amount}), 0)::text from ${payment} where ${OPEN_EXPOSURE}) as summed`,
    );
    const { kept, summed } = row as { kept: string; summed: string };
    expect(kept).toBe(summed);
    return BigInt(summed);
  };
  /** Row i of the ledger takes combination `combo(i)`, all in one statement. */
  const moveAll = (combo: (i: number) => number) => {
    const states = combos.map((_, i) => combos[combo(i) % combos.length]!);
    return sql`update ${payment} set status = v.status, deferred = v.deferred, repaid_by = v.repaid_by, response_body = v.body
      from (values ${sql.join(
        states.map(
          (c, i) => sql`(${`0x${i}`}, ${c.status}, ${c.deferred}::boolean, ${c.repaidBy}::text, ${c.body}::text)`,
        ),
        sql`, `,
      )}) as v(nonce, status, deferred, repaid_by, body)
      where ${payment.nonce} = v.nonce`;
  };

  it("equals the sum of the rows OPEN_EXPOSURE selects after every kind of write, and from the rows a store had before it", async () => {
    const location = await freshLocation();
    const insertAll = sql`insert into ${payment} (token, payer, nonce, amount, route, fingerprint, signature_hash, encoding, status, deferred, repaid_by, response_body)
      values ${sql.join(
        combos.map(
          (c, i) =>
            sql`('0xa1', ${`0xpayer${i % 3}`}, ${`0x${i}`}, ${(2n ** BigInt(i)).toString()}::numeric, 'POST /api/lender/screen', 'f', 's', 'spec', ${c.status}, ${c.deferred}, ${c.repaidBy}::text, ${c.body}::text)`,
        ),
        sql`, `,
      )}`;
    // A ledger the release before the kept total wrote: migration 0020 sums it once.
    await asReleasedBefore("0019_payment_exposure", location, async (old) => {
      await old.db.execute(insertAll);
    });
    const store = await openServiceStore(location);
    try {
      expect(await rows(store, sql`select slot from ${paymentExposure} order by slot`)).toEqual(
        Array.from({ length: EXPOSURE_SLOTS }, (_, slot) => ({ slot })),
      );
      expect(await keptEqualsSum(store)).toBeGreaterThan(0n);
      // Batches moving every row into every other combination, over several statements.
      for (const step of [1, 7, 13, 29, 42]) {
        await store.db.execute(moveAll((i) => i + step));
        await keptEqualsSum(store);
      }
      // One row at a time, as the ledger's own writes move a payment.
      for (const state of ["pending", "queued", "settling", "failed", "settled"] as const) {
        await store.db.execute(
          sql`update ${payment} set status = ${state}, deferred = true, repaid_by = null, response_body = '{}' where ${payment.nonce} = '0x5'`,
        );
        await keptEqualsSum(store);
      }
      // Writers on several connections at once (Postgres: each its backend's slot).
      await Promise.all(
        combos.map((_, i) =>
          store.db.execute(
            sql`update ${payment} set status = ${i % 2 ? "settled" : "queued"}, deferred = true, repaid_by = null where ${payment.nonce} = ${`0x${i}`}`,
          ),
        ),
      );
      await keptEqualsSum(store);
      await store.db.execute(sql`delete from ${payment} where ${payment.payer} = '0xpayer1'`);
      await keptEqualsSum(store);
      await store.db.execute(sql`truncate ${payment}`);
      expect(await keptEqualsSum(store)).toBe(0n);
      await store.db.execute(insertAll);
      await keptEqualsSum(store);
    } finally {
      await store.close();
    }
  });
});

describe(`payment ledger: reads and claims made together (${testDatabase})`, () => {
  const base = {
    amount: 10_000n,
    route: "POST /api/lender/screen",
    subject: null,
    fingerprint: "f",
    signatureHash: "s",
    encoding: "spec",
    validBefore: 2n ** 40n,
  };
  const [usdt, usdc, a, b] = [
    "0x00000000000000000000000000000000000000a1",
    "0x00000000000000000000000000000000000000a2",
    "0x00000000000000000000000000000000000000aa",
    "0x00000000000000000000000000000000000000bb",
  ] as const;
  const auth = { signature: "0x01", validAfter: 0n };

  it("gives each payment of a batch its own row and its own payer's open amounts in its token", async () => {
    const store = await openServiceStore(await freshLocation());
    try {
      const ledger = createSqlLedger(store.db);
      await ledger.claim({ ...base, token: usdt, payer: b, nonce: "0x01", amount: 70_000n });
      await ledger.claim({ ...base, token: usdt, payer: a, nonce: "0x01" });
      await ledger.claim({ ...base, token: usdc, payer: a, nonce: "0x02", amount: 30_000n });
      const [first, absent, other] = await Promise.all([
        ledger.lookup({ token: usdt, payer: a, nonce: "0x01" }),
        ledger.lookup({ token: usdt, payer: a, nonce: "0x09" }),
        ledger.lookup({ token: usdt, payer: b, nonce: "0x09" }),
      ]);
      expect(first.row).toEqual(await ledger.find({ token: usdt, payer: a, nonce: "0x01" }));
      expect([first.open.unsettled, absent.row, absent.open.unsettled, other.open.unsettled]).toEqual([
        10_000n,
        undefined,
        10_000n,
        70_000n,
      ]);
      expect((await ledger.lookup({ token: usdc, payer: a, nonce: "0x09" })).open.unsettled).toBe(30_000n);
    } finally {
      await store.close();
    }
  });

  it("claims a new deferred payment with what its payer had open before it, never another payer's; once only; unclaim takes it back", async () => {
    const store = await openServiceStore(await freshLocation());
    try {
      const ledger = createSqlLedger(store.db);
      await ledger.claim({ ...base, token: usdt, payer: b, nonce: "0x01", amount: 70_000n });
      await ledger.claim({ ...base, token: usdt, payer: a, nonce: "0x01" });
      const claims = await Promise.all(
        ["0x11", "0x12", "0x13"].map((nonce) => ledger.claimFirst({ ...base, token: usdt, payer: a, nonce }, auth)),
      );
      // The first alone, the two made meanwhile together: none counts the rows of its own statement.
      expect(claims.map((c) => c?.unsettled)).toEqual([10_000n, 20_000n, 20_000n]);
      expect(await ledger.claimFirst({ ...base, token: usdt, payer: a, nonce: "0x11" }, auth)).toBeUndefined();
      expect((await ledger.claimFirst({ ...base, token: usdc, payer: a, nonce: "0x21" }, auth))?.unsettled).toBe(0n);
      await ledger.unclaim({ token: usdt, payer: a, nonce: "0x12" }, "s");
      expect(await ledger.find({ token: usdt, payer: a, nonce: "0x12" })).toBeUndefined();
      expect((await ledger.lookup({ token: usdt, payer: a, nonce: "0x12" })).open.unsettled).toBe(30_000n);
    } finally {
      await store.close();
    }
  });
});
