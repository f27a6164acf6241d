import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import { Scalar } from "@scalar/hono-api-reference";
import { Hono } from "hono";

export const DOCS_TITLE = "Celo wallet screening and reputation — API reference";

/**
 * The browser bundle of @scalar/api-reference: the single-file UMD build, which loads no chunks
 * afterwards. The package's exports map does not list it, so it is found beside the main entry.
 */
function scalarBundlePath(): string {
  return join(dirname(createRequire(import.meta.url).resolve("@scalar/api-reference")), "browser", "standalone.js");
}

export type DocsOptions = {
  /** Where this sub-app is mounted: the page's script URL is absolute. */
  basePath?: string;
  /** The OpenAPI document the page renders. */
  documentUrl?: string;
};

/**
 * GET {basePath}: the interactive API reference (Scalar), and GET {basePath}/scalar.js: its script,
 * served from the npm package. The page fetches nothing but these and the document: no CDN, no
 * fonts, no telemetry, so it works offline and behind firewalls.
 */
export function docsRoutes({ basePath = "/docs", documentUrl = "/openapi.json" }: DocsOptions = {}) {
  const bundle = readFileSync(scalarBundlePath());
  // The script URL carries the bundle's hash, so it can be cached for good and still change on upgrade.
  const etag = `"${createHash("sha256").update(bundle).digest("hex").slice(0, 16)}"`;
  let gzipped: Promise<Buffer> | undefined; // compressed once, off the event loop, on first request (4.3 MB -> 1.3 MB)
  const scriptHeaders = {
    "content-type": "text/javascript; charset=utf-8",
    "cache-control": "public, max-age=31536000, immutable",
    etag,
    vary: "accept-encoding",
  };

  return new Hono()
    .get("/scalar.js", async (c) => {
      if (c.req.header("if-none-match") === etag) return c.body(null, 304, scriptHeaders);
      if (/\bgzip\b/.test(c.req.header("accept-encoding") ?? "")) {
        gzipped ??= promisify(gzip)(bundle);
        return c.body(new Uint8Array(await gzipped), 200, { ...scriptHeaders, "content-encoding": "gzip" });
      }
      return c.body(new Uint8Array(bundle), 200, scriptHeaders);
    })
    .get(
      "/",
      Scalar({
        url: documentUrl,
        cdn: `${basePath}/scalar.js?v=${etag.slice(1, -1)}`,
        pageTitle: DOCS_TITLE,
        title: DOCS_TITLE,
        // Everything that would reach Scalar's servers, off: web fonts, telemetry, the AI agent, MCP.
        withDefaultFonts: false,
        telemetry: false,
        agent: { disabled: true },
        mcp: { disabled: true },
        showDeveloperTools: "never",
        operationTitleSource: "path",
        defaultOpenAllTags: true,
      }),
    );
}
