import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { base36 } from "multiformats/bases/base36";
import { CID } from "multiformats/cid";
import { sha256 } from "multiformats/hashes/sha2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COPIED_MARKER } from "../../api/ipfs/copy-from-disk.ts";
import { cidOf, type IpfsNode, openIpfs, RAW } from "../../api/ipfs/node.ts";
import { openServiceIpfs } from "../../api/ipfs/open.ts";
import { PostgresBlockstore } from "../../api/ipfs/postgres-blockstore.ts";
import { openServiceStore, type ServiceStore } from "../../api/store/store.ts";
import { type DatabaseSlot, databaseSlot, testDatabase } from "../support/indexer.ts";
import { blockLocation, storedBlock } from "../support/ipfs-blocks.ts";

// The service's IPFS node as the API opens it for its database (api/ipfs/open.ts): on PGlite on
// disk in IPFS_DIR (one process); on Postgres in the service store, where every process serves and
// verifies what any of them pinned. Replicas serving it over HTTP: test/db/replicas.test.ts.
describe(`IPFS content in the service's store (${testDatabase})`, () => {
  let slot: DatabaseSlot;
  const ipfsDirectory = mkdtempSync(join(tmpdir(), "ipfs-store-"));
  const open: { store: ServiceStore; node: IpfsNode }[] = [];
  const small = new TextEncoder().encode('{"reportId":"REP-SHAREDSTOR","scores":{"reputation":71}}');
  // Over one 1 MiB chunk: a DAG (a dag-pb root over raw leaves), read through the UnixFS exporter.
  const large = new Uint8Array(2.5 * 1024 * 1024).map((_, i) => (i * 31) % 251);

  /** A service process's node: its own store connection (Postgres: its own pool), as `ponder serve` opens it. */
  const openProcess = async () => {
    const store = await openServiceStore(slot.store);
    const database =
      slot.store.kind === "postgres" ? slot.store : { kind: "pglite" as const, directory: slot.env.PGLITE_DIR! };
    const node = await openServiceIpfs({ database, ipfsDirectory }, Promise.resolve(store));
    open.push({ store, node });
    return node;
  };
  const closeAll = async () => {
    for (const { store, node } of open.splice(0)) {
      await node.close();
      await store.close();
    }
  };
  const bytesOf = async (node: IpfsNode, cid: string) => Buffer.from((await node.get(cid)) ?? []);

  beforeAll(async () => {
    slot = databaseSlot();
    await slot.prepare();
  });
  afterAll(async () => {
    await closeAll();
    await slot?.drop();
    rmSync(ipfsDirectory, { recursive: true, force: true });
  });

  it("content pinned by one process is served byte-identical by another, and by both after they restart", async () => {
    const a = await openProcess();
    const [smallCid, largeCid] = [await a.add(small), await a.add(large)];
    expect([smallCid, largeCid]).toEqual([await cidOf(small), await cidOf(large)]);
    expect(smallCid).toMatch(/^bafkrei/);
    // The same bytes again: the same CID, one pin.
    expect(await a.add(small)).toBe(smallCid);
    expect(await a.pinnedCount()).toBe(2);

    // Postgres: a second process beside the first. PGlite admits one process: the first, restarted.
    if (testDatabase === "pglite") await closeAll();
    const b = await openProcess();
    expect(await bytesOf(b, smallCid)).toEqual(Buffer.from(small));
    expect(await bytesOf(b, largeCid)).toEqual(Buffer.from(large));
    // Any spelling of the CID names the same content.
    expect(await bytesOf(b, CID.parse(smallCid).toString(base36))).toEqual(Buffer.from(small));
    expect(await b.get(await cidOf(new TextEncoder().encode("never pinned")))).toBeUndefined();

    await closeAll();
    const restarted = await openProcess();
    expect(await bytesOf(restarted, smallCid)).toEqual(Buffer.from(small));
    expect(await bytesOf(restarted, largeCid)).toEqual(Buffer.from(large));
    expect(await restarted.pinnedCount()).toBe(2);
  });

  it("a block whose stored bytes were changed is refused by every process, and served again once restored", async () => {
    const nodes = testDatabase === "postgres" ? [await openProcess(), await openProcess()] : [await openProcess()];
    const cid = await nodes[0]!.add(small);
    const largeCid = await nodes[0]!.add(large);
    const location = blockLocation(slot.store, ipfsDirectory);

    const block = (await storedBlock(location, '"reputation":71'))!;
    expect(block).toBeDefined();
    await block.overwrite(Buffer.from(block.bytes.toString().replace('"reputation":71', '"reputation":17')));
    for (const node of nodes) await expect(node.get(cid)).rejects.toThrow(/does not match its CID/);
    await block.overwrite(block.bytes);
    for (const node of nodes) expect(await bytesOf(node, cid)).toEqual(Buffer.from(small));

    // A leaf of the large file, one byte flipped (the leaves hold the content's bytes, in order).
    const leaf = (await storedBlock(location, large.subarray(0, 64)))!;
    expect(leaf).toBeDefined();
    const flipped = Buffer.from(leaf.bytes);
    flipped[1000] = flipped[1000]! ^ 1;
    await leaf.overwrite(flipped);
    for (const node of nodes) await expect(node.get(largeCid)).rejects.toThrow();
    await leaf.overwrite(leaf.bytes);
    for (const node of nodes) expect((await node.get(largeCid))!.length).toBe(large.length);
    await closeAll();
  });

  it.runIf(testDatabase === "postgres")(
    "on Postgres, what an older version pinned in IPFS_DIR is copied into the store once, checked against its CID",
    async () => {
      const older = join(ipfsDirectory, "older");
      const disk = await openIpfs(older);
      const kept = await disk.add(new TextEncoder().encode('{"reportId":"REP-BEFOREUPGR"}'));
      const forged = await disk.add(new TextEncoder().encode('{"reportId":"REP-FORGEDONDI"}'));
      await disk.close();
      const file = (await storedBlock({ kind: "fs", directory: older }, "REP-FORGEDONDI"))!;
      await file.overwrite(Buffer.from(file.bytes.toString().replace("FORGEDONDI", "FORGEDONDX")));

      const openFrom = async (directory: string) => {
        const store = await openServiceStore(slot.store);
        const node = await openServiceIpfs(
          { database: slot.store as { kind: "postgres"; connectionString: string }, ipfsDirectory: directory },
          Promise.resolve(store),
        );
        open.push({ store, node });
        return node;
      };
      const node = await openFrom(older);
      expect(Buffer.from((await node.get(kept))!).toString()).toBe('{"reportId":"REP-BEFOREUPGR"}');
      expect(await node.get(forged)).toBeUndefined();
      expect(existsSync(join(older, COPIED_MARKER))).toBe(true);

      // Once: content pinned there later (by an older replica still running) is not copied at a later start.
      await closeAll();
      const late = await openIpfs(older);
      const after = await late.add(new TextEncoder().encode("pinned on disk after the copy"));
      await late.close();
      expect(await (await openFrom(older)).get(after)).toBeUndefined();
      await closeAll();
    },
  );

  it.runIf(testDatabase === "postgres")(
    "on Postgres, pinning the same content again repairs a damaged block",
    async () => {
      const node = await openProcess();
      const cid = await node.add(small);
      const block = (await storedBlock(blockLocation(slot.store, ipfsDirectory), '"reputation":71'))!;
      await block.overwrite(Buffer.from("forged"));
      await expect(node.get(cid)).rejects.toThrow(/does not match its CID/);
      expect(await node.add(small)).toBe(cid);
      expect(await bytesOf(node, cid)).toEqual(Buffer.from(small));
      await closeAll();
    },
  );
});

// The blockstore itself, as Helia 7 uses it (interface-blockstore 7), against the real Postgres.
describe.runIf(testDatabase === "postgres")("PostgresBlockstore", () => {
  let slot: DatabaseSlot;
  let store: ServiceStore;
  let blocks: PostgresBlockstore;
  const block = async (text: string) => {
    const bytes = new TextEncoder().encode(text);
    return { cid: CID.createV1(RAW, await sha256.digest(bytes)), bytes };
  };
  const read = async (source: AsyncIterable<Uint8Array>) => {
    const chunks: Uint8Array[] = [];
    for await (const chunk of source) chunks.push(chunk);
    return Buffer.concat(chunks).toString();
  };
  const collect = async <T>(source: AsyncIterable<T>) => {
    const all: T[] = [];
    for await (const item of source) all.push(item);
    return all;
  };

  beforeAll(async () => {
    slot = databaseSlot("postgres");
    await slot.prepare();
    store = await openServiceStore(slot.store);
    blocks = new PostgresBlockstore(store.db);
  });
  afterAll(async () => {
    await store?.close();
    await slot?.drop();
  });

  it("puts, has, gets and deletes a block, its bytes given whole or in chunks", async () => {
    const a = await block("block a");
    expect(await blocks.has(a.cid)).toBe(false);
    await expect(read(blocks.get(a.cid))).rejects.toMatchObject({ name: "NotFoundError" });
    expect((await blocks.put(a.cid, a.bytes)).equals(a.cid)).toBe(true);
    expect(await blocks.has(a.cid)).toBe(true);
    expect(await read(blocks.get(a.cid))).toBe("block a");
    // Keyed by multihash: the same digest under another codec or version is the same block.
    expect(await blocks.has(CID.createV1(0x70, a.cid.multihash))).toBe(true);

    const b = await block("block b, in chunks");
    await blocks.put(
      b.cid,
      (async function* () {
        yield b.bytes.subarray(0, 5);
        yield b.bytes.subarray(5);
      })(),
    );
    expect(await read(blocks.get(b.cid))).toBe("block b, in chunks");

    await blocks.delete(a.cid);
    expect(await blocks.has(a.cid)).toBe(false);
    await blocks.delete(a.cid); // deleting what is not there is no error
  });

  it("puts, gets and deletes many, and lists every block page by page", async () => {
    const many = await Promise.all(Array.from({ length: 40 }, (_, i) => block(`block ${i}`)));
    expect((await collect(blocks.putMany(many))).length).toBe(40);
    const got = await collect(blocks.getMany(many.map((m) => m.cid)));
    expect(await Promise.all(got.map((g) => read(g.bytes)))).toEqual(many.map((_, i) => `block ${i}`));

    const all = await collect(blocks.getAll());
    const listed = new Map(await Promise.all(all.map(async (p) => [p.cid.toString(), await read(p.bytes)] as const)));
    for (const [i, m] of many.entries()) expect(listed.get(m.cid.toString())).toBe(`block ${i}`);

    expect((await collect(blocks.deleteMany(many.slice(0, 20).map((m) => m.cid)))).length).toBe(20);
    expect(await Promise.all(many.map((m) => blocks.has(m.cid)))).toEqual(many.map((_, i) => i >= 20));
  });

  it("pins a root with its blocks in one write; a block put alone is not pinned", async () => {
    const root = await block("a root");
    const child = await block("its child");
    const loose = await block("a block put alone");
    await blocks.put(loose.cid, loose.bytes);
    const before = await blocks.pinnedCount();
    await blocks.putPinned([child, root], root.cid);
    expect(Buffer.from((await blocks.getPinned(root.cid))!).toString()).toBe("a root");
    expect(await blocks.getPinned(child.cid)).toBeUndefined();
    expect(await blocks.getPinned(loose.cid)).toBeUndefined();
    expect(await blocks.pinnedCount()).toBe(before + 1);
    // Put again unpinned, the root stays pinned.
    await blocks.put(root.cid, root.bytes);
    expect(await blocks.getPinned(root.cid)).toBeDefined();
  });

  it("stops when its caller aborts", async () => {
    const a = await block("not written");
    await expect(blocks.put(a.cid, a.bytes, { signal: AbortSignal.abort() })).rejects.toThrow();
    expect(await blocks.has(a.cid)).toBe(false);
  });
});
