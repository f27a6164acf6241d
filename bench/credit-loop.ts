import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { sql } from "drizzle-orm";
import { CreditLeases } from "../api/payments/core/credit-leases.ts";
import { createSqlLedger } from "../api/payments/ledger/sql/sql-ledger.ts";
import { rowsOf } from "../api/payments/ledger/sql/statements.ts";
import { creditLease } from "../api/store/schema.ts";
import { openServiceStore } from "../api/store/store.ts";
import type { Address } from "../config/addresses.ts";
import { databaseSlot } from "../harness/indexer.ts";
import { settledCredit } from "../harness/payments.ts";
import { sleep } from "../shared/async.ts";
import { log, ms, pct } from "./support/figures.ts";

// npm run bench:credit-loop -- [--calls 1000] [--rounds 5]
// An agent calling in a loop, paid from prepaid credit: one owner's calls one after another, each
// priced from its replica's lease and recorded before its answer would leave (what
// api/payments/core/credit.ts does around a handler; no HTTP, no handler), on the SQL ledger in a
// Postgres store of its own. What the price costs a call (wall and this process's CPU), and how
// many leases its calls opened: the leases that follow a used-up one grow (credit-leases.ts).
const { values } = parseArgs({
  options: {
    calls: { type: "string", default: "1000" },
    rounds: { type: "string", default: "5" },
  },
});
const calls = Number(values.calls);
const rounds = Number(values.rounds);
const PRICE = 10_000n; // a screen: 0.01
const TOKEN = "0x00000000000000000000000000000000000000a1" as Address;
const owner = "0x00000000000000000000000000000000000000cc" as Address;

const slot = databaseSlot("postgres");
await slot.prepare();
const store = await openServiceStore(slot.store);
try {
  const ledger = createSqlLedger(store.db);
  // The owner's credit: one purchase, settled, enough for every round.
  const purchase = { token: TOKEN, payer: owner, nonce: "0x01" };
  const bought = PRICE * BigInt(calls * (rounds + 1) + 1024);
  await settledCredit(ledger, purchase, bought);
  const leases = new CreditLeases(ledger.credit);
  const answer = { status: 200, type: "application/json", body: "{}" };
  const opened = async () =>
    Number(rowsOf<{ n: string }>(await store.db.execute(sql`select count(*)::text as n from ${creditLease}`))[0]!.n);

  /** `n` calls one after another: ms a call, this process's CPU ms a call, leases opened. */
  const loop = async (n: number) => {
    const before = await opened();
    const started = performance.now();
    const cpu = process.cpuUsage();
    for (let i = 0; i < n; i++) {
      const taken = await leases.take(owner, PRICE);
      if ("short" in taken) throw new Error("the credit ran short");
      const recorded = await ledger.credit.recordSpend({
        id: randomUUID(),
        lease: taken.lease.id,
        owner,
        tokenHash: null,
        route: "POST /api/lender/screen",
        subject: null,
        fingerprint: "f",
        amount: PRICE,
        answer,
      });
      leases.recorded(taken.lease, PRICE, recorded);
    }
    const used = process.cpuUsage(cpu);
    const wall = performance.now() - started;
    return { ms: wall / n, cpu: (used.user + used.system) / 1000 / n, leases: (await opened()) - before };
  };

  log(`an owner's ${calls} calls one after another, ${rounds} rounds, each after its lease went back idle…`);
  await loop(Math.min(calls, 200)); // connections opened, statements prepared
  const results: Awaited<ReturnType<typeof loop>>[] = [];
  for (let r = 0; r < rounds; r++) {
    await sleep(1_200); // idle: the lease goes back, and the round starts from a first lease
    results.push(await loop(calls));
  }
  const median = (f: (x: (typeof results)[number]) => number) => pct(results.map(f), 50);
  console.log(`\nCredit in a loop: ${calls} calls of one owner one after another (Postgres, leases and recordings)`);
  console.log(
    `    a call's price: ${ms(median((x) => x.ms))} (rounds: ${results.map((x) => x.ms.toFixed(3)).join(", ")}), this process's CPU ${ms(median((x) => x.cpu))}`,
  );
  console.log(`    leases opened per round: ${results.map((x) => x.leases).join(", ")}`);
  await leases.closeAll(Date.now() + 5_000); // the last lease back before the store closes
  console.log(`    the owner's balance left: ${await ledger.credit.balance(owner)} of ${bought} units`);
} finally {
  await store.close();
  await slot.drop();
}
