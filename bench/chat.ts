import { parseArgs } from "node:util";
import { memoryConversations } from "../api/chat/conversations.ts";
import type { Intent } from "../api/chat/language.ts";
import { chat } from "../api/chat/route.ts";
import { WalletAssessor } from "../api/wallet/assess.ts";
import type { Address } from "../config/addresses.ts";
import { readEnv } from "../config/env.ts";
import { resolveIndexTarget } from "../config/target.ts";
import { PHRASINGS } from "../harness/chat-phrasings.ts";
import { startTestDevnet } from "../harness/devnet.ts";
import { openIndexDb } from "../harness/index-db.ts";
import { databaseSlot, startIndexer, type TestDatabase, waitForBlock } from "../harness/indexer.ts";
import { ApiError } from "../shared/errors.ts";

// npm run bench:chat -- [--db pglite|postgres] [--passes 20]
// The deterministic chat engine's latency per question over the phrasing table (harness/chat-phrasings.ts),
// in process on the default devnet (`npm start`'s: 300 background wallets, 15 months, seed 42)
// indexed into PGlite (the default) or Postgres. Each question is answered as the route answers it
// (resolve, read through WalletAssessor and walletData, phrase; conversations in memory), after one
// warm-up pass, so the result cache is warm as it is for a lender asking follow-ups.
const { values } = parseArgs({
  options: { db: { type: "string", default: "pglite" }, passes: { type: "string", default: "20" } },
});
const kind = values.db as TestDatabase;
const passes = Number(values.passes);

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const ms = (x: number) => `${x.toFixed(2)} ms`;
const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);

log("seeding the default devnet (300 background wallets, 15 months, seed 42)…");
const devnet = await startTestDevnet({ wallets: 300, months: 15, slotHours: 6, seed: 42 });
const slot = databaseSlot(kind);
await slot.prepare();
let index: Awaited<ReturnType<typeof openIndexDb>> | undefined;
try {
  const indexer = await startIndexer({ DEVNET_MANIFEST: devnet.manifestPath, ...slot.env });
  await waitForBlock(indexer, devnet.manifest.headBlock, 600_000);
  log(`indexed ${devnet.manifest.population.transfers} transfers into ${kind}`);
  await indexer.stop(); // PGlite admits one process at a time; the bench reads the same tables in process
  index = await openIndexDb(slot);
  const target = { ...resolveIndexTarget(readEnv({ DEVNET_MANIFEST: devnet.manifestPath })), schema: slot.schema };
  const deps = {
    db: index.db,
    target,
    assessor: new WalletAssessor({ db: index.db, target }),
    conversations: memoryConversations(),
    chatModel: null,
  };
  const persona = (name: string) => devnet.manifest.personas[name]!.address as Address;
  const payer = devnet.manifest.lenders[0]!.address.toLowerCase() as Address;

  const pass = async (times: Map<string, number[]>) => {
    const conversations = new Map<string, string>();
    for (const row of PHRASINGS) {
      let message = row.q;
      for (const [i, name] of (row.named ?? []).entries()) message = message.replace(`{${"ab"[i]}}`, persona(name));
      const conversationId = row.conversation ? conversations.get(row.conversation) : undefined;
      const t0 = performance.now();
      // A question with no wallet data to answer from is refused (422): timed all the same.
      const out = await chat(
        deps,
        {
          message,
          ...(row.wallet ? { walletAddress: persona(row.wallet) } : {}),
          ...(conversationId ? { conversationId } : {}),
        },
        payer,
      ).catch((error: unknown) => {
        if (error instanceof ApiError && error.status === 422)
          return { intent: (error.details as { intent: Intent }).intent, conversationId: undefined };
        throw error;
      });
      const elapsed = performance.now() - t0;
      if (out.intent !== row.intent) throw new Error(`"${row.q}" read as ${out.intent}, not ${row.intent}`);
      if (row.conversation && out.conversationId) conversations.set(row.conversation, out.conversationId);
      const list = times.get(row.q) ?? [];
      list.push(elapsed);
      times.set(row.q, list);
    }
  };
  await pass(new Map()); // warm-up: first assessments fill the result cache
  const times = new Map<string, number[]>();
  for (let i = 0; i < passes; i++) await pass(times);

  const all = [...times.values()].flat();
  console.log(
    `\nchat, deterministic engine, ${PHRASINGS.length} questions × ${passes} passes on ${kind} (${all.length} answers)`,
  );
  console.log(`  all questions: p50 ${ms(pct(all, 50))}, p99 ${ms(pct(all, 99))}, max ${ms(Math.max(...all))}`);
  const byIntent = new Map<string, number[]>();
  for (const row of PHRASINGS) byIntent.set(row.intent, [...(byIntent.get(row.intent) ?? []), ...times.get(row.q)!]);
  for (const [intent, xs] of byIntent)
    console.log(`  ${intent.padEnd(18)} p50 ${ms(pct(xs, 50)).padStart(9)}  p99 ${ms(pct(xs, 99)).padStart(9)}`);
  console.log("  per question (p50 / p99):");
  for (const row of PHRASINGS) {
    const xs = times.get(row.q)!;
    console.log(`    ${ms(pct(xs, 50)).padStart(9)} / ${ms(pct(xs, 99)).padStart(9)}  ${row.q}`);
  }
} finally {
  await index?.close();
  await slot.drop();
  await devnet.stop();
}
