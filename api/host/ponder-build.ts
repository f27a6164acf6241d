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
