/**
 * A problem with how the service was started (environment, manifest, RPC). Launchers print only
 * its message, one line naming the problem and the fix, never a stack trace.
 */
export class StartupError extends Error {
  override name = "StartupError";
}

/** Formats zod issues as "path: message; path: message". */
export function describeIssues(issues: readonly { path: readonly PropertyKey[]; message: string }[]): string {
  return issues.map((i) => `${i.path.length ? i.path.map(String).join(".") : "(root)"}: ${i.message}`).join("; ");
}
