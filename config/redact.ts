/** Redacts credentials and API keys that RPC URLs often carry in the path or query. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname.length > 1 ? "/…" : ""}`;
  } catch {
    return "(unparseable URL)";
  }
}

/** A Postgres connection string without its password or parameters: user, host and database name are what an operator checks. */
export function redactDatabaseUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.username ? `${decodeURIComponent(u.username)}@` : ""}${u.host}${u.pathname}`;
  } catch {
    return "(unparseable URL)";
  }
}
