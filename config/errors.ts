/**
 * A problem with how the service was started (environment, manifest, RPC). Launchers print only
 * its message, never a stack trace: one line naming the problem and the fix, or, when several
 * problems were found together, one line each under a count.
 */
export class StartupError extends Error {
  override name = "StartupError";
  readonly problems: readonly string[];
  /** The launcher's exit code: 1, or 78 (EX_CONFIG) where restarting cannot help (scripts/indexed-settings.ts). */
  readonly exitCode: number;

  constructor(problems: string | readonly string[], options: { exitCode?: number } = {}) {
    const list = typeof problems === "string" ? [problems] : [...problems];
    super(list.length === 1 ? list[0]! : `${list.length} problems:\n${list.map((p) => `  - ${p}`).join("\n")}`);
    this.problems = list;
    this.exitCode = options.exitCode ?? 1;
  }
}

/** Formats zod issues as "path: message; path: message". */
export function describeIssues(issues: readonly { path: readonly PropertyKey[]; message: string }[]): string {
  return issues.map((i) => `${i.path.length ? i.path.map(String).join(".") : "(root)"}: ${i.message}`).join("; ");
}

/** Runs `fn`; a StartupError's problems go to `problems` (undefined is returned), anything else is a bug and is thrown. */
export function collectProblems<T>(problems: string[], fn: () => T): T | undefined {
  try {
    return fn();
  } catch (error) {
    if (!(error instanceof StartupError)) throw error;
    problems.push(...error.problems);
    return undefined;
  }
}
