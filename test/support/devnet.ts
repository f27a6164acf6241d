// The harness is shared with the benchmarks (bench/ does not import from test/): harness/devnet.ts.
export * from "../../harness/devnet.ts";
