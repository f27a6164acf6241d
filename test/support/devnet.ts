import { inject } from "vitest";
import type { DevnetOptions } from "../../devnet/devnet.ts";
import { startTestDevnet as seedOrRestore, type TestDevnet } from "../../harness/devnet.ts";

// The harness is shared with the benchmarks (bench/ does not import from test/): harness/devnet.ts.
export type { TestDevnet };

/**
 * The harness's test devnet, restored from the run's snapshot of the same settings when another
 * file (or the other database's run of this one) has seeded it already (test/support/devnet-snapshots.ts).
 * `fresh`: seeded now, a chain no other devnet shares a block with.
 */
export function startTestDevnet(options: DevnetOptions = {}, { fresh = false } = {}): Promise<TestDevnet> {
  return seedOrRestore(options, { snapshots: fresh ? undefined : inject("devnetSnapshots") });
}
