import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { cidOf, openIpfs, parseCid } from "../api/ipfs/node.ts";
import { openedOnUse } from "../api/ipfs/open.ts";

// The service's IPFS node: offline, persistent, and it serves only bytes that hash to their CID.
describe("IPFS node", () => {
  const directory = mkdtempSync(join(tmpdir(), "ipfs-"));
  afterAll(() => rmSync(directory, { recursive: true, force: true }));

  it("pins content under a CID that depends on the bytes alone, and keeps it across restarts", async () => {
    const small = new TextEncoder().encode('{"reportId":"REP-ABCDEFGHIJ"}');
    // Over one 1 MiB chunk: a DAG of several blocks, still one CID for the same bytes.
    const large = new Uint8Array(2.5 * 1024 * 1024).map((_, i) => (i * 31) % 251);
    const node = await openIpfs(directory);
    const [a, b] = [await node.add(small), await node.add(large)];
    expect(a).toBe(await cidOf(small));
    expect(b).toBe(await cidOf(large));
    expect(a).toMatch(/^bafkrei/); // raw leaf, CIDv1
    expect(await node.add(small)).toBe(a);
    expect(await node.pinnedCount()).toBe(2);
    await node.close();

    const reopened = await openIpfs(directory);
    expect(Buffer.from((await reopened.get(a))!)).toEqual(Buffer.from(small));
    expect(Buffer.from((await reopened.get(b))!)).toEqual(Buffer.from(large));
    expect(await reopened.get(await cidOf(new TextEncoder().encode("never added")))).toBeUndefined();
    expect(parseCid("not-a-cid")).toBeUndefined();
    await reopened.close();
  });

  it("opens the service's node on its first use, once for concurrent uses, and again after a failed opening", async () => {
    const dir = join(directory, "on-use");
    // A file where the node's directory should be: its opening fails until the file is gone.
    writeFileSync(dir, "not a directory");
    let opens = 0;
    const node = openedOnUse(() => {
      opens++;
      return openIpfs(dir);
    });
    expect(opens, "nothing opened before a use").toBe(0);
    const bytes = new TextEncoder().encode("a statement");
    await expect(node.add(bytes)).rejects.toThrow();
    rmSync(dir);
    const [cid, count] = await Promise.all([node.add(bytes), node.pinnedCount()]);
    expect(opens).toBe(2);
    expect(cid).toBe(await cidOf(bytes));
    expect(count).toBeLessThanOrEqual(1);
    expect(Buffer.from((await node.get(cid))!)).toEqual(Buffer.from(bytes));
    await node.close();
  });

  it("refuses to serve a block whose bytes were changed on disk", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ipfs-tamper-"));
    try {
      const node = await openIpfs(dir);
      const cid = await node.add(new TextEncoder().encode("the original statement"));
      await node.close();
      const blocks = join(dir, "blocks");
      const files = readdirSync(blocks, { recursive: true, withFileTypes: true }).filter((f) => f.isFile());
      for (const f of files) writeFileSync(join(f.parentPath, f.name), "the forged statement!!");
      const reopened = await openIpfs(dir);
      await expect(reopened.get(cid)).rejects.toThrow();
      await reopened.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("never serves a block changed after it was served (same size, same mtime), even one it keeps verified in memory, and serves it again once restored", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ipfs-retamper-"));
    try {
      const node = await openIpfs(dir);
      const original = '{"reportId":"REP-ABCDEFGHIJ","scores":{"reputation":71}}';
      const small = await node.add(new TextEncoder().encode(original));
      // Over one chunk: a UnixFS DAG (dag-pb root), read through the exporter rather than as one raw block.
      const large = await node.add(new Uint8Array(1.5 * 1024 * 1024).map((_, i) => (i * 7) % 253));
      expect(Buffer.from((await node.get(small))!).toString()).toBe(original);
      expect((await node.get(large))!.length).toBe(1.5 * 1024 * 1024);

      const files = readdirSync(join(dir, "blocks"), { recursive: true, withFileTypes: true })
        .filter((f) => f.isFile())
        .map((f) => join(f.parentPath, f.name));
      const forge = (file: string, change: (bytes: Buffer) => Buffer) => {
        const before = readFileSync(file);
        const { mtimeNs } = statSync(file, { bigint: true });
        const forged = change(Buffer.from(before));
        expect(forged.length).toBe(before.length);
        writeFileSync(file, forged);
        // Size and mtime as they were, to the nanosecond (utimes would round it): only the bytes, and the ctime, tell.
        execFileSync("touch", [
          "-m",
          "-d",
          `@${mtimeNs / 1_000_000_000n}.${String(mtimeNs % 1_000_000_000n).padStart(9, "0")}`,
          file,
        ]);
        expect(statSync(file, { bigint: true }).mtimeNs).toBe(mtimeNs);
        return () => writeFileSync(file, before);
      };
      const smallFile = files.find((f) => readFileSync(f).toString() === original)!;
      const restoreSmall = forge(smallFile, (b) =>
        Buffer.from(b.toString().replace('"reputation":71', '"reputation":17')),
      );
      await expect(node.get(small)).rejects.toThrow(/does not match its CID/);
      restoreSmall();
      expect(Buffer.from((await node.get(small))!).toString()).toBe(original);
      // Unchanged for a while, its verified bytes are kept and served from memory; a write still shows (its ctime moves).
      await new Promise((r) => setTimeout(r, 2_100));
      expect(Buffer.from((await node.get(small))!).toString()).toBe(original);
      const restoreAgain = forge(smallFile, (b) =>
        Buffer.from(b.toString().replace('"reputation":71', '"reputation":17')),
      );
      await expect(node.get(small)).rejects.toThrow(/does not match its CID/);
      restoreAgain();

      // A leaf of the large file (the biggest block), one byte flipped.
      const leaf = files.reduce((a, b) => (statSync(a).size >= statSync(b).size ? a : b));
      const restoreLeaf = forge(leaf, (b) => ((b[1000] = b[1000]! ^ 1), b));
      await expect(node.get(large)).rejects.toThrow();
      restoreLeaf();
      expect((await node.get(large))!.length).toBe(1.5 * 1024 * 1024);
      await node.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
