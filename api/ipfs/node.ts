import { createHash } from "node:crypto";
import { mkdirSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { unixfs } from "@helia/unixfs";
import { FsBlockstore } from "blockstore-fs";
import { NextToLast } from "blockstore-fs/sharding";
import { FsDatastore } from "datastore-fs";
import { createHeliaLight } from "helia";
import { importer } from "ipfs-unixfs-importer";
import { fixedSize } from "ipfs-unixfs-importer/chunker";
import { CID } from "multiformats/cid";

/** The importer settings every CID here is made with: CIDv1, raw leaves, 1 MiB chunks. */
const IMPORT = { cidVersion: 1, rawLeaves: true, chunker: fixedSize({ chunkSize: 1024 * 1024 }) } as const;

/** sha256 and the raw codec: a file under 1 MiB is one raw block, and its CID's digest is the sha256 of its bytes. */
export const SHA2_256 = 0x12;
export const RAW = 0x55;
const isRawSha256 = (cid: CID) => cid.code === RAW && cid.multihash.code === SHA2_256;

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
  // The blockstore's own file layout, held here so a raw block can be read in one call (below).
  const sharding = new NextToLast();
  const blockstore = new FsBlockstore(join(directory, "blocks"), { shardingStrategy: sharding });
  const datastore = new FsDatastore(join(directory, "data"));
  await blockstore.open();
  await datastore.open();
  // No block brokers and no routers: nothing is ever fetched from, or announced to, the network.
  const helia = createHeliaLight({ blockstore, datastore, blockBrokers: [], routers: [] });
  const fs = unixfs(helia);

  const isPinned = async (cid: CID) => helia.pins.isPinned(cid).catch(() => false);
  /** A raw block's bytes straight from its file: one read, not the UnixFS exporter's stream (verify reads one per request). */
  const readRawBlock = async (cid: CID) => {
    const { dir, file } = sharding.encode(cid);
    return readFile(join(directory, "blocks", dir, file)).catch((error: NodeJS.ErrnoException) => {
      throw error.code === "ENOENT" ? new Error(`the block of ${cid} is missing from the blockstore`) : error;
    });
  };
  const cat = async (cid: CID) => {
    const chunks: Uint8Array[] = [];
    for await (const chunk of fs.cat(cid, { offline: true } as never)) chunks.push(chunk);
    return Buffer.concat(chunks);
  };
  /** Whether `bytes` are what `cid` names: a raw block's sha256 against the digest, else the import done again. */
  const hashesTo = async (cid: CID, bytes: Uint8Array) =>
    isRawSha256(cid) ? createHash("sha256").update(bytes).digest().equals(cid.multihash.digest) : (await cidOf(bytes)) === cid.toV1().toString();
  return {
    async add(bytes) {
      const cid = await importBytes(bytes, helia.blockstore as never);
      if (!(await isPinned(cid))) for await (const _ of helia.pins.add(cid)) void _;
      return cid.toString();
    },
    async get(text) {
      const cid = parseCid(text);
      if (!cid || !(await isPinned(cid))) return undefined;
      const bytes = isRawSha256(cid) ? await readRawBlock(cid) : await cat(cid);
      // Serve nothing that does not hash to what was asked for: checked on every read, nothing is trusted from before.
      if (!(await hashesTo(cid, bytes))) throw new Error(`the content held for ${text} does not match its CID`);
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
