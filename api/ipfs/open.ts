import type { IndexTarget } from "../../config/target.ts";
import { firstLine } from "../../shared/async.ts";
import { log } from "../../shared/log.ts";
import type { ServiceStore } from "../store/store.ts";
import { copyPinnedFromDisk } from "./copy-from-disk.ts";
import { type IpfsNode, openIpfs } from "./node.ts";
import { openPostgresIpfs } from "./postgres-node.ts";

/**
 * The service's IPFS node for its database. Postgres: in the service store, so content pinned by
 * any process (the indexer's API or a replica) is served and verified by every one; what an older
 * version pinned in IPFS_DIR is copied in once. PGlite admits one process: on disk in IPFS_DIR,
 * apart from the store.
 */
export async function openServiceIpfs(
  target: Pick<IndexTarget, "database" | "ipfsDirectory">,
  store: Promise<ServiceStore>,
): Promise<IpfsNode> {
  if (target.database.kind !== "postgres") return openIpfs(target.ipfsDirectory);
  const node = await openPostgresIpfs((await store).db);
  await copyPinnedFromDisk(target.ipfsDirectory, node);
  return node;
}

/**
 * A node opened on its first use (a passport, a statement, verify, health's integrations): most
 * processes never pin or read anything, and opening one (Helia and its stores) costs about a second
 * of a start. A failed opening is logged and tried again on the next use.
 */
export function openedOnUse(open: () => Promise<IpfsNode>): IpfsNode {
  let node: Promise<IpfsNode> | undefined;
  const opened = () =>
    (node ??= open().catch((error: unknown) => {
      log.error(`[api] cannot open the IPFS node: ${firstLine(error)}`);
      node = undefined;
      throw error;
    }));
  return {
    add: async (bytes) => (await opened()).add(bytes),
    get: async (cid) => (await opened()).get(cid),
    pinnedCount: async () => (await opened()).pinnedCount(),
    close: async () => (await node?.catch(() => undefined))?.close(),
  };
}
