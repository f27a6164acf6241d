/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** An error's first line: what a one-line log or refusal names (RPC errors carry pages of detail after it). */
export const firstLine = (error: unknown): string => String((error as Error)?.message ?? error).split("\n")[0]!;

/**
 * Calls `ask` until it answers, waiting `firstPause` ms after the first failure and twice as long
 * after each next one (at most `maxPause`); gives up, with the last error, when the next wait would
 * end past `withinMs`.
 */
export async function askUntilAnswered<T>(
  ask: () => Promise<T>,
  withinMs: number,
  { firstPause, maxPause = Number.POSITIVE_INFINITY }: { firstPause: number; maxPause?: number },
): Promise<{ answer: T } | { error: unknown }> {
  const deadline = Date.now() + withinMs;
  for (let pause = firstPause; ; pause = Math.min(pause * 2, maxPause)) {
    try {
      return { answer: await ask() };
    } catch (error) {
      if (Date.now() + pause > deadline) return { error };
      await sleep(pause);
    }
  }
}
