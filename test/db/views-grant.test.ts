import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { getTableName, getViewName, isTable, isView } from "drizzle-orm";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devnetDatabaseUrl } from "../../config/target.ts";
import * as schema from "../../ponder.schema.ts";
import { markedBlock } from "../support/examples.ts";
import { POSTGRES_URL, testDatabase } from "../support/indexer.ts";

// docs/data.md, "A stable views schema for Postgres": the data team's grant lasts although Ponder
// drops and re-creates every view of DATABASE_VIEWS_SCHEMA at each start. The views are made here
// by Ponder's own code (createViews, what `ponder start --views-schema` runs once the backfill is
// done), over stand-in tables, as the indexer's role; the page's snippets run as written.
const root = fileURLToPath(new URL("../..", import.meta.url));
const page = readFileSync(join(root, "docs/data.md"), "utf8");
const marked = (name: string, lang: string) => {
  const block = markedBlock(page, name, lang);
  if (block === undefined) throw new Error(`docs/data.md has no ${lang} block between the ${name} markers`);
  return block;
};
const run = promisify(execFile);

type Qb = { transaction: (...args: unknown[]) => Promise<unknown> };
type CreateViews = (
  qb: Qb,
  build: { tables: unknown[]; views: unknown[]; namespaceBuild: { schema: string; viewsSchema: string } },
) => Promise<void>;
/** Ponder 0.17's createViews, from its package (not exported by name: the path is its build's). */
const ponderCreateViews = async () =>
  ((await import(join(root, "node_modules/ponder/dist/esm/database/actions.js"))) as { createViews: CreateViews })
    .createViews;

const tables = Object.values(schema).filter((t) => isTable(t));
const views = Object.values(schema).filter((v) => isView(v));
const VIEWS = "reputation_data"; // the name docs/data.md's psql lines use

describe("docs/data.md: the views schema's grant", () => {
  it("is on the page between its markers", () => {
    expect(marked("views-grant", "sql")).toContain("alter default privileges");
    expect(marked("views-grant-run", "sh")).toContain("-f views-grant.sql");
    expect(marked("views-psql", "sh")).toContain(`set search_path to ${VIEWS}`);
  });
});

describe.skipIf(testDatabase !== "postgres")(
  "docs/data.md: the views schema's grant survives Ponder's re-created views (Postgres)",
  () => {
    const id = `vg_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
    const [indexer, analyst, plain] = [`${id}_indexer`, `${id}_analyst`, `${id}_plain`];
    // DATABASE_URL names <id>; the devnet indexes into <id>_devnet beside it (config/target.ts).
    const urlAs = (user: string, database: string) => {
      const url = new URL(POSTGRES_URL);
      url.username = user;
      url.pathname = `/${database}`;
      return url.toString();
    };
    const databaseUrl = urlAs(indexer, id);
    const devnetDb = `${id}_devnet`;
    const dir = mkdtempSync(join(tmpdir(), "views-grant-"));
    let createViews: CreateViews;

    const withClient = async <T>(url: string, fn: (client: pg.Client) => Promise<T>) => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        return await fn(client);
      } finally {
        await client.end();
      }
    };
    const admin = <T>(fn: (client: pg.Client) => Promise<T>) => withClient(POSTGRES_URL, fn);
    const asIndexer = <T>(fn: (client: pg.Client) => Promise<T>) => withClient(urlAs(indexer, devnetDb), fn);

    /** What the indexer has written into `namespace` by the time the views are made: its tables and views (stand-ins), `rows` transfers. */
    const indexed = (namespace: string, rows: number) =>
      asIndexer(async (client) => {
        await client.query(`create schema "${namespace}"`);
        for (const t of tables) await client.query(`create table "${namespace}"."${getTableName(t as never)}" (n int)`);
        for (const v of views)
          await client.query(`create view "${namespace}"."${getViewName(v as never)}" as select 1 as n`);
        for (const internal of ["_ponder_meta", "_ponder_checkpoint"])
          await client.query(`create table "${namespace}"."${internal}" (n int)`);
        await client.query(`insert into "${namespace}".transfer select generate_series(1, ${rows})`);
      });

    /** One start of `ponder start --schema <namespace> --views-schema <viewsSchema>`, as far as the views schema goes: Ponder's createViews, as the indexer's role. */
    const start = (namespace: string, viewsSchema: string) =>
      asIndexer(async (client) => {
        const issued: string[] = [];
        const tx = {
          wrap: async (...args: unknown[]) => {
            const fn = args.find((a) => typeof a === "function") as (db: {
              execute: (text: unknown) => Promise<unknown>;
            }) => Promise<unknown>;
            return fn({
              execute: async (text) => {
                if (typeof text !== "string")
                  throw new Error("createViews issued a statement that is not plain SQL text");
                issued.push(text.trim());
                return client.query(text);
              },
            });
          },
        };
        const qb: Qb = {
          transaction: async (...args) => {
            const fn = args.find((a) => typeof a === "function") as (t: typeof tx) => Promise<unknown>;
            await client.query("begin");
            try {
              const result = await fn(tx);
              await client.query("commit");
              return result;
            } catch (error) {
              await client.query("rollback");
              throw error;
            }
          },
        };
        await createViews(qb, { tables, views, namespaceBuild: { schema: namespace, viewsSchema } });
        return issued;
      });

    /** What `role` reads from the views schema's transfer view: a count, or the database's refusal. */
    const count = (role: string, relation: string) =>
      withClient(urlAs(role, devnetDb), (client) =>
        client.query<{ n: string }>(`select count(*)::text as n from ${relation}`),
      ).then(
        (r) => Number(r.rows[0]!.n),
        (error: Error) => error.message,
      );

    /** The page's grant, run as the page says: `views-grant.sql` beside, the names in the environment. */
    const grant = (url: string) => {
      writeFileSync(join(dir, "views-grant.sql"), marked("views-grant", "sql"));
      return run("bash", ["-c", marked("views-grant-run", "sh")], {
        cwd: dir,
        env: {
          ...process.env,
          DATABASE_URL: url,
          INDEXER_ROLE: indexer,
          ANALYST_ROLE: analyst,
          DATABASE_VIEWS_SCHEMA: VIEWS,
        },
      });
    };

    beforeAll(async () => {
      createViews = await ponderCreateViews();
      await admin(async (client) => {
        for (const role of [indexer, analyst, plain]) await client.query(`create role "${role}" login`);
        await client.query(`create database "${devnetDb}" owner "${indexer}"`);
      });
      await indexed("devnet", 3);
    });

    afterAll(async () => {
      rmSync(dir, { recursive: true, force: true });
      await admin(async (client) => {
        await client.query(`drop database if exists "${devnetDb}" with (force)`);
        for (const role of [indexer, analyst, plain]) await client.query(`drop role if exists "${role}"`);
      });
    });

    it("Ponder keeps the views schema but drops and re-creates its views at each start: a plain grant on them is lost", async () => {
      const first = await start("devnet", "reputation_plain");
      // The schema is created if missing, never dropped; each view is dropped and created anew.
      expect(first).toContain(`CREATE SCHEMA IF NOT EXISTS "reputation_plain"`);
      expect(first).toContain(`DROP VIEW IF EXISTS "reputation_plain"."transfer"`);
      expect(first).toContain(`CREATE VIEW "reputation_plain"."transfer" AS SELECT * FROM "devnet"."transfer"`);
      expect(first.filter((s) => /drop\s+schema/i.test(s))).toEqual([]);

      // A grant on the views as they stand (usage and select): it works until the next start.
      await asIndexer(async (client) => {
        await client.query(`grant usage on schema reputation_plain to "${plain}"`);
        await client.query(`grant select on all tables in schema reputation_plain to "${plain}"`);
      });
      expect(await count(plain, "reputation_plain.transfer")).toBe(3);
      const oid = () =>
        asIndexer(
          async (c) =>
            (await c.query<{ oid: number }>(`select 'reputation_plain.transfer'::regclass::oid as oid`)).rows[0]!.oid,
        );
      const before = await oid();

      const second = await start("devnet", "reputation_plain");
      expect(second).toEqual(first);
      expect(await oid()).not.toBe(before); // a new view, without the old one's grants
      expect(await count(plain, "reputation_plain.transfer")).toMatch(/permission denied for view transfer/);
    });

    it("runs the page's grant once, before the views exist: the data team reads after every start and a redeploy, and only the views", async () => {
      await grant(urlAs(indexer, devnetDb)); // as the indexer's role, in the database it indexes into
      expect(await count(analyst, `${VIEWS}.transfer`)).toMatch(/relation .* does not exist/);

      await start("devnet", VIEWS);
      expect(await count(analyst, `${VIEWS}.transfer`)).toBe(3);
      expect(await count(analyst, `${VIEWS}.account_month`)).toBe(1);

      // Run again, now that the views exist, as a superuser: the same grants, no error.
      await grant(urlAs(new URL(POSTGRES_URL).username, devnetDb));

      await start("devnet", VIEWS);
      expect(await count(analyst, `${VIEWS}.transfer`)).toBe(3);

      // A redeploy into a new DATABASE_SCHEMA repoints the views; the grant holds.
      await indexed("devnet_v2", 5);
      await start("devnet_v2", VIEWS);
      expect(await count(analyst, `${VIEWS}.transfer`)).toBe(5);

      // The views only: not the indexer's schemas, and nothing written through a view.
      expect(await count(analyst, "devnet_v2.transfer")).toMatch(/permission denied for schema devnet_v2/);
      const write = await withClient(urlAs(analyst, devnetDb), (c) =>
        c.query(`insert into ${VIEWS}.transfer values (0)`),
      ).then(
        () => "written",
        (error: Error) => error.message,
      );
      expect(write).toMatch(/permission denied for view transfer/);
    });

    it("runs the page's psql lines as the data team: live Celo's database, and the devnet's beside it", async () => {
      // `${DATABASE_URL}_devnet` is the database the devnet indexes into (config/target.ts).
      expect(devnetDatabaseUrl(databaseUrl)).toBe(`${databaseUrl}_devnet`);
      const lines = marked("views-psql", "sh")
        .split("\n")
        .filter((line) => line.startsWith("psql "));
      expect(lines).toHaveLength(2);
      const [live, devnet] = lines as [string, string];
      // Live Celo: DATABASE_URL names the indexer's database itself (here, the devnet's).
      const celo = await run("bash", ["-c", live], { env: { ...process.env, DATABASE_URL: urlAs(analyst, devnetDb) } });
      expect(celo.stdout).toMatch(/^\s+5$/m);
      const dev = await run("bash", ["-c", devnet], { env: { ...process.env, DATABASE_URL: urlAs(analyst, id) } });
      expect(dev.stdout).toMatch(/^\s+5$/m);
    });
  },
);
