import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type DrizzleSnapshotJSON, generateDrizzleJson, generateMigration } from "drizzle-kit/api";
import { readMigrationFiles } from "drizzle-orm/migrator";
import { describe, expect, it } from "vitest";
import * as schema from "../api/store/schema.ts";
import { MIGRATIONS_FOLDER } from "../api/store/store.ts";

// The committed migrations (api/store/migrations) are the only DDL of the service store. They must
// say what schema.ts says: a schema change without `npm run db:generate` fails here.

type Journal = { entries: { idx: number; tag: string; when: number }[] };
const journal = JSON.parse(readFileSync(join(MIGRATIONS_FOLDER, "meta/_journal.json"), "utf8")) as Journal;
const snapshot = (idx: number) =>
  JSON.parse(
    readFileSync(join(MIGRATIONS_FOLDER, `meta/${String(idx).padStart(4, "0")}_snapshot.json`), "utf8"),
  ) as DrizzleSnapshotJSON;

/**
 * Migrations written by hand (`drizzle-kit generate --custom`) for what a schema diff cannot say:
 * each moves data or adds what drizzle does not describe (triggers), and leaves the snapshot as it
 * was. Only these may differ from drizzle-kit's output.
 */
const CUSTOM: Record<string, string> = {
  "0012_settlement_transaction_rows":
    "the signed transactions move from payment rows to their table before the column goes",
  "0020_payment_exposure_triggers":
    "triggers on payment keep payment_exposure's total (test/db/service-store.test.ts holds it to OPEN_EXPOSURE)",
};

describe("service store migrations", () => {
  it("the last snapshot is schema.ts: nothing left to generate", async () => {
    const last = journal.entries.at(-1)!;
    const committed = snapshot(last.idx);
    const current = generateDrizzleJson({ ...schema }, committed.id);
    expect(await generateMigration(committed, current)).toEqual([]);
  });

  it("each migration's SQL is what drizzle-kit generates from its snapshots (no hand edits)", async () => {
    const files = readMigrationFiles({ migrationsFolder: MIGRATIONS_FOLDER });
    expect(files).toHaveLength(journal.entries.length);
    let previous = generateDrizzleJson({});
    for (const [i, entry] of journal.entries.entries()) {
      const next = snapshot(entry.idx);
      const statements = await generateMigration(previous, next);
      if (entry.tag in CUSTOM) {
        expect(statements, `${entry.tag} changes no table drizzle describes`).toEqual([]);
        expect(files[i]!.sql.join("").trim(), entry.tag).not.toBe("");
        previous = next;
        continue;
      }
      expect(
        files[i]!.sql.map((s) => s.trim()),
        entry.tag,
      ).toEqual(statements.map((s) => s.trim()));
      previous = next;
    }
  });
});
