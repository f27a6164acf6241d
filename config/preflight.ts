import { checkConfig } from "./check.ts";
import { type Env, parseEnvironment } from "./env.ts";
import { StartupError } from "./errors.ts";
import type { IndexTarget } from "./target.ts";

/**
 * The launchers' check before Ponder starts (`npm start`, `npm run indexer`): the whole of
 * `npm run check:config`, on a devnet once it runs. Warnings are printed and the start goes on;
 * errors stop it, all of them listed at once. Ponder itself would retry a dead RPC forever instead
 * of saying so.
 */
export async function preflight(
  print: (line: string) => void = console.log,
): Promise<{ env: Env; target: IndexTarget }> {
  const { findings, env, target } = await checkConfig({ devnet: "running" });
  const errors = findings.filter((f) => f.level === "error").map((f) => f.message);
  if (errors.length || !target) throw new StartupError(errors);
  for (const f of findings) if (f.level === "warn") print(`Warning: ${f.message}.`);
  return { env, target };
}

/**
 * The environment a launcher starts from. Its invalid values stop a devnet start at once, before
 * a devnet is started for nothing; on live Celo preflight() lists them with every other problem.
 */
export function launchEnvironment(): Env {
  const { env, problems } = parseEnvironment();
  if (problems.length && !env.PONDER_RPC_URL_42220) throw new StartupError(problems);
  return env;
}
