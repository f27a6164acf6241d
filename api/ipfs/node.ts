import { createHash } from "node:crypto";
import type { BigIntStats } from "node:fs";
import { mkdirSync } from "node:fs";
import { open, stat } from "node:fs/promises";
import { join } from "node:path";
import type { UnixFS } from "@helia/unixfs";
import { FsBlockstore } from "blockstore-fs";
import { NextToLast } from "blockstore-fs/sharding";
import { FsDatastore } from "datastore-fs";
import type { HeliaInit } from "helia";
import { importer } from "ipfs-unixfs-importer";
import { fixedSize } from "ipfs-unixfs-importer/chunker";
import { CID } from "multiformats/cid";

/** The importer settings every CID here is made with: CIDv1, raw leaves, 1 MiB chunks. */
const IMPORT = { cidVersion: 1, rawLeaves: true, chunker: fixedSize({ chunkSize: 1024 * 1024 }) } as const;

/** sha256 and the raw codec: a file under 1 MiB is one raw block, and its CID's digest is the sha256 of its bytes. */
export const SHA2_256 = 0x12;
export const RAW = 0x55;
export const isRawSha256 = (cid: CID) => cid.code === RAW && cid.multihash.code === SHA2_256;

/** Imports `bytes` into `blockstore` as a UnixFS file: the one way a CID is made here. */
export async function importBytes(bytes: Uint8Array, blockstore: Parameters<typeof importer>[1]): Promise<CID> {
  let root: CID | undefined;
  for await (const entry of importer([{ content: bytes }], blockstore, IMPORT)) root = entry.cid;
  return root!;
}

/**
 * The service's own IPFS node: a Helia node never started, so it neither listens nor dials (it runs
 * offline and behind firewalls). It adds and pins content (passport documents, statements) and
 * serves back what it holds. On disk here (openIpfs: PGlite, one process); on Postgres in the
 * service store, shared by every replica (postgres-node.ts).
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

/** Whether `bytes` are what `cid` names: a raw block's sha256 against the digest, else the import done again. */
export async function hashesTo(cid: CID, bytes: Uint8Array): Promise<boolean> {
  return isRawSha256(cid)
    ? createHash("sha256").update(bytes).digest().equals(cid.multihash.digest)
    : (await cidOf(bytes)) === cid.toV1().toString();
}

/** A UnixFS file's bytes, read from the node's blockstore alone. */
export async function catFile(fs: UnixFS, cid: CID): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of fs.cat(cid, { offline: true } as never)) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** How many pinned CIDs a node remembers (about 100 bytes each). */
const MAX_REMEMBERED_PINS = 200_000;

/**
 * An offline Helia node over `init`'s stores, and its UnixFS. Helia is loaded here, when a node is
 * opened: it is the heaviest import of the API (about 1 s), and most processes that load the API's
 * modules (test files, scripts, the CLI's checks) never open one.
 */
export async function offlineHelia(init: Pick<HeliaInit, "blockstore" | "datastore">) {
  const [{ createHeliaLight }, { unixfs }] = await Promise.all([import("helia"), import("@helia/unixfs")]);
  // No block brokers and no routers: nothing is ever fetched from, or announced to, the network.
  const helia = createHeliaLight({ ...init, blockBrokers: [], routers: [] });
  return { helia, fs: unixfs(helia) };
}

/** The node on disk; it also lists what it pinned (copy-from-disk.ts reads it so). */
export type DiskIpfsNode = IpfsNode & { pinnedCids(): AsyncGenerator<string> };

/** The node on disk: blocks and Helia's pins under `directory` (blockstore-fs, datastore-fs). */
export async function openIpfs(directory: string): Promise<DiskIpfsNode> {
  mkdirSync(join(directory, "blocks"), { recursive: true });
  mkdirSync(join(directory, "data"), { recursive: true });
  // The blockstore's own file layout, held here so a raw block can be read in one call (below).
  const sharding = new NextToLast();
  const blockstore = new FsBlockstore(join(directory, "blocks"), { shardingStrategy: sharding });
  const datastore = new FsDatastore(join(directory, "data"));
  await blockstore.open();
  await datastore.open();
  const { helia, fs } = await offlineHelia({ blockstore, datastore });

  // Pins are only ever added (nothing here unpins): one seen stays true, and verify need not read the datastore for it again.
  const pinned = new Set<string>();
  const isPinned = async (cid: CID) => {
    const key = cid.toV1().toString();
    if (pinned.has(key)) return true;
    const yes = await helia.pins.isPinned(cid).catch(() => false);
    if (yes && pinned.size < MAX_REMEMBERED_PINS) pinned.add(key);
    return yes;
  };
  const verified = new VerifiedBlocks();
  /**
   * A raw block's bytes that hash to its CID, straight from its file (one read, not the UnixFS
   * exporter's stream: verify reads one per request). Bytes already verified are served again while
   * the file's stat says it was not written since (see VerifiedBlocks); otherwise read and hashed.
   */
  const readRawBlock = async (cid: CID, text: string) => {
    const { dir, file } = sharding.encode(cid);
    const path = join(directory, "blocks", dir, file);
    const missing = (error: NodeJS.ErrnoException) => {
      throw error.code === "ENOENT" ? new Error(`the block of ${cid} is missing from the blockstore`) : error;
    };
    const known = verified.get(text);
    if (known) {
      if (known.since === fileVersion(await stat(path, { bigint: true }).catch(missing))) return known.bytes;
      verified.forget(text);
    }
    // Stat, then read: a write after the stat changes the next stat, so what is kept is never newer than its version.
    const handle = await open(path).catch(missing);
    try {
      const version = await handle.stat({ bigint: true });
      const bytes = await handle.readFile();
      if (!(await hashesTo(cid, bytes))) throw new Error(`the content held for ${text} does not match its CID`);
      verified.keep(text, bytes, version);
      return bytes;
    } finally {
      await handle.close();
    }
  };
  async function* pinnedCids() {
    for await (const pin of helia.pins.ls()) yield pin.cid.toString();
  }
  return {
    async add(bytes) {
      const cid = await importBytes(bytes, helia.blockstore as never);
      if (!(await isPinned(cid))) for await (const _ of helia.pins.add(cid)) void _;
      if (pinned.size < MAX_REMEMBERED_PINS) pinned.add(cid.toV1().toString());
      return cid.toString();
    },
    async get(text) {
      const cid = parseCid(text);
      if (!cid || !(await isPinned(cid))) return undefined;
      if (isRawSha256(cid)) return readRawBlock(cid, text);
      const bytes = await catFile(fs, cid);
      // Serve nothing that does not hash to what was asked for.
      if (!(await hashesTo(cid, bytes))) throw new Error(`the content held for ${text} does not match its CID`);
      return bytes;
    },
    pinnedCids,
    async pinnedCount() {
      let n = 0;
      for await (const _ of pinnedCids()) n++;
      return n;
    },
    async close() {
      await helia.stop().catch(() => undefined);
      await blockstore.close();
      await datastore.close();
    },
  };
}

/** A block file's version: any write changes its ctime (which no caller can set back), as does a replaced file its inode. */
const fileVersion = (s: BigIntStats) => `${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;

/**
 * Raw blocks whose bytes were hashed against their CID, kept with the version of the file they
 * were read from. Only files unchanged for STABLE_AFTER_MS are kept: the kernel stamps ctime from
 * a coarse clock (a few ms), so a write in the same tick as the one kept might not change it.
 */
class VerifiedBlocks {
  private static readonly STABLE_AFTER_MS = 2_000;
  private static readonly MAX_BYTES = 32 * 1024 * 1024;
  private readonly blocks = new Map<string, { bytes: Uint8Array; since: string }>();
  private bytes = 0;

  get(cid: string) {
    return this.blocks.get(cid);
  }

  keep(cid: string, bytes: Uint8Array, version: BigIntStats) {
    if (
      Date.now() - Number(version.ctimeNs / 1_000_000n) < VerifiedBlocks.STABLE_AFTER_MS ||
      bytes.length > VerifiedBlocks.MAX_BYTES / 64
    )
      return;
    this.forget(cid);
    this.blocks.set(cid, { bytes, since: fileVersion(version) });
    this.bytes += bytes.length;
    // The oldest kept go first (a Map iterates in insertion order).
    for (const [oldest] of this.blocks) {
      if (this.bytes <= VerifiedBlocks.MAX_BYTES) break;
      this.forget(oldest);
    }
  }

  forget(cid: string) {
    const kept = this.blocks.get(cid);
    if (kept) this.bytes -= kept.bytes.length;
    this.blocks.delete(cid);
  }
}
