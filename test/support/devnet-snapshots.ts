import { mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    /** Where the run keeps seeded devnets for the files that ask for the same settings (harness/devnet.ts). */
    devnetSnapshots: string;
  }
}

/**
 * vitest globalSetup of every project. Seeding a devnet's months of history costs a file a couple of
 * CPU-seconds (the seeder and anvil); restoring anvil's state of the same devnet a few tenths. The
 * projects share the directory (the setups run in vitest's own process): a file that runs on both
 * databases seeds its devnet once. Removed when the run ends.
 */
export default function setup(project: TestProject): () => void {
  const dir = join(tmpdir(), `devnet-snapshots-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  project.provide("devnetSnapshots", dir);
  return () => rmSync(dir, { recursive: true, force: true });
}
