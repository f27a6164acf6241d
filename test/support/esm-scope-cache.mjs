// Preloaded into every Node process of `npm test` (scripts/test.sh: NODE_OPTIONS=--import): Ponder's
// indexers, vitest's workers, the launchers. Node (24.21, and 26.10 still) looks up a module's
// package scope for every ES module file it loads (getPackageScopeConfig, to tell ESM from CJS),
// and that lookup parses the package's whole `exports` map again each time: drizzle-orm's
// package.json is 175 kB, so importing drizzle-orm/pg-core takes 0.3-0.4 s, and `ponder` 0.9-1.0 s
// (0.04 s and 0.4-0.5 s with this hook, 2026-12-02). Each indexer a test starts imports both.
//
// For a relative import from one file of an installed package to another (./x.js, ../y.mjs) in a
// scope that says "type": "module" (read once per directory here), the answer is known without
// that lookup: the file's URL, format "module". Everything else goes to Node's own resolution,
// unchanged, and the service outside the tests never loads this file.
import { existsSync, readFileSync } from "node:fs";
import * as nodeModule from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** Directory -> whether its package scope (the nearest package.json up the tree) says "type": "module". */
const moduleScope = new Map();

function isModuleScope(dir) {
  const known = moduleScope.get(dir);
  if (known !== undefined) return known;
  const manifest = join(dir, "package.json");
  const parent = dirname(dir);
  const answer = existsSync(manifest)
    ? JSON.parse(readFileSync(manifest, "utf8")).type === "module"
    : parent !== dir && isModuleScope(parent);
  moduleScope.set(dir, answer);
  return answer;
}

/**
 * ESM_SCOPE_CACHE_CHECK=1 (test/esm-scope-cache.test.ts): every answer is compared with Node's own
 * resolution, a difference throws, and the number of answers is printed to stderr at exit.
 */
const checking = process.env.ESM_SCOPE_CACHE_CHECK === "1";
let answered = 0;
if (checking) process.on("exit", () => process.stderr.write(`esm-scope-cache: ${answered} imports answered\n`));

// registerHooks is Node 22.15 and later: an older node (the system's, when a test runs one) loads as it always did.
nodeModule.registerHooks?.({
  resolve(specifier, context, nextResolve) {
    const parent = context.parentURL;
    if (parent?.startsWith("file:") && parent.includes("/node_modules/") && /^\.\.?\//.test(specifier)) {
      const url = new URL(specifier, parent);
      const path = fileURLToPath(url);
      const esm = path.endsWith(".mjs") || (path.endsWith(".js") && isModuleScope(dirname(path)));
      if (esm && existsSync(path)) {
        answered++;
        if (checking) {
          const node = nextResolve(specifier, context);
          if (node.url !== url.href || node.format !== "module")
            throw new Error(
              `esm-scope-cache: ${specifier} from ${parent}: ${url.href} (module), Node says ${node.url} (${node.format})`,
            );
        }
        return { url: url.href, format: "module", shortCircuit: true };
      }
    }
    return nextResolve(specifier, context);
  },
});
