import { sql } from "drizzle-orm";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import type { Ledger } from "../../api/payments/ledger/ledger.ts";
import { createSqlLedger } from "../../api/payments/ledger/sql/sql-ledger.ts";
import {
  creditLease,
  creditLot,
  creditSpend,
  creditToken,
  payment,
  SERVICE_SCHEMA,
  signInNonce,
} from "../../api/store/schema.ts";
import { openServiceStore, type ServiceStore } from "../../api/store/store.ts";
import type { Address } from "../../config/addresses.ts";
import { sleep } from "../../shared/async.ts";
import { ledgerContract } from "../ledger/contract.ts";
import { databaseSlot, testDatabase } from "../support/indexer.ts";
import { settledCredit } from "../support/payments.ts";

// One store for the suite, emptied before each test: the contract's tests need no history.
const slot = databaseSlot();
let store: ServiceStore | undefined;
afterAll(async () => {
  await store?.close();
  await slot.drop();
});

/** The suite's store, opened on first use. */
async function opened(): Promise<ServiceStore> {
  if (!store) {
    await slot.prepare();
    store = await openServiceStore(slot.store);
  }
  return store;
}

ledgerContract(`SQL on ${testDatabase}`, async () => {
  const { db } = await opened();
  await db.delete(payment);
  await db.delete(signInNonce);
  await db.delete(creditLot);
  await db.delete(creditSpend);
  await db.delete(creditToken);
  await db.delete(creditLease);
  const back = (ms: number) => sql.raw(`interval '${ms} milliseconds'`);
  return {
    ledger: createSqlLedger(db),
    elapse: async (ms) => {
      await db.update(payment).set({
        createdAt: sql`${payment.createdAt} - ${back(ms)}`,
        updatedAt: sql`${payment.updatedAt} - ${back(ms)}`,
        settledAt: sql`${payment.settledAt} - ${back(ms)}`,
        reconciledAt: sql`${payment.reconciledAt} - ${back(ms)}`,
      });
      await db.update(creditLot).set({
        createdAt: sql`${creditLot.createdAt} - ${back(ms)}`,
        expiresAt: sql`${creditLot.expiresAt} - ${back(ms)}`,
      });
      await db.update(creditSpend).set({
        createdAt: sql`${creditSpend.createdAt} - ${back(ms)}`,
        updatedAt: sql`${creditSpend.updatedAt} - ${back(ms)}`,
      });
      await db.update(creditLease).set({
        createdAt: sql`${creditLease.createdAt} - ${back(ms)}`,
        renewedAt: sql`${creditLease.renewedAt} - ${back(ms)}`,
      });
    },
  };
});

const USDT = "0x00000000000000000000000000000000000000a1" as Address;

// Row locks between connections: Postgres only (PGlite is one connection).
describe.runIf(testDatabase === "postgres")("credit: row locks between connections (Postgres)", () => {
  /** A ledger on the suite's store, its credit emptied. */
  const emptyCredit = async () => {
    const { db } = await opened();
    await db.delete(creditSpend);
    await db.delete(creditLease);
    await db.delete(creditLot);
    await db.delete(payment);
    return { db, ledger: createSqlLedger(db) };
  };
  /** A 10,000 call of `owner` answered and recorded from lease `lease`. */
  const recordCall = (ledger: Ledger, id: string, lease: string, owner: Address) =>
    ledger.credit.recordSpend({
      id,
      lease,
      owner,
      tokenHash: null,
      route: "POST /api/lender/screen",
      subject: null,
      fingerprint: "f",
      amount: 10_000n,
      answer: { status: 200, type: "application/json", body: "{}" },
    });
  /**
   * `first` on a ledger of its own, in a transaction committed 300 ms after `then` began on another
   * connection (waiting for the rows `first` locked): what each returned.
   */
  const committedWhile = async <T, U>(
    db: ServiceStore["db"],
    first: (ledger: Ledger) => Promise<T>,
    then: () => Promise<U>,
  ): Promise<[T, U]> => {
    let started: Promise<U> | undefined;
    const done = await db.transaction(async (tx) => {
      const result = await first(createSqlLedger(tx as unknown as typeof db));
      started = then();
      await sleep(300);
      return result;
    });
    return [done, await started!];
  };
  /** Another connection to the store, ended after `fn`. */
  const onAnotherConnection = async <T>(fn: (client: pg.Client) => Promise<T>): Promise<T> => {
    const client = new pg.Client({ connectionString: (slot.store as { connectionString: string }).connectionString });
    await client.connect();
    try {
      return await fn(client);
    } finally {
      await client.end();
    }
  };
  /**
   * `write` while a recording of a 10,000 call of `owner` paid from lease L (30,000 of its 50,000)
   * is under way on another connection: the lease locked, the spend written, committed 300 ms after
   * `write` began. The ledger, and what `write` returned.
   */
  const whileRecording = async <T>(owner: Address, id: string, write: (ledger: Ledger) => Promise<T>) => {
    const { ledger } = await emptyCredit();
    await settledCredit(ledger, { token: USDT, payer: owner, nonce: "0x01" }, 50_000n);
    await ledger.credit.openLease({ id: "L", owner, want: 30_000n, least: 10_000n });
    const written = await onAnotherConnection(async (recording) => {
      await recording.query("begin");
      await recording.query(`select 1 from ${SERVICE_SCHEMA}.credit_lease where id = 'L' for update`);
      await recording.query(
        `insert into ${SERVICE_SCHEMA}.credit_spend (id, owner, route, subject, fingerprint, amount, lease, status, response_status, response_type)
         values ($2, $1, 'POST /api/lender/screen', null, 'f', 10000, 'L', 'spent', 200, 'application/json')`,
        [owner, id],
      );
      await recording.query(`update ${SERVICE_SCHEMA}.credit_lease set spent = spent + 10000 where id = 'L'`);
      const writing = write(ledger);
      await sleep(300);
      await recording.query("commit");
      return writing;
    });
    return { ledger, written };
  };

  it("a release waits behind a hold that locked the owner's soonest lot, and neither deadlocks: both go through", async () => {
    const { db, ledger } = await emptyCredit();
    const owner = "0x00000000000000000000000000000000000000cc" as Address;
    // Six lots of 10,000, the first to expire first; a spend that draws from every one of them.
    const nonces = Array.from({ length: 6 }, (_, i) => `0x${(0xf0 - i * 7).toString(16)}`);
    for (const [i, nonce] of nonces.entries())
      await settledCredit(
        ledger,
        { token: USDT, payer: owner, nonce },
        10_000n,
        new Date(Date.now() + (i + 1) * 86_400_000),
      );
    const spend = {
      payer: { owner },
      route: "POST /api/lender/screen",
      subject: null,
      fingerprint: "f",
      paymentId: null,
    };
    expect(await ledger.credit.hold({ ...spend, id: "all", amount: 55_000n })).toHaveProperty("held");
    // Written last to first, as a lease's close gives back (latest to expire first): the order a
    // scan of the table now meets them in, and the order a release wrote them in before its fix.
    for (const nonce of [...nonces].reverse())
      await db.execute(sql`update ${creditLot} set remaining = remaining where ${creditLot.nonce} = ${nonce}`);

    // Another connection takes the lots as a hold does, soonest to expire first: the first, then the
    // release starts, then the others.
    await onAnotherConnection(async (hold) => {
      const lock = (nonce: string) =>
        hold.query(`select remaining from ${SERVICE_SCHEMA}.credit_lot where payer = $1 and nonce = $2 for update`, [
          owner,
          nonce,
        ]);
      await hold.query("begin");
      await lock(nonces[0]!);
      const release = ledger.credit.release("all");
      await sleep(300); // the release is waiting for the first lot by now
      for (const nonce of nonces.slice(1)) await lock(nonce);
      await hold.query("commit");
      await release;
    });
    expect(await ledger.credit.balance(owner)).toBe(60_000n);
  });

  it("opens a lease behind a close that gives units back to the same lot: the opening waits for it, then draws what it gave back", async () => {
    const { db, ledger } = await emptyCredit();
    const owner = "0x00000000000000000000000000000000000000bb" as Address;
    await settledCredit(ledger, { token: USDT, payer: owner, nonce: "0x01" }, 50_000n);
    expect(await ledger.credit.openLease({ id: "A", owner, want: 30_000n, least: 10_000n })).toHaveProperty("leased");
    await recordCall(ledger, "call", "A", owner);
    // A closes on another connection (the lot locked, 20,000 back to it: 40,000), committed 300 ms
    // after B's opening began: the opening saw the lot at 20,000, then waited for it.
    const [back, opening] = await committedWhile(
      db,
      (onTx) => onTx.credit.closeLease("A"),
      () => ledger.credit.openLease({ id: "B", owner, want: 30_000n, least: 10_000n }),
    );
    expect(back).toBe(20_000n);
    expect(opening, "30,000 drawn from the 40,000 the close left").toMatchObject({ leased: { amount: 30_000n } });
    const [lot] = await db.select({ remaining: creditLot.remaining }).from(creditLot);
    expect(lot!.remaining).toBe("10000");
    expect(await ledger.credit.balance(owner), "all but the call recorded").toBe(40_000n);
  });

  it("records calls behind an undo that lowered their lease's spent: the recording waits for it, then bumps what the undo left", async () => {
    const { db, ledger } = await emptyCredit();
    const owner = "0x00000000000000000000000000000000000000b1" as Address;
    const other = "0x00000000000000000000000000000000000000b2" as Address;
    for (const [payer, lease] of [
      [owner, "L"],
      [other, "X"],
    ] as const) {
      await settledCredit(ledger, { token: USDT, payer, nonce: lease === "L" ? "0x01" : "0x02" }, 50_000n);
      await ledger.credit.openLease({ id: lease, owner: payer, want: 30_000n, least: 10_000n });
    }
    for (const id of ["a", "b", "c"]) await recordCall(ledger, id, "L", owner); // L spent whole
    // "a" undone on another connection (L locked, spent 20,000), committed 300 ms after two more
    // calls of L began recording in one statement (behind one of X, alone): they saw L spent whole.
    const [undone, recorded] = await committedWhile(
      db,
      (onTx) => onTx.credit.voidSpend("a", "L"),
      () =>
        Promise.all([
          recordCall(ledger, "x", "X", other),
          recordCall(ledger, "d", "L", owner),
          recordCall(ledger, "e", "L", owner),
        ]),
    );
    expect(undone).toBe(true);
    expect(recorded, "d in the room the undo made, e past the lease").toMatchObject([
      { outcome: "recorded" },
      { outcome: "recorded" },
      { outcome: "closed" },
    ]);
    expect(await ledger.credit.closeLease("L"), "spent whole again").toBe(0n);
    expect(await ledger.credit.balance(owner), "b, c and d spent").toBe(20_000n);
  });

  it("undoes a refused call's recording that commits while the undo runs: the undo waits for the lease, then finds it", async () => {
    const owner = "0x00000000000000000000000000000000000000dd" as Address;
    // The recording is under way on a connection the service lost.
    const { ledger, written } = await whileRecording(owner, "refused", (l) => l.credit.voidSpend("refused", "L"));
    expect(written, "undone").toBe(true);
    expect(await ledger.credit.recent(owner, 10)).toEqual([]);
    expect(await ledger.credit.balance(owner)).toBe(50_000n);
  });

  it("closes a lease behind a recording that holds it: the close waits, then gives back only what the recorded calls left", async () => {
    const owner = "0x00000000000000000000000000000000000000ee" as Address;
    const { ledger, written } = await whileRecording(owner, "answered", (l) => l.credit.closeLease("L"));
    expect(written, "what the lease did not spend, the recorded call counted").toBe(20_000n);
    expect(await ledger.credit.balance(owner)).toBe(40_000n);
    expect(await ledger.credit.closeLease("L"), "closed once").toBe(0n);
    expect(await ledger.credit.balance(owner)).toBe(40_000n);
  });
});
