import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseEnv } from "node:util";

/**
 * The configuration files, in order of precedence: a variable already in the environment wins over
 * both, `.env.local` over `.env`. Ponder reads `.env.local` itself too (dotenv, never overriding),
 * which agrees with this order.
 */
const ENV_FILE_NAMES = [".env.local", ".env"] as const;

/**
 * Sets the variables of `dir`'s `.env.local` and `.env` that `env` lacks (Node's own parser), and
 * returns which file each one came from. `ENV_FILES=ignore` in `env` reads nothing: the test suite
 * sets it, so a developer's files never reach the tests or the processes they start.
 */
export function loadEnvFiles(dir: string, env: NodeJS.ProcessEnv): Map<string, string> {
  const origins = new Map<string, string>();
  if (env.ENV_FILES === "ignore") return origins;
  for (const name of ENV_FILE_NAMES) {
    const path = join(dir, name);
    if (!existsSync(path)) continue;
    for (const [key, value] of Object.entries(parseEnv(readFileSync(path, "utf8")))) {
      if (key in env) continue;
      env[key] = value;
      origins.set(key, name);
    }
  }
  return origins;
}

let processOrigins: Map<string, string> | undefined;

/**
 * Loads the files into this process's environment, once (the working directory's, as npm scripts
 * and Ponder run in the project's root). Children started with `process.env` inherit the result.
 */
export function loadProcessEnvFiles(): ReadonlyMap<string, string> {
  processOrigins ??= loadEnvFiles(process.cwd(), process.env);
  return processOrigins;
}
