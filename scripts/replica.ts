import pg from "pg";
import { readEnv } from "../config/env.ts";
import { StartupError } from "../config/errors.ts";
import { resolveIndexTarget } from "../config/target.ts";
import { sleep } from "../shared/async.ts";
import { ponderArgs } from "./ponder-command.ts";

// `npm run serve`, an API replica: checks the environment, waits until the indexer has created the
// schema it writes (`ponder serve` exits at once without it, so replicas may be started together
// with the indexer), and prints the `ponder serve` command line (that schema, PORT, HOST:
// scripts/ponder-command.ts). The npm script then execs ponder with it, so that the replica is
// npm's own child and gets its signals, preloading what every Ponder process of the service does
// (api/host/ponder-process.ts).
// On a problem: one line on stderr, exit 1.
try {
  const env = readEnv();
  const target = resolveIndexTarget(env);
  if (target.database.kind !== "postgres") {
    throw new StartupError(
      "a replica needs Postgres: set DATABASE_URL to the indexer's database (PGlite admits one process; `npm start` serves the API itself).",
    );
  }
  await waitForSchema(target.database.connectionString, target.schema);
  // Each value is checked by config/env.ts (a schema name, a port number) or is an address: no spaces.
  console.log(ponderArgs("serve", target.schema, env.PORT, process.env).join(" "));
} catch (error) {
  if (!(error instanceof StartupError)) throw error;
  console.error(`Cannot start: ${error.message}`);
  process.exit(1);
}

/** Until `schema` exists in the database (which, on the devnet, the indexer may be creating too). */
async function waitForSchema(connectionString: string, schema: string): Promise<void> {
  let told = false;
  for (;;) {
    const client = new pg.Client({ connectionString });
    client.on("error", () => {}); // a connection cut while waiting is tried again
    try {
      await client.connect();
      const { rows } = await client.query(`select 1 from information_schema.schemata where schema_name = $1`, [schema]);
      if (rows.length > 0) return;
    } catch {
      /* no database yet: the indexer creates it */
    } finally {
      await client.end().catch(() => {});
    }
    if (!told)
      console.error(
        `Waiting for the indexer to create the schema "${schema}" (start it with npm run indexer or npm start)…`,
      );
    told = true;
    await sleep(1_000);
  }
}
