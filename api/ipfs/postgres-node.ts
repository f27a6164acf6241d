import type { CID } from "multiformats/cid";
import type { ServiceDb } from "../store/store.ts";
import { catFile, hashesTo, type IpfsNode, importBytes, isRawSha256, offlineHelia, parseCid } from "./node.ts";
import { type Block, PostgresBlockstore } from "./postgres-blockstore.ts";

/**
 * The service's IPFS node on Postgres: its blocks and pins in the service store
 * (`service.ipfs_block`), so what one replica pins every replica serves and verifies. Offline like
 * the node on disk. Nothing is kept in memory between calls: every read is hashed against its CID,
 * so a row changed in the table is refused at once, by every replica.
 */
export async function openPostgresIpfs(db: ServiceDb): Promise<IpfsNode> {
  const blocks = new PostgresBlockstore(db);
  // Its datastore (Helia's pins) is the default in memory and never used: pins are the table's.
  const { helia, fs } = await offlineHelia({ blockstore: blocks });
  return {
    async add(bytes) {
      // Imported in memory (the content is there already), then written with its pin in one statement.
      const made: Block[] = [];
      const root = await importBytes(bytes, {
        put: async (cid: CID, block: Uint8Array) => {
          made.push({ cid, bytes: block });
          return cid;
        },
        has: async () => false,
      } as never);
      await blocks.putPinned(made, root);
      return root.toString();
    },
    async get(text) {
      const cid = parseCid(text);
      const root = cid && (await blocks.getPinned(cid));
      if (!cid || !root) return undefined;
      // One raw block is the content itself; a larger file is read through its DAG. Either way, served only when it hashes to the CID.
      const bytes = isRawSha256(cid) ? root : await catFile(fs, cid);
      if (!(await hashesTo(cid, bytes))) throw new Error(`the content held for ${text} does not match its CID`);
      return bytes;
    },
    pinnedCount: () => blocks.pinnedCount(),
    async close() {
      await helia.stop().catch(() => undefined);
    },
  };
}
