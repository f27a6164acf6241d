import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { cidOf, openIpfs, parseCid } from "../api/ipfs/node.ts";

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
});
