/**
 * The `ponder start` arguments the launchers run: the schema, a stable schema of views for direct
 * Postgres access (DATABASE_VIEWS_SCHEMA, docs/data.md), the port and the public bind address
 * (HOST). `npm run check:config` prints the same line.
 */
export function ponderStartArgs(schema: string, port: number, env: NodeJS.ProcessEnv): string[] {
  const viewsSchema = env.DATABASE_VIEWS_SCHEMA?.trim() ? ["--views-schema", env.DATABASE_VIEWS_SCHEMA.trim()] : [];
  const hostname = env.HOST?.trim() ? ["--hostname", env.HOST.trim()] : [];
  return ["start", "--schema", schema, ...viewsSchema, "--port", String(port), ...hostname];
}
