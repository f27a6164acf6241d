import { sql } from "drizzle-orm";
import { afterAll } from "vitest";
import { createSqlLedger } from "../../api/payments/ledger/sql/sql-ledger.ts";
import { creditLease, creditLot, creditSpend, creditToken, payment, signInNonce } from "../../api/store/schema.ts";
import { openServiceStore, type ServiceStore } from "../../api/store/store.ts";
import { ledgerContract } from "../ledger/contract.ts";
import { databaseSlot, testDatabase } from "../support/indexer.ts";

// One store for the suite, emptied before each test: the contract's tests need no history.
const slot = databaseSlot();
let store: ServiceStore | undefined;
afterAll(async () => {
  await store?.close();
  await slot.drop();
});

ledgerContract(`SQL on ${testDatabase}`, async () => {
  if (!store) {
    await slot.prepare();
    store = await openServiceStore(slot.store);
  }
  const { db } = store;
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
