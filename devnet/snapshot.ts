import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import type { Hex } from "viem";
import { manifestSchema } from "../config/manifest.ts";
import { startAnvil } from "./anvil.ts";
import { type Devnet, writeManifest } from "./devnet.ts";
import { rpc } from "./rpc.ts";

const STATE = "state.json";
const MANIFEST = "manifest.json";

/**
 * Keeps a seeded devnet in `dir`: anvil's state (every block, receipt, log and account, as
 * anvil_dumpState gives it) and the manifest. Call it before anything else touches the chain.
 */
export async function saveSnapshot(devnet: Devnet, dir: string): Promise<void> {
  mkdirSync(dir, { recursive: true });
  // anvil_dumpState answers gzipped JSON as hex; --load-state reads the JSON.
  const state = await rpc<Hex>(devnet.anvil.rpcUrl, "anvil_dumpState");
  writeFileSync(join(dir, STATE), gunzipSync(Buffer.from(state.slice(2), "hex")));
  writeManifest(join(dir, MANIFEST), devnet.manifest);
}

/** Whether `dir` holds a whole snapshot (its manifest is written last). */
export const snapshotSaved = (dir: string): boolean => existsSync(join(dir, MANIFEST));

/**
 * A new anvil started from a snapshot: the same blocks (same hashes), logs, contracts and
 * balances, with new blocks from the wall clock on. The manifest is the saved one on the new RPC URL
 * (written to `manifestPath` when given): its history ends when the snapshot was made.
 */
export async function restoreSnapshot(dir: string, manifestPath?: string): Promise<Devnet> {
  const anvil = await startAnvil({ loadState: join(dir, STATE) });
  try {
    const saved = JSON.parse(readFileSync(join(dir, MANIFEST), "utf8"));
    const manifest = manifestSchema.parse({ ...saved, rpcUrl: anvil.rpcUrl });
    if (manifestPath) writeManifest(manifestPath, manifest);
    return { anvil, manifest, stop: anvil.stop };
  } catch (error) {
    await anvil.stop();
    throw error;
  }
}
