import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { expect } from "vitest";
import { stopProcessGroup } from "../../devnet/anvil.ts";

const root = fileURLToPath(new URL("../..", import.meta.url));

/**
 * Runs a docs example as a reader would (`npx tsx <path>` at the repository's root), with `env`
 * added to this process's: its stdout, once it exited 0 (else the test fails with its stderr).
 * Its process group is stopped whatever happens.
 */
export async function runExample(path: string, env: Record<string, string>, timeoutMs = 90_000): Promise<string> {
  const child = spawn("npx", ["tsx", path], {
    cwd: root,
    env: { ...process.env, ...env },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  try {
    const [code] = (await once(child, "close", { signal: AbortSignal.timeout(timeoutMs) })) as [number | null];
    expect(code, stderr).toBe(0);
  } finally {
    await stopProcessGroup(child, 2_000);
  }
  return stdout;
}

/** The fenced block of `lang` between `<!-- name:start -->` and `<!-- name:end -->` in `page` (undefined: none). */
export const markedBlock = (page: string, name: string, lang: string): string | undefined =>
  new RegExp(`<!-- ${name}:start -->\\n\`\`\`${lang}\\n([\\s\\S]*?)\`\`\`\\n<!-- ${name}:end -->`).exec(page)?.[1];
