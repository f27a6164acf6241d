import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Devnet, type DevnetOptions, startDevnet } from "../devnet/devnet.ts";

export type TestDevnet = Devnet & { manifestPath: string };

/** A small seeded devnet (all personas, a few dozen background wallets, daily blocks) with its manifest. */
export async function startTestDevnet(options: DevnetOptions = {}): Promise<TestDevnet> {
  const manifestPath = join(mkdtempSync(join(tmpdir(), "devnet-")), "manifest.json");
  const devnet = await startDevnet({ wallets: 40, months: 13, slotHours: 24, ...options, manifestPath });
  return { ...devnet, manifestPath };
}
