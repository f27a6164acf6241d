// CLI for `npm run contracts:build`: compiles contracts/src and rewrites abis/ and contracts/artifacts/.
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { compileContracts, REPO_ROOT } from "./compile.ts";

export { compileContracts } from "./compile.ts";

async function main(): Promise<void> {
  const files = await compileContracts();
  for (const [path, contents] of files) {
    const target = join(REPO_ROOT, path);
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, contents);
    console.log(`wrote ${path}`);
  }
}

// Only run when executed, so importing compileContracts from here has no side effects.
if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
  });
}
