import type { DevnetOptions } from "../../devnet/devnet.ts";
import { startTestDevnet, type TestDevnet } from "./devnet.ts";
import { type DatabaseSlot, databaseSlot, type Indexer, startIndexer } from "./indexer.ts";

export type IndexedDevnet = {
  devnet: TestDevnet;
  slot: DatabaseSlot;
  /** Starts the indexer on this devnet and database (once), with extra env for its mode. */
  index: (env?: Record<string, string>) => Promise<Indexer>;
  /** Indexer stopped, database dropped, anvil stopped: call from afterAll. */
  stop: () => Promise<void>;
};

/** A seeded devnet with a database of its own (the vitest project's kind) for one test file. */
export async function indexedDevnet(options: DevnetOptions): Promise<IndexedDevnet> {
  const devnet = await startTestDevnet(options);
  const slot = databaseSlot();
  await slot.prepare();
  let indexer: Indexer | undefined;
  return {
    devnet,
    slot,
    index: async (env = {}) =>
      (indexer ??= await startIndexer({ DEVNET_MANIFEST: devnet.manifestPath, ...slot.env, ...env })),
    stop: async () => {
      await indexer?.stop();
      await slot.drop();
      await devnet.stop();
    },
  };
}
