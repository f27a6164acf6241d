/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** An error's first line: what a one-line log or refusal names (RPC errors carry pages of detail after it). */
export const firstLine = (error: unknown): string => String((error as Error)?.message ?? error).split("\n")[0]!;
