import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { log } from "../../shared/log.ts";
import { type IpfsNode, openIpfs } from "./node.ts";

/** Left in a directory once its content is copied: the copy is made once. */
export const COPIED_MARKER = "copied-to-service-store";

/**
 * Content a process pinned on disk (IPFS_DIR) before IPFS content moved into the service store on
 * Postgres, copied into the shared node: passports issued and statements made before the upgrade are
 * then still served and verified, by every replica. Each is read back checked against its CID and
 * added again (the one import setting gives the same CID); content that fails the check is left
 * out and logged. Once per directory: a marker file is left in it.
 */
export async function copyPinnedFromDisk(
  directory: string,
  into: IpfsNode,
): Promise<{ copied: number; refused: number }> {
  const result = { copied: 0, refused: 0 };
  if (!existsSync(join(directory, "data")) || existsSync(join(directory, COPIED_MARKER))) return result;
  const disk = await openIpfs(directory);
  try {
    for await (const cid of disk.pinnedCids()) {
      const bytes = await disk
        .get(cid)
        .catch((error: Error) => void log.warn(`[ipfs] not copied from ${directory}: ${error.message}`));
      if (bytes && (await into.add(bytes)) === cid) result.copied++;
      else result.refused++;
    }
  } finally {
    await disk.close();
  }
  writeFileSync(
    join(directory, COPIED_MARKER),
    `${new Date().toISOString()} ${result.copied} copied, ${result.refused} refused\n`,
  );
  log.info(
    `[ipfs] copied ${result.copied} pinned CIDs from ${directory} into the service store (${result.refused} refused)`,
  );
  return result;
}
