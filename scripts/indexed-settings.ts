import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { eq } from "drizzle-orm";
import pg from "pg";
import { indexSettings } from "../api/store/schema.ts";
import { openServiceStore, serviceStoreLocation } from "../api/store/store.ts";
import { StartupError } from "../config/errors.ts";
import type { IndexTarget } from "../config/target.ts";

/** sysexits' EX_CONFIG: a process manager told `RestartPreventExitStatus=78` does not restart into the same refusal. */
export const EXIT_CONFIG = 78;

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex").slice(0, 16);

/** Ponder hashes the schema file and every indexing file (src/, but the API's) into its build id. */
function indexingCodeHash(root = "."): string {
  const files = [
    join(root, "ponder.schema.ts"),
    ...listTs(join(root, "src")).filter((file) => !file.startsWith(join(root, "src", "api"))),
  ];
  return sha256(
    files
      .sort()
      .map((file) => readFileSync(file, "utf8"))
      .join("\0"),
  );
}

function listTs(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? listTs(join(dir, entry.name)) : entry.name.endsWith(".ts") ? [join(dir, entry.name)] : [],
  );
}

/**
 * What Ponder's build id depends on, by the settings that change it: with any of them changed,
 * Ponder refuses the schema it indexed before ("previously used by a different Ponder app"), and a
 * process manager would restart it into the same crash. Keys are what the operator changed.
 */
export function indexedSettings(target: IndexTarget, root = "."): Record<string, string> {
  return {
    CELO_START_BLOCK: String(target.startBlock),
    "REPORTER_ADDRESS / ONCHAIN_REPORTER_ADDRESS": JSON.stringify(target.reporters),
    // The earlier of CELO_START_BLOCK and REPORTER_START_BLOCK (config/target.ts): named only when it is the latter.
    REPORTER_START_BLOCK: target.reporterStartBlock === target.startBlock ? "unset" : String(target.reporterStartBlock),
    SANCTIONS_START_BLOCK: target.sanctions ? String(target.sanctions.startBlock) : "unset",
    "the token addresses (config/celo.ts)": JSON.stringify(target.tokens.map((token) => token.address)),
    INDEX_MODE: target.tracked ? "tracked" : "all",
    "TRACKED_WALLETS / TRACKED_WALLETS_FILE": target.tracked
      ? `${target.tracked.size} wallets, ${sha256([...target.tracked].sort().join(","))}`
      : "",
    "the indexing code (ponder.schema.ts, src/)": indexingCodeHash(root),
  };
}

/** The settings that differ, each as "NAME (was X, now Y)" when the values are short enough to read. */
export function describeChanges(recorded: Record<string, string>, current: Record<string, string>): string[] {
  return Object.keys(current)
    .filter((key) => key in recorded && recorded[key] !== current[key])
    .map((key) => {
      const [was, now] = [recorded[key]!, current[key]!];
      return was.length <= 24 && now.length <= 24 && was && now ? `${key} (was ${was}, now ${now})` : key;
    });
}

/**
 * Before the indexer starts on live Celo: the settings that decide what is indexed must be those
 * the schema was indexed with, or the launcher refuses in one line naming what changed and what
 * to do. Never a re-backfill into the schema the replicas serve, never Ponder's crash on restart.
 * A schema indexed for the first time (or dropped since) records the current settings.
 */
export async function guardIndexedSettings(target: IndexTarget, root = "."): Promise<void> {
  const current = indexedSettings(target, root);
  const store = await openServiceStore(serviceStoreLocation(target.database));
  try {
    const [row] = await store.db.select().from(indexSettings).where(eq(indexSettings.schema, target.schema));
    if (row && (await indexedSchemaExists(target))) {
      const changed = describeChanges(row.settings, current);
      if (changed.length > 0) {
        throw new StartupError(
          `${changed.join(", ")} changed since schema "${target.schema}" was indexed (${row.recordedAt.toISOString().slice(0, 10)}). ` +
            `Set DATABASE_SCHEMA to a new name (e.g. ${nextSchemaName(target.schema)}) to index beside it while replicas keep serving it, ` +
            `then move them over (docs/operations.md, "Upgrading"); or restore the previous value.`,
          { exitCode: EXIT_CONFIG },
        );
      }
      return;
    }
    const recorded = { settings: current, recordedAt: new Date() };
    await store.db
      .insert(indexSettings)
      .values({ schema: target.schema, ...recorded })
      .onConflictDoUpdate({ target: indexSettings.schema, set: recorded });
  } finally {
    await store.close();
  }
}

function nextSchemaName(schema: string): string {
  const match = /^(.*)_v(\d+)$/.exec(schema);
  return match ? `${match[1]}_v${Number(match[2]) + 1}` : `${schema}_v2`;
}

/** Whether Ponder has indexed into the schema (its metadata table exists). */
async function indexedSchemaExists(target: IndexTarget): Promise<boolean> {
  const query = "select 1 from information_schema.tables where table_schema = $1 and table_name = '_ponder_meta'";
  if (target.database.kind === "pglite") {
    if (!existsSync(target.database.directory)) return false;
    const db = new PGlite(target.database.directory);
    try {
      return (await db.query(query, [target.schema])).rows.length > 0;
    } finally {
      await db.close();
    }
  }
  const client = new pg.Client({ connectionString: target.database.connectionString });
  try {
    await client.connect();
    return (await client.query(query, [target.schema])).rows.length > 0;
  } finally {
    await client.end().catch(() => {});
  }
}
