/**
 * The arguments of the Ponder commands this project runs: `start` (the launchers; `npm run
 * check:config` prints the same line) and `serve` (`npm run serve`, a replica). Both take the
 * schema, the port and the public bind address (HOST); `start` also creates the stable schema of
 * views for direct Postgres access (DATABASE_VIEWS_SCHEMA, docs/data.md).
 */
export function ponderArgs(command: "start" | "serve", schema: string, port: number, env: NodeJS.ProcessEnv): string[] {
  const viewsSchema =
    command === "start" && env.DATABASE_VIEWS_SCHEMA?.trim()
      ? ["--views-schema", env.DATABASE_VIEWS_SCHEMA.trim()]
      : [];
  const hostname = env.HOST?.trim() ? ["--hostname", env.HOST.trim()] : [];
  return [command, "--schema", schema, ...viewsSchema, "--port", String(port), ...hostname];
}
