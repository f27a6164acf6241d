// The harness is shared with the benchmarks (bench/ does not import from test/): harness/payments.ts.
export * from "../../harness/payments.ts";
