import { createConfig } from "ponder";
import { devStablecoinAbi } from "./abis/DevStablecoin.ts";
import { reputationReporterAbi } from "./abis/ReputationReporter.ts";
import { sanctionsListAbi } from "./abis/SanctionsList.ts";
import { SANCTIONS_ORACLE } from "./config/celo.ts";
import { resolveIndexTarget } from "./config/target.ts";

// Live Celo when PONDER_RPC_URL_42220 is set, the local devnet (from its manifest) otherwise.
const target = resolveIndexTarget();
const tokens = target.tokens.map((t) => t.address);
const tracked = target.tracked ? [...target.tracked] : null;

// The devnet's token ABI is a superset of Celo USDT/USDC's: the Transfer event and EIP-3009's
// AuthorizationUsed / AuthorizationCanceled (src/Stablecoin.ts indexes all three) are identical.
const stablecoin = { chain: "celo", abi: devStablecoinAbi, address: tokens, startBlock: target.startBlock } as const;

export default createConfig({
  database:
    target.database.kind === "postgres"
      ? { kind: "postgres", connectionString: target.database.connectionString }
      : { kind: "pglite", directory: target.database.directory },
  chains: {
    celo: {
      id: 42220,
      rpc: target.rpcUrls,
      pollingInterval: target.pollingIntervalMs,
      // Ponder's RPC cache (ponder_sync) is on for the devnet too. A devnet is reset at will under
      // Celo's chain id, but its index lives in a database of its own that the launchers drop,
      // cache included, before every start (scripts/devnet-data.ts): an indexer started again
      // (a crash, a deploy) reuses what it fetched of the same chain instead of fetching it again.
    },
  },
  contracts: {
    // Tracked mode: one entry per side, because Ponder keeps only one filter per event and entry.
    // src/Stablecoin.ts skips the inbound copy of a transfer whose sender is tracked too.
    Stablecoin: tracked ? { ...stablecoin, filter: { event: "Transfer", args: { from: tracked } } } : stablecoin,
    ...(tracked ? { StablecoinInbound: { ...stablecoin, filter: { event: "Transfer", args: { to: tracked } } } } : {}),
    ReputationReporter: {
      chain: "celo",
      abi: reputationReporterAbi,
      address: target.reporters,
      // The earlier of CELO_START_BLOCK and our reporter's deployment block: every passport of ours is indexed (config/target.ts).
      startBlock: target.reporterStartBlock,
    },
    // Always an entry (src/SanctionsList.ts handles its events): with no known creation block, from
    // startBlock, and the API calls its listings inconclusive (target.sanctions is null).
    SanctionsList: {
      chain: "celo",
      abi: sanctionsListAbi,
      address: target.sanctions?.address ?? SANCTIONS_ORACLE,
      startBlock: target.sanctions?.startBlock ?? target.startBlock,
    },
  },
});
