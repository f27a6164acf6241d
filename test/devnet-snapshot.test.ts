import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Hex } from "viem";
import { afterAll, expect, it } from "vitest";
import { rpc } from "../devnet/rpc.ts";
import { startTestDevnet, type TestDevnet } from "../harness/devnet.ts";

// The suite seeds a devnet once per settings and run, and restores it for every other file that
// asks for the same (harness/devnet.ts): a restored devnet must be the seeded chain itself.
const snapshots = mkdtempSync(join(tmpdir(), "snapshots-"));
const devnets: TestDevnet[] = [];
afterAll(async () => {
  for (const devnet of devnets) await devnet.stop();
  rmSync(snapshots, { recursive: true, force: true });
});

type Block = { number: Hex; hash: Hex; timestamp: Hex };
const head = (url: string) => rpc<Block>(url, "eth_getBlockByNumber", ["latest", false]);
const logs = (url: string) => rpc<unknown[]>(url, "eth_getLogs", [{ fromBlock: "0x0", toBlock: "latest" }]);

it("restores a devnet of the same settings as the chain that was seeded, on an anvil of its own", async () => {
  const settings = { wallets: 2, months: 1, slotHours: 24 * 7, seed: 5 };
  // Asked for twice at once: one seeds, the other waits for its snapshot.
  const [a, b] = await Promise.all([
    startTestDevnet(settings, { snapshots }),
    startTestDevnet(settings, { snapshots }),
  ]);
  devnets.push(a, b);
  expect(readdirSync(snapshots)).toHaveLength(1);
  expect(a.manifest.rpcUrl).not.toBe(b.manifest.rpcUrl);
  expect(JSON.parse(readFileSync(b.manifestPath, "utf8")).rpcUrl).toBe(b.manifest.rpcUrl);
  expect({ ...b.manifest, rpcUrl: "" }).toEqual({ ...a.manifest, rpcUrl: "" });
  // The same blocks (hashes), and every log, as eth_getLogs gives them on each chain.
  expect(await head(b.manifest.rpcUrl)).toEqual(await head(a.manifest.rpcUrl));
  const seeded = await logs(a.manifest.rpcUrl);
  expect(seeded.length).toBeGreaterThan(0);
  expect(await logs(b.manifest.rpcUrl)).toEqual(seeded);

  // Two chains from there on: a block mined on one is not on the other.
  await rpc(b.manifest.rpcUrl, "evm_mine");
  expect(Number((await head(b.manifest.rpcUrl)).number)).toBe(b.manifest.headBlock + 1);
  expect(Number((await head(a.manifest.rpcUrl)).number)).toBe(a.manifest.headBlock);

  // Other settings are another devnet.
  const other = await startTestDevnet({ ...settings, seed: 6 }, { snapshots });
  devnets.push(other);
  expect(readdirSync(snapshots)).toHaveLength(2);
  expect(other.manifest.personas).not.toEqual(a.manifest.personas);
});
