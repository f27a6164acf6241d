import { count, eq, gt, sql } from "drizzle-orm";
import type { HeliaInit } from "helia";
import { CID } from "multiformats/cid";
import { ipfsBlock } from "../store/schema.ts";
import type { ServiceDb } from "../store/store.ts";

/** Helia 7's blockstore interface (interface-blockstore 7), named through helia, which this project depends on. */
type Blockstore = NonNullable<HeliaInit["blockstore"]>;
type AbortOptions = { signal?: AbortSignal };
type Bytes = Uint8Array | Iterable<Uint8Array> | AsyncIterable<Uint8Array>;
export type Block = { cid: CID; bytes: Uint8Array };

const RAW = 0x55;
/** A block's key: its multihash (Helia keys blocks so), spelled as a CIDv1 of the raw codec. */
const blockKey = (cid: CID) => CID.createV1(RAW, cid.multihash).toString();

/** Helia tells a missing block by this name (interface-store's NotFoundError). */
const notFound = (cid: CID) => Object.assign(new Error(`block ${cid} not found`), { name: "NotFoundError" });

/** Rows per query when every block is listed (getAll): blocks are up to 1 MiB each. */
const PAGE = 16;

/**
 * A Helia blockstore in the service store's `service.ipfs_block` table on Postgres: one store that
 * every API process reads and writes, so content pinned through one replica is served by all.
 * It stores and returns bytes as given, like any blockstore: readers check them against the CID
 * (Helia checks only blocks fetched from the network, never the blockstore's).
 *
 * Pins are the `pinned` column of the same rows (see the table in api/store/schema.ts), written with
 * the blocks in one statement (putPinned): Helia's own pins live in a datastore, which would be
 * one more store to share.
 */
export class PostgresBlockstore implements Blockstore {
  constructor(private readonly db: ServiceDb) {}

  async has(cid: CID, options?: AbortOptions): Promise<boolean> {
    options?.signal?.throwIfAborted();
    const rows = await this.db
      .select({ cid: ipfsBlock.cid })
      .from(ipfsBlock)
      .where(eq(ipfsBlock.cid, blockKey(cid)))
      .limit(1);
    return rows.length > 0;
  }

  async put(cid: CID, bytes: Bytes, options?: AbortOptions): Promise<CID> {
    options?.signal?.throwIfAborted();
    await this.write([{ cid, bytes: await concat(bytes) }]);
    return cid;
  }

  async *putMany(
    source: Iterable<{ cid: CID; bytes: Bytes }> | AsyncIterable<{ cid: CID; bytes: Bytes }>,
    options?: AbortOptions,
  ): AsyncGenerator<CID> {
    for await (const { cid, bytes } of source) yield await this.put(cid, bytes, options);
  }

  async *get(cid: CID, options?: AbortOptions): AsyncGenerator<Uint8Array> {
    options?.signal?.throwIfAborted();
    const [row] = await this.db
      .select({ bytes: ipfsBlock.bytes })
      .from(ipfsBlock)
      .where(eq(ipfsBlock.cid, blockKey(cid)))
      .limit(1);
    if (!row) throw notFound(cid);
    yield row.bytes;
  }

  async *getMany(
    source: Iterable<CID> | AsyncIterable<CID>,
    options?: AbortOptions,
  ): AsyncGenerator<{ cid: CID; bytes: AsyncGenerator<Uint8Array> }> {
    for await (const cid of source) yield { cid, bytes: this.get(cid, options) };
  }

  async *getAll(options?: AbortOptions): AsyncGenerator<{ cid: CID; bytes: AsyncGenerator<Uint8Array> }> {
    // Pages in key order, so that a table of any size is never read at once.
    let after = "";
    for (;;) {
      options?.signal?.throwIfAborted();
      const rows = await this.db
        .select({ cid: ipfsBlock.cid, bytes: ipfsBlock.bytes })
        .from(ipfsBlock)
        .where(gt(ipfsBlock.cid, after))
        .orderBy(ipfsBlock.cid)
        .limit(PAGE);
      for (const row of rows)
        yield {
          cid: CID.parse(row.cid),
          bytes: (async function* () {
            yield row.bytes;
          })(),
        };
      if (rows.length < PAGE) return;
      after = rows.at(-1)!.cid;
    }
  }

  async delete(cid: CID, options?: AbortOptions): Promise<void> {
    options?.signal?.throwIfAborted();
    await this.db.delete(ipfsBlock).where(eq(ipfsBlock.cid, blockKey(cid)));
  }

  async *deleteMany(source: Iterable<CID> | AsyncIterable<CID>, options?: AbortOptions): AsyncGenerator<CID> {
    for await (const cid of source) {
      await this.delete(cid, options);
      yield cid;
    }
  }

  /** Writes a file's blocks and pins its root, in one statement: a root is never pinned without its blocks. */
  async putPinned(blocks: Block[], root: CID): Promise<void> {
    const key = blockKey(root);
    await this.write(blocks.map((b) => ({ ...b, pinned: blockKey(b.cid) === key })));
  }

  /** The stored bytes of `cid` when it is a pinned root, unchecked; undefined when nothing pinned it. */
  async getPinned(cid: CID): Promise<Uint8Array | undefined> {
    const [row] = await this.db
      .select({ bytes: ipfsBlock.bytes, pinned: ipfsBlock.pinned })
      .from(ipfsBlock)
      .where(eq(ipfsBlock.cid, blockKey(cid)))
      .limit(1);
    return row?.pinned ? row.bytes : undefined;
  }

  async pinnedCount(): Promise<number> {
    const [row] = await this.db.select({ n: count() }).from(ipfsBlock).where(eq(ipfsBlock.pinned, true));
    return row!.n;
  }

  /**
   * Inserts the blocks; a row already there keeps its pin and takes the bytes written, which the
   * importer made from the content itself, so a re-add repairs a damaged block. A row already as
   * written is left alone (no new row version on every re-add, such as health's probe).
   */
  private async write(blocks: (Block & { pinned?: boolean })[]): Promise<void> {
    if (blocks.length === 0) return;
    // One row per key: an importer may give the same block twice (a file of repeated chunks).
    const rows = new Map(
      blocks.map((b) => [blockKey(b.cid), { cid: blockKey(b.cid), bytes: b.bytes, pinned: b.pinned ?? false }]),
    );
    for (const b of blocks) if (b.pinned) rows.get(blockKey(b.cid))!.pinned = true;
    await this.db
      .insert(ipfsBlock)
      .values([...rows.values()])
      .onConflictDoUpdate({
        target: ipfsBlock.cid,
        set: { bytes: sql`excluded.bytes`, pinned: sql`${ipfsBlock.pinned} or excluded.pinned` },
        setWhere: sql`${ipfsBlock.bytes} <> excluded.bytes or (excluded.pinned and not ${ipfsBlock.pinned})`,
      });
  }
}

async function concat(bytes: Bytes): Promise<Uint8Array> {
  if (bytes instanceof Uint8Array) return bytes;
  const chunks: Uint8Array[] = [];
  for await (const chunk of bytes) chunks.push(chunk);
  return Buffer.concat(chunks);
}
