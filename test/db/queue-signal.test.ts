import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenForQueued, queueNotifier } from "../../api/payments/queue-signal.ts";
import { openServiceStore, type ServiceStore } from "../../api/store/store.ts";
import { type DatabaseSlot, databaseSlot, testDatabase, waitFor } from "../support/indexer.ts";

// A process with X402_SETTLEMENT_WORKER=off tells the others' workers of what it queued (Postgres
// NOTIFY), and they hear it even after their listening connection was cut (a Postgres restart).
// Postgres only: PGlite is one process's database.
describe.runIf(testDatabase === "postgres")("queued answers signalled to the workers of other processes", () => {
  let slot: DatabaseSlot;
  let store: ServiceStore;
  let url: string;
  /** The listening sessions on the slot's database. */
  const listening = async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query<{ pid: number }>(
        "select pid from pg_stat_activity where datname = current_database() and application_name = 'x402-queue-listener' and query ilike 'listen %'",
      );
      return rows.map((r) => r.pid);
    } finally {
      await client.end();
    }
  };

  beforeAll(async () => {
    slot = databaseSlot("postgres");
    await slot.prepare();
    if (slot.store.kind !== "postgres") throw new Error("a Postgres slot");
    url = slot.store.connectionString;
    store = await openServiceStore(slot.store);
  });

  afterAll(async () => {
    await store?.close();
    await slot?.drop();
  });

  it("reaches every listener, and one whose connection was cut listens again, called at once for what it may have missed", async () => {
    const heard = [0, 0];
    const listeners = [0, 1].map((i) => listenForQueued(url, () => heard[i]!++));
    try {
      await waitFor("two listeners", async () => ((await listening()).length === 2 ? true : undefined));
      const signal = queueNotifier(Promise.resolve(store.db));
      signal();
      await waitFor("both called", async () => (heard.every((n) => n >= 1) ? true : undefined));

      // Their connections cut, as a Postgres restart cuts them.
      const cut = await listening();
      const afterCut = [...heard];
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query("select pg_terminate_backend(pid) from unnest($1::int[]) as pid", [cut]);
      await admin.end();
      await waitFor("two listeners again, on new connections", async () => {
        const now = await listening();
        return now.length === 2 && now.every((pid) => !cut.includes(pid)) ? true : undefined;
      });
      // Each was called once on losing its connection: its worker looks at the queue at once.
      expect(heard.map((n, i) => n - afterCut[i]!)).toEqual([1, 1]);

      signal();
      await waitFor("both called again", async () => (heard.every((n, i) => n >= afterCut[i]! + 2) ? true : undefined));
    } finally {
      for (const l of listeners) await l.stop();
    }
    await waitFor("no listener left", async () => ((await listening()).length === 0 ? true : undefined));
  });
});
