import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { ViteNodeServer } from "vite-node/server";

/**
 * Ponder's build runs the config, the schema and src/ (the API and everything it imports) through
 * vite-node, which transforms with Vite and evaluates apart from Node's module cache every library
 * file it guesses Node cannot import: among them any under an `esm/` folder. That is Ponder's own
 * dist/esm and the GraphQL stack its index pulls in, the MCP SDK and zod-to-json-schema: about 460
 * files at each start, transformed again every time. Node 24 imports them itself (it detects ESM
 * syntax), so they are left to it: then they are the instances Ponder's CLI already loaded.
 * Our TypeScript and Ponder's virtual modules still go through Vite.
 *
 * vite-node takes no option for it from Ponder or Vite's config, hence the patch of its class.
 * Ponder's Vite reads vite.config.ts, which calls this before Ponder makes its ViteNodeServer.
 */
const NATIVE_LIBRARY_FILE = /\/node_modules\/.*\.(?:js|mjs|cjs)$/;

const patched = Symbol.for("celo-wallet-reputation.importLibrariesNatively");

export function importLibrariesNatively(): void {
  const server = ViteNodeServer.prototype as ViteNodeServer & { [patched]?: true };
  if (server[patched]) return;
  const guess = server.shouldExternalize;
  server.shouldExternalize = function (this: ViteNodeServer, id: string) {
    return NATIVE_LIBRARY_FILE.test(id) ? Promise.resolve(id) : guess.call(this, id);
  };
  server[patched] = true;
}

/** Where the transforms are kept, under the project: with the installed packages, which npm ci replaces. */
export const KEPT_TRANSFORMS = "node_modules/.cache/ponder-transforms";

type Transformed = { code: string; map?: unknown } | null;
type ViteSettings = { root: string; env: Record<string, unknown>; define?: Record<string, unknown> };
/** The method of vite-node's (private in its types) that makes a module's code. */
type TransformRequest = (
  this: { server: { config: ViteSettings } },
  id: string,
  filepath: string,
  mode: "web" | "ssr",
) => Promise<Transformed>;
const cached = Symbol.for("celo-wallet-reputation.keepTransforms");

/**
 * What vite-node makes of each of our TypeScript files (Vite's transforms, its SSR rewrite, an
 * inline source map), kept on disk from one Ponder start to the next: making them again took about
 * 1.4 CPU-seconds of every start (the transforms, their source maps, Vite's esbuild service), and
 * the test suite starts Ponder some sixty times. A kept file is used only under the same key: the
 * file's path and bytes, and what else shapes the output, the Vite and TypeScript settings
 * (vite.config.ts, tsconfig.json, Vite's mode and env) and the installed packages
 * (package-lock.json: Ponder's, Vite's, vite-node's). Our imports name files with their extension,
 * so where they lead does not change under the same bytes. Ponder's virtual modules, library files
 * and anything not on disk under the project go through Vite as before, and so does everything when
 * the directory cannot be written. `ponder dev` gains too: a file saved is transformed again, as its
 * bytes changed.
 */
export function keepTransforms(directory = KEPT_TRANSFORMS): void {
  const server = ViteNodeServer.prototype as unknown as { _transformRequest: TransformRequest; [cached]?: true };
  if (server[cached]) return;
  const transform = server._transformRequest;
  const salts = new Map<string, string>();
  // What the output depends on besides the file: the settings' files, the packages, and what Vite
  // writes into modules (import.meta.env, `define`), which differs between `ponder dev` and `start`.
  const saltOf = ({ root, env, define }: ViteSettings) => {
    const settings = JSON.stringify([root, env, define ?? null]);
    let salt = salts.get(settings);
    if (salt === undefined) {
      const hash = createHash("sha256").update(settings);
      for (const file of ["package-lock.json", "tsconfig.json", "vite.config.ts"]) {
        try {
          hash.update(readFileSync(join(root, file)));
        } catch {
          hash.update(`no ${file}`);
        }
      }
      salt = hash.digest("hex");
      salts.set(settings, salt);
    }
    return salt;
  };
  server._transformRequest = async function (id, filepath, mode) {
    const { root } = this.server.config;
    if (mode !== "ssr" || id.includes("?") || !filepath.startsWith(`${root}/`) || filepath.includes("/node_modules/"))
      return transform.call(this, id, filepath, mode);
    let kept: string | undefined;
    try {
      const key = createHash("sha256")
        .update(saltOf(this.server.config))
        .update(id)
        .update(readFileSync(filepath))
        .digest("hex");
      kept = join(root, directory, `${key}.json`);
      return JSON.parse(readFileSync(kept, "utf8")) as Transformed;
    } catch {
      // Not kept yet (or the file cannot be read: Vite says why).
    }
    const result = await transform.call(this, id, filepath, mode);
    if (result && kept) {
      try {
        mkdirSync(dirname(kept), { recursive: true });
        const partial = `${kept}.${process.pid}.tmp`;
        writeFileSync(partial, JSON.stringify({ code: result.code, map: result.map }));
        renameSync(partial, kept);
      } catch {
        // A read-only install: every start transforms, as without this.
      }
    }
    return result;
  };
  server[cached] = true;
}
