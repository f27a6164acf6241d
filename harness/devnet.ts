import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { type Devnet, type DevnetOptions, startDevnet } from "../devnet/devnet.ts";

export type TestDevnet = Devnet & { manifestPath: string };

/**
 * A small seeded devnet (all personas, a few dozen background wallets, daily blocks) with its
 * manifest, in a directory of its own that stop() removes.
 */
export async function startTestDevnet(options: DevnetOptions = {}): Promise<TestDevnet> {
  const manifestPath = join(mkdtempSync(join(tmpdir(), "devnet-")), "manifest.json");
  const removeManifest = () => rmSync(dirname(manifestPath), { recursive: true, force: true });
  let devnet: Devnet;
  try {
    devnet = await startDevnet({ wallets: 40, months: 13, slotHours: 24, ...options, manifestPath });
  } catch (error) {
    removeManifest();
    throw error;
  }
  return {
    ...devnet,
    manifestPath,
    stop: async () => {
      try {
        await devnet.stop();
      } finally {
        removeManifest();
      }
    },
  };
}
