// The harness is shared with the benchmarks (bench/ does not import from test/): harness/indexer.ts.
export * from "../../harness/indexer.ts";
