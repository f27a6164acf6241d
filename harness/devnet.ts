import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { type Devnet, type DevnetOptions, startDevnet } from "../devnet/devnet.ts";
import { restoreSnapshot, saveSnapshot, snapshotSaved } from "../devnet/snapshot.ts";
import { sleep } from "../shared/async.ts";

export type TestDevnet = Devnet & { manifestPath: string };

/**
 * `snapshots`: a directory where devnets seeded with the same settings are kept (test/support/
 * devnet-snapshots.ts makes one per test run), so that the next caller restores one instead of
 * seeding it again. Undefined: every devnet is seeded.
 */
export type TestDevnetReuse = { snapshots?: string };

/**
 * A small seeded devnet (all personas, a few dozen background wallets, daily blocks) with its
 * manifest, in a directory of its own that stop() removes.
 */
export async function startTestDevnet(
  options: DevnetOptions = {},
  { snapshots }: TestDevnetReuse = {},
): Promise<TestDevnet> {
  const manifestPath = join(mkdtempSync(join(tmpdir(), "devnet-")), "manifest.json");
  const removeManifest = () => rmSync(dirname(manifestPath), { recursive: true, force: true });
  const settings = { wallets: 40, months: 13, slotHours: 24, ...options, manifestPath };
  let devnet: Devnet;
  try {
    devnet = snapshots && reusable(options) ? await fromSnapshot(snapshots, settings) : await startDevnet(settings);
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

/** A preferred port, or a caller watching the seeding, asks for a devnet seeded now. */
const reusable = (options: DevnetOptions) =>
  options.port === undefined && options.log === undefined && options.onSeeding === undefined;

/** How long a caller waits for another process seeding the same devnet before seeding its own. */
const SEEDING_WAIT_MS = 180_000;

/**
 * The devnet of these settings restored from `snapshots`, or seeded and saved there for the next
 * caller. One process seeds a given devnet (a lock directory); others wait for its snapshot. Keyed
 * by the UTC day too: a devnet's history is laid out backwards from when it was seeded (months,
 * daily slots), and a snapshot restored the next day would be a day out of date.
 */
async function fromSnapshot(snapshots: string, settings: DevnetOptions): Promise<Devnet> {
  const dir = join(snapshots, snapshotKey(settings));
  const saved = () => snapshotSaved(dir);
  if (saved()) return restoreSnapshot(dir, settings.manifestPath);
  const lock = `${dir}.lock`;
  mkdirSync(snapshots, { recursive: true });
  try {
    mkdirSync(lock);
  } catch {
    const deadline = Date.now() + SEEDING_WAIT_MS;
    while (!saved() && existsSync(lock) && Date.now() < deadline) await sleep(100);
    return saved() ? restoreSnapshot(dir, settings.manifestPath) : startDevnet(settings);
  }
  try {
    const devnet = await startDevnet(settings);
    try {
      // Written aside and renamed: a waiting process never restores half a snapshot.
      await saveSnapshot(devnet, `${dir}.partial`);
      renameSync(`${dir}.partial`, dir);
    } catch (error) {
      await devnet.stop();
      throw error;
    }
    return devnet;
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function snapshotKey(settings: DevnetOptions): string {
  const { wallets, transfers, months, seed, slotHours, apiUrl } = settings;
  const seeded = JSON.stringify([wallets, transfers, months, seed, slotHours, apiUrl]);
  const day = new Date().toISOString().slice(0, 10);
  return `${day}-${createHash("sha256").update(seeded).digest("hex").slice(0, 16)}`;
}
