import type { IndexTarget } from "../../config/target.ts";
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
