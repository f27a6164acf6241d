import { createConfig } from "ponder";
import { devStablecoinAbi } from "../../abis/DevStablecoin.ts";
import { resolveIndexTarget } from "../../config/target.ts";

// The benchmark's baseline: the smallest useful ERC-20 indexer, on the same chain and RPC setup.
const target = resolveIndexTarget();

export default createConfig({
  database:
    target.database.kind === "postgres"
      ? { kind: "postgres", connectionString: target.database.connectionString }
      : { kind: "pglite", directory: target.database.directory },
  chains: { celo: { id: 42220, rpc: target.rpcUrls, disableCache: true } },
  contracts: {
    Stablecoin: {
      chain: "celo",
      abi: devStablecoinAbi,
      address: target.tokens.map((t) => t.address),
      startBlock: target.startBlock,
    },
  },
});
