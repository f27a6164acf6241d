import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { unixfs } from "@helia/unixfs";
import { FsBlockstore } from "blockstore-fs";
import { FsDatastore } from "datastore-fs";
import { createHeliaLight } from "helia";
import { importer } from "ipfs-unixfs-importer";
import { fixedSize } from "ipfs-unixfs-importer/chunker";
import { CID } from "multiformats/cid";

/** The importer settings every CID here is made with: CIDv1, raw leaves, 1 MiB chunks. */
const IMPORT = { cidVersion: 1, rawLeaves: true, chunker: fixedSize({ chunkSize: 1024 * 1024 }) } as const;

/** Imports `bytes` into `blockstore` as a UnixFS file: the one way a CID is made here. */
async function importBytes(bytes: Uint8Array, blockstore: Parameters<typeof importer>[1]): Promise<CID> {
  let root: CID | undefined;
  for await (const entry of importer([{ content: bytes }], blockstore, IMPORT)) root = entry.cid;
  return root!;
}

/**
 * The service's own IPFS node: a Helia node over a blockstore and datastore on disk, never started,
 * so it neither listens nor dials (it runs offline and behind firewalls). It adds and pins content
 * (passport documents, statements) and serves back what it holds.
 */
export type IpfsNode = {
  /** Adds and pins `bytes`; returns its CID (v1, base32). The same bytes always give the same CID. */
  add(bytes: Uint8Array): Promise<string>;
  /** The pinned content of `cid`, checked against the CID; undefined when this node does not hold it. */
  get(cid: string): Promise<Uint8Array | undefined>;
  /** How many CIDs are pinned, for health. */
  pinnedCount(): Promise<number>;
  close(): Promise<void>;
};

/** Parses a CID (v0 or v1); undefined when `text` is not one. */
export function parseCid(text: string): CID | undefined {
  try {
    return CID.parse(text);
  } catch {
    return undefined;
  }
}

/** The CID `bytes` get when added here, computed without storing anything. */
export async function cidOf(bytes: Uint8Array): Promise<string> {
  const discard = { put: async (cid: CID) => cid, has: async () => false } as never;
  return (await importBytes(bytes, discard)).toString();
}

export async function openIpfs(directory: string): Promise<IpfsNode> {
  mkdirSync(join(directory, "blocks"), { recursive: true });
  mkdirSync(join(directory, "data"), { recursive: true });
  const blockstore = new FsBlockstore(join(directory, "blocks"));
  const datastore = new FsDatastore(join(directory, "data"));
  await blockstore.open();
  await datastore.open();
  // No block brokers and no routers: nothing is ever fetched from, or announced to, the network.
  const helia = createHeliaLight({ blockstore, datastore, blockBrokers: [], routers: [] });
  const fs = unixfs(helia);

  const isPinned = async (cid: CID) => helia.pins.isPinned(cid).catch(() => false);
  return {
    async add(bytes) {
      const cid = await importBytes(bytes, helia.blockstore as never);
      if (!(await isPinned(cid))) for await (const _ of helia.pins.add(cid)) void _;
      return cid.toString();
    },
    async get(text) {
      const cid = parseCid(text);
      if (!cid || !(await isPinned(cid))) return undefined;
      const chunks: Uint8Array[] = [];
      for await (const chunk of fs.cat(cid, { offline: true } as never)) chunks.push(chunk);
      const bytes = Buffer.concat(chunks);
      // Serve nothing that does not hash to what was asked for.
      if ((await cidOf(bytes)) !== cid.toV1().toString()) throw new Error(`the content held for ${text} does not match its CID`);
      return bytes;
    },
    async pinnedCount() {
      let n = 0;
      for await (const _ of helia.pins.ls()) n++;
      return n;
    },
    async close() {
      await helia.stop().catch(() => undefined);
      await blockstore.close();
      await datastore.close();
    },
  };
}
