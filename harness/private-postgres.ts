import { execFile, execFileSync } from "node:child_process";
import { chownSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort } from "../devnet/ports.ts";

export type PrivatePostgres = {
  /** postgresql://postgres@127.0.0.1:<port>/postgres (trust auth). */
  url: string;
  /** Stops the server (fast: connections are cut) and starts it again on the same port and data. */
  restart: () => Promise<void>;
  /**
   * Kills the server as a crash does (immediate: no checkpoint, what its log buffers held and had
   * not written is lost), then starts it again: it recovers from its log.
   */
  crash: () => Promise<void>;
  /** Stops the server at once and removes its directory; safe to call twice. */
  stop: () => void;
};

/** The newest installed server's binaries (Debian: /usr/lib/postgresql/<major>/bin). */
function postgresBin(): string {
  const majors = readdirSync("/usr/lib/postgresql")
    .filter((d) => /^\d+$/.test(d))
    .sort((a, b) => Number(b) - Number(a));
  if (!majors[0]) throw new Error("no Postgres server installed under /usr/lib/postgresql");
  return `/usr/lib/postgresql/${majors[0]}/bin`;
}

/**
 * A throwaway Postgres cluster in a temporary directory on a free port, for tests that stop or
 * restart the database (never the machine's shared server), with `settings` (name=value) added to
 * the server's. initdb refuses root: as root, the cluster belongs to the `postgres` OS user and its
 * commands run as that user.
 */
export async function startPrivatePostgres(settings: string[] = []): Promise<PrivatePostgres> {
  const bin = postgresBin();
  const dir = mkdtempSync(join(tmpdir(), "pg-private-"));
  const data = join(dir, "data");
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"]).toString());
    chownSync(dir, id("-u"), id("-g"));
  }
  const command = (tool: string, args: string[]) =>
    [
      asRoot ? "runuser" : `${bin}/${tool}`,
      asRoot ? ["-u", "postgres", "--", `${bin}/${tool}`, ...args] : args,
    ] as const;
  const run = (tool: string, args: string[]) =>
    execFileSync(...command(tool, args), { stdio: "pipe", timeout: 60_000 });
  const port = await freePort();
  const options = [
    `-c listen_addresses=127.0.0.1 -p ${port} -k ${dir} -c fsync=off -c max_connections=200`,
    ...settings.map((setting) => `-c ${setting}`),
  ].join(" ");
  const ctlArgs = (args: string[]) => ["-D", data, "-l", join(dir, "log"), "-w", "-t", "60", ...args];
  const ctl = (...args: string[]) => run("pg_ctl", ctlArgs(args));
  const ctlAsync = (...args: string[]) => promisify(execFile)(...command("pg_ctl", ctlArgs(args)), { timeout: 60_000 });
  let stopped = false;
  try {
    run("initdb", ["-D", data, "-U", "postgres", "--auth=trust", "--no-sync"]);
    ctl("-o", options, "start");
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  // pg_ctl leaves the server running on its own: a test process that ends without stop() stops it too.
  const stopOnExit = () => stop();
  process.once("exit", stopOnExit);
  const stop = () => {
    if (stopped) return;
    stopped = true;
    process.removeListener("exit", stopOnExit);
    try {
      ctl("-m", "immediate", "stop");
    } catch {
      /* not running */
    }
    rmSync(dir, { recursive: true, force: true });
  };
  return {
    url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    // Asynchronous, so that the test's own requests keep going while the server restarts.
    restart: async () => void (await ctlAsync("-m", "fast", "-o", options, "restart")),
    crash: async () => {
      await ctlAsync("-m", "immediate", "stop");
      await ctlAsync("-o", options, "start");
    },
    stop,
  };
}
