import { MemoryLedger } from "../api/payments/ledger/memory.ts";
import { ledgerContract } from "./ledger/contract.ts";

ledgerContract("in memory", async () => {
  const ledger = new MemoryLedger();
  return { ledger, elapse: async (ms) => ledger.age(ms) };
});
