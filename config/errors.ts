/**
 * A problem with how the service was started (environment, manifest, RPC). Launchers print only
 * its message, one line naming the problem and the fix, never a stack trace.
 */
export class StartupError extends Error {
  override name = "StartupError";
  /** The launcher's exit code: 1, or 78 (EX_CONFIG) where restarting cannot help (scripts/indexed-settings.ts). */
  readonly exitCode: number;
  constructor(message: string, options: { exitCode?: number } = {}) {
    super(message);
    this.exitCode = options.exitCode ?? 1;
  }
}

/** Formats zod issues as "path: message; path: message". */
export function describeIssues(issues: readonly { path: readonly PropertyKey[]; message: string }[]): string {
  return issues.map((i) => `${i.path.length ? i.path.map(String).join(".") : "(root)"}: ${i.message}`).join("; ");
}
