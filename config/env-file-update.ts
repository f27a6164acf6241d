import { existsSync, readFileSync, writeFileSync } from "node:fs";

/**
 * Sets `values` in an env file, keeping every other line as it is: a variable's line is replaced
 * where it stands (its commented-out default from `.env.example` too), or appended. A new file is
 * readable by its owner only: it holds keys.
 */
export function updateEnvFile(path: string, values: Record<string, string>): void {
  const exists = existsSync(path);
  const lines = exists ? readFileSync(path, "utf8").split("\n") : [];
  if (lines.at(-1) === "") lines.pop();
  for (const [key, value] of Object.entries(values)) {
    const active = new RegExp(`^\\s*(export\\s+)?${key}\\s*=`);
    const commented = new RegExp(`^\\s*#\\s*${key}\\s*=`);
    const at = lines.findIndex((line) => active.test(line));
    if (at >= 0) {
      lines[at] = `${key}=${value}`;
      // A later line of the same variable would win over this one: drop it.
      for (let i = lines.length - 1; i > at; i--) if (active.test(lines[i]!)) lines.splice(i, 1);
      continue;
    }
    const placeholder = lines.findIndex((line) => commented.test(line));
    if (placeholder >= 0) lines[placeholder] = `${key}=${value}`;
    else lines.push(`${key}=${value}`);
  }
  writeFileSync(path, `${lines.join("\n")}\n`, exists ? undefined : { mode: 0o600 });
}
