/** The module every Ponder process of the service preloads (why: its own comment). */
export const PONDER_PRELOAD = new URL("./event-loop-monitor.mjs", import.meta.url);

/**
 * The environment of a Ponder process (`ponder start`, `serve`) spawned with `env`: its NODE_OPTIONS
 * and the preload, named by URL (a path with spaces stays one option). The npm scripts that exec
 * ponder themselves (`serve`, `dev:ponder`) name it in package.json (test/ponder-host.test.ts checks).
 */
export function ponderProcessEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const preload = `--import=${PONDER_PRELOAD.href}`;
  return { ...env, NODE_OPTIONS: env.NODE_OPTIONS ? `${env.NODE_OPTIONS} ${preload}` : preload };
}
