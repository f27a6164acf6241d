import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import type { PaymentKey } from "../../api/payments/ledger/ledger.ts";
import { createSqlLedger } from "../../api/payments/ledger/sql/sql-ledger.ts";
import { creditLease, creditLot, creditSpend } from "../../api/store/schema.ts";
import { openServiceStore, type ServiceStore } from "../../api/store/store.ts";
import type { Address } from "../../config/addresses.ts";
import { type PrivatePostgres, startPrivatePostgres } from "../../harness/private-postgres.ts";
import { sleep } from "../../shared/async.ts";
import { testDatabase } from "../support/indexer.ts";
import { settledCredit } from "../support/payments.ts";

// A credit hold commits without waiting for the disk (api/payments/ledger/sql/credit.ts); the spent
// write before its answer leaves waits. A lease's calls are recorded by durable writes before their
// answers leave. This kills the database server mid-traffic, as a crash does, and checks what that
// buys: every answer that left is still paid for, and no unit is lost or made.
// Postgres only: PGlite is the process itself, so it cannot die without the calls dying with it.

const OWNER = "0x00000000000000000000000000000000000000aa" as Address;
const TOKEN = "0x00000000000000000000000000000000000000a1" as Address;
const BOUGHT = 100_000_000n;
const PRICE = 10_000n;
const ANSWER = { status: 200, type: "application/json", body: '{"ok":true}' };

describe.runIf(testDatabase === "postgres")("prepaid credit through a database crash", () => {
  let postgres: PrivatePostgres | undefined;
  const stores: ServiceStore[] = [];
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close().catch(() => undefined)));
    postgres?.stop();
  });

  /** A private server that flushes its log lazily, and BOUGHT of settled credit on it. */
  const bought = async () => {
    // The log writer waits 10 s between flushes: what holds alone wrote is lost in the crash unless a spent write flushed it.
    postgres = await startPrivatePostgres(["wal_writer_delay=10000ms"]);
    const open = async () => {
      const store = await openServiceStore({ kind: "postgres", connectionString: postgres!.url });
      stores.push(store);
      return { store, ledger: createSqlLedger(store.db) };
    };
    const { ledger } = await open();
    const purchase: PaymentKey = { token: TOKEN, payer: OWNER, nonce: "0xc1" };
    await settledCredit(ledger, purchase, BOUGHT);
    return { ledger, open };
  };

  /** Eight callers make `call` again and again until the server dies under them, 300 ms in. */
  const crashMidTraffic = async (call: () => Promise<void>) => {
    const callers = Array.from({ length: 8 }, async () => {
      for (;;) {
        try {
          await call();
        } catch {
          return;
        }
      }
    });
    await sleep(300);
    await postgres!.crash();
    await Promise.all(callers);
  };

  it("keeps every spend whose answer was stored, and every unit: holds taken before a stored answer survive with it", async () => {
    const { ledger, open } = await bought();
    const hold = async () => {
      const held = await ledger.credit.hold({
        id: randomUUID(),
        payer: { owner: OWNER },
        route: "POST /api/lender/screen",
        subject: null,
        fingerprint: "f",
        paymentId: null,
        amount: PRICE,
      });
      if (!("held" in held)) throw new Error(`not held: ${JSON.stringify(held, (_, v) => String(v))}`);
      return held.held.id;
    };

    const answered = [await hold()];
    const heldBefore = await hold();
    await ledger.credit.spent(answered[0]!, ANSWER);
    // Calls in flight when the server dies: an answer leaves once its spent write returned.
    let holds = 2;
    await crashMidTraffic(async () => {
      const id = await hold();
      holds++;
      await ledger.credit.spent(id, ANSWER);
      answered.push(id);
    });
    expect(answered.length).toBeGreaterThan(1);

    // What a replica started after the crash finds.
    const after = await open();
    const spends = await after.store.db.select().from(creditSpend);
    const status = new Map(spends.map((s) => [s.id, s.status]));
    for (const id of answered) expect(status.get(id), `answered spend ${id}`).toBe("spent");
    expect(status.get(heldBefore)).toBe("held");
    const [lot] = await after.store.db.select().from(creditLot);
    const taken = spends.reduce((sum, s) => sum + BigInt(s.amount), 0n);
    expect(BigInt(lot!.remaining) + taken).toBe(BOUGHT);
    console.log(
      `[credit crash] ${holds} holds acknowledged, ${answered.length} answers stored; after the crash ${spends.length} spends (${spends.filter((s) => s.status === "spent").length} spent): ${holds - spends.length} holds lost, none answered`,
    );

    // The holds whose requests died are given back by the sweep: the balance is what was answered, and at least that.
    await after.store.db.update(creditSpend).set({ updatedAt: new Date(0) });
    await after.ledger.credit.releaseAbandoned();
    const spent = spends.filter((s) => s.status === "spent").length;
    expect(spent).toBeGreaterThanOrEqual(answered.length);
    expect(await after.ledger.credit.balance(OWNER)).toBe(BOUGHT - BigInt(spent) * PRICE);
  });

  it("keeps every leased call whose answer left: the lease's spent is its recorded calls, and its rest goes back on the sweep", async () => {
    postgres?.stop();
    const { ledger, open } = await bought();
    const lease = "L-crash";
    expect(await ledger.credit.openLease({ id: lease, owner: OWNER, want: BOUGHT / 2n, least: PRICE })).toMatchObject({
      leased: { amount: BOUGHT / 2n },
    });
    const answered: string[] = [];
    await crashMidTraffic(async () => {
      const id = randomUUID();
      const { outcome } = await ledger.credit.recordSpend({
        id,
        lease,
        owner: OWNER,
        tokenHash: null,
        route: "POST /api/lender/screen",
        subject: null,
        fingerprint: "f",
        amount: PRICE,
        answer: ANSWER,
      });
      if (outcome === "recorded") answered.push(id);
    });
    expect(answered.length).toBeGreaterThan(1);

    const after = await open();
    const spends = await after.store.db.select().from(creditSpend);
    const recorded = new Set(spends.map((s) => s.id));
    for (const id of answered) expect(recorded.has(id), `answered call ${id}`).toBe(true);
    const [row] = await after.store.db.select().from(creditLease);
    expect(BigInt(row!.spent)).toBe(BigInt(spends.length) * PRICE);
    const [lot] = await after.store.db.select().from(creditLot);
    expect(BigInt(lot!.remaining) + BigInt(row!.amount)).toBe(BOUGHT);
    console.log(`[credit crash] ${answered.length} leased calls answered; after the crash ${spends.length} recorded`);

    // The replica died with the lease: the sweep gives back what it did not spend.
    await after.store.db.update(creditLease).set({ renewedAt: new Date(0) });
    expect(await after.ledger.credit.closeAbandonedLeases()).toBe(1);
    expect(await after.ledger.credit.balance(OWNER)).toBe(BOUGHT - BigInt(spends.length) * PRICE);
    const [back] = await after.store.db.select().from(creditLot);
    expect(back!.remaining).toBe((BOUGHT - BigInt(spends.length) * PRICE).toString());
  });
});
