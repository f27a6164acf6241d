// Layers and cycles (issue 23): `npm run deps`, and test/layers.test.ts in the suite.
// api/http (Hono adapters) depends on api/payments (the payment core), never the reverse; shared/
// is a leaf; the payment core loads neither Hono nor Ponder (type-only imports erase at runtime).

/** npm packages the payment core must not load: the web framework and the indexer. */
const FRAMEWORKS = "^node_modules/(hono|@hono/[^/]+|ponder)/";

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment:
        "An import cycle, type-only ones included: the modules of a cycle cannot be read, tested or loaded one without the other.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "payments-not-to-http",
      comment: "api/payments is the core; api/http adapts it to Hono. The core names no adapter, not even its types.",
      severity: "error",
      from: { path: "^api/payments/" },
      to: { path: "^api/http/" },
    },
    {
      name: "payments-not-to-mcp",
      comment: "The MCP server (api/mcp) reaches the core through the HTTP routes; the core names no transport.",
      severity: "error",
      from: { path: "^api/payments/" },
      to: { path: "^api/mcp/" },
    },
    {
      name: "payments-not-to-frameworks",
      comment: "The payment core runs without Hono or Ponder (tests, other hosts): their types only.",
      severity: "error",
      from: { path: "^api/payments/" },
      to: { path: FRAMEWORKS, dependencyTypesNot: ["type-only"] },
    },
    {
      name: "shared-is-a-leaf",
      comment: "shared/ (logger, error shape, async helpers) is imported by every layer, so it imports none of them.",
      severity: "error",
      from: { path: "^shared/" },
      to: {
        pathNot: ["^shared/", "^node_modules/"],
        dependencyTypes: ["local", "aliased-subpath-import", "aliased-tsconfig", "aliased"],
      },
    },
    {
      name: "lifecycle-is-pure",
      comment: "The payment state machine is a pure module: it imports types and nothing else.",
      severity: "error",
      from: { path: "^api/payments/lifecycle\\.ts$" },
      to: { dependencyTypesNot: ["type-only"] },
    },
    {
      name: "no-orphans",
      comment:
        "A module nothing imports is dead code (entry points excepted: Ponder's src/, scripts, harness, bench, devnet, tests).",
      severity: "error",
      from: {
        orphan: true,
        pathNot: [
          "(^|/)[.][^/]+[.](?:c|m)?js$",
          "[.]d[.]ts$",
          "^(src|scripts|harness|bench|devnet|test|contracts)/",
          "^[^/]+[.]ts$",
          "drizzle[.]config[.]ts$",
        ],
      },
      to: {},
    },
  ],
  options: {
    // npm packages are nodes, not followed: a pure module importing one is seen.
    doNotFollow: { path: "node_modules" },
    // Type-only imports count for cycles and for the adapter rule (they still couple the files).
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
    },
  },
};
