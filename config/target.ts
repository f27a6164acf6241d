import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { type Address, addressSchema } from "./addresses.ts";
import {
  CELO_DEFAULT_START_BLOCK,
  CELO_ONCHAIN_REPORTER,
  CELO_TOKENS,
  SANCTIONS_ORACLE,
  type TokenInfo,
} from "./celo.ts";
import { type Env, readEnv } from "./env.ts";
import { collectProblems, StartupError } from "./errors.ts";
import { readManifest } from "./manifest.ts";

/** What the indexer follows and where it keeps it: live Celo or the local devnet. */
export type IndexTarget = {
  network: "celo" | "devnet";
  rpcUrls: string[];
  tokens: TokenInfo[];
  reporters: Address[];
  startBlock: number;
  /**
   * Where the reporters are indexed from (one Ponder contract entry, so one block for all): the
   * earlier of startBlock and our reporter's deployment block (REPORTER_START_BLOCK), so every
   * passport ours published is indexed even when CELO_START_BLOCK is later. The original
   * OnchainReporter is then indexed from there too: a few more passports, never fewer.
   */
  reporterStartBlock: number;
  /**
   * The sanctions oracle whose listings are indexed (from its creation block), or null when no
   * listing can be trusted to be complete: a devnet without one, live Celo before its creation
   * block is known. The oracle's address is indexed either way (one Ponder build); the sanctions
   * signal says "inconclusive" while this is null.
   */
  sanctions: { address: Address; startBlock: number } | null;
  /** Lowercase wallets to index in tracked mode; null indexes every transfer of the tokens. */
  tracked: ReadonlySet<Address> | null;
  database: { kind: "pglite"; directory: string } | { kind: "postgres"; connectionString: string };
  schema: string;
  pollingIntervalMs: number;
  /** PGlite: where the service's IPFS node keeps its blocks and pins. Postgres: only read once, for content an older version pinned there (api/ipfs/copy-from-disk.ts). */
  ipfsDirectory: string;
};

/**
 * Ponder rate-limits each RPC URL string on its own; a local node answers far faster than that
 * limit, so the devnet is reached through several spellings of the same URL.
 */
const DEVNET_RPC_FANOUT = 10;

/** Schema of devnet data (in the devnet's own database or PGlite directory). */
const DEVNET_SCHEMA = "devnet";

/**
 * Where devnet data goes when DATABASE_URL names a Postgres database: a database of its own beside
 * it, `<name>_devnet`. Ponder keeps its RPC cache per database (schema ponder_sync) keyed by chain
 * id, and the devnet shares Celo's chain id, so devnet blocks must never sit where live ones do.
 */
export function devnetDatabaseUrl(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  url.pathname = `/${decodeURIComponent(url.pathname.slice(1)) || "postgres"}_devnet`;
  return url.toString();
}

/** What to index and where, or a StartupError listing every problem found (the manifest, each tracked wallet). */
export function resolveIndexTarget(env: Env = readEnv()): IndexTarget {
  const { target, problems } = checkIndexTarget(env);
  if (!target || problems.length) throw new StartupError(problems);
  return target;
}

/** Where the indexed data goes for `network`: the database, its schema and the IPFS directory beside it. */
export function resolveStorage(
  env: Env,
  network: IndexTarget["network"],
): Pick<IndexTarget, "database" | "schema" | "ipfsDirectory"> {
  const database: IndexTarget["database"] = env.DATABASE_URL
    ? {
        kind: "postgres",
        connectionString: network === "celo" ? env.DATABASE_URL : devnetDatabaseUrl(env.DATABASE_URL),
      }
    : { kind: "pglite", directory: resolve(env.PGLITE_DIR ?? `.ponder/${network}/pglite`) };
  const ipfsDirectory = resolve(
    env.IPFS_DIR ??
      (database.kind === "pglite"
        ? `${database.directory}-ipfs`
        : `.ponder/${network}/ipfs-${decodeURIComponent(new URL(database.connectionString).pathname.slice(1)) || "postgres"}`),
  );
  return {
    database,
    schema: env.DATABASE_SCHEMA ?? (network === "celo" ? "reputation" : DEVNET_SCHEMA),
    ipfsDirectory,
  };
}

/**
 * The target with every problem found, for checks that go on past them: tracked-wallet problems
 * leave the target usable for chain checks (with no tracked wallets); a devnet without a readable
 * manifest leaves none.
 */
export function checkIndexTarget(env: Env): { target: IndexTarget | undefined; problems: string[] } {
  const problems: string[] = [];
  const network = env.PONDER_RPC_URL_42220 ? "celo" : "devnet";
  const common = {
    ...resolveStorage(env, network),
    tracked: readTrackedWallets(env, problems),
    pollingIntervalMs: env.POLLING_INTERVAL_MS,
  };

  if (env.PONDER_RPC_URL_42220) {
    const reporters = [env.ONCHAIN_REPORTER_ADDRESS ?? CELO_ONCHAIN_REPORTER];
    if (env.REPORTER_ADDRESS) reporters.push(env.REPORTER_ADDRESS);
    const startBlock = env.CELO_START_BLOCK ?? CELO_DEFAULT_START_BLOCK;
    const target: IndexTarget = {
      network: "celo",
      rpcUrls: env.PONDER_RPC_URL_42220,
      tokens: [CELO_TOKENS.USDT, CELO_TOKENS.USDC],
      reporters,
      startBlock,
      reporterStartBlock:
        env.REPORTER_ADDRESS && env.REPORTER_START_BLOCK !== undefined
          ? Math.min(startBlock, env.REPORTER_START_BLOCK)
          : startBlock,
      sanctions:
        env.SANCTIONS_START_BLOCK === undefined
          ? null
          : { address: SANCTIONS_ORACLE, startBlock: env.SANCTIONS_START_BLOCK },
      ...common,
    };
    return { target, problems };
  }

  const manifest = collectProblems(problems, () => readManifest(env.DEVNET_MANIFEST));
  if (!manifest) return { target: undefined, problems };
  const base = new URL(manifest.rpcUrl);
  const rpcUrls = Array.from({ length: DEVNET_RPC_FANOUT }, (_, i) => {
    const url = new URL(base);
    url.searchParams.set("r", String(i + 1));
    return url.toString();
  });
  const target: IndexTarget = {
    network: "devnet",
    rpcUrls,
    tokens: [
      { ...manifest.tokens.USDT, symbol: "USDT" },
      { ...manifest.tokens.USDC, symbol: "USDC" },
    ],
    // Ours last, as on Celo; an OnchainReporter-shaped contract first when one is named (tests).
    reporters: [...(env.ONCHAIN_REPORTER_ADDRESS ? [env.ONCHAIN_REPORTER_ADDRESS] : []), manifest.reporter.address],
    startBlock: manifest.startBlock,
    reporterStartBlock: manifest.startBlock,
    // Placed at its Celo address before the first block with contracts (devnet/deploy.ts).
    sanctions: manifest.sanctions ? { address: manifest.sanctions.address, startBlock: manifest.startBlock } : null,
    ...common,
  };
  return { target, problems };
}

/** The tracked wallets (null: every transfer); each problem goes to `problems`, and all of them are found. */
export function readTrackedWallets(env: Env, problems: string[]): ReadonlySet<Address> | null {
  if (env.INDEX_MODE === "all") return null;
  const listed = [...(env.TRACKED_WALLETS ?? [])];
  const file = env.TRACKED_WALLETS_FILE;
  const fileMissing = file !== undefined && !existsSync(file);
  if (fileMissing) problems.push(`TRACKED_WALLETS_FILE ${file} does not exist.`);
  else if (file) {
    for (const line of readFileSync(file, "utf8").split("\n")) {
      const entry = line.replace(/#.*/, "").trim();
      if (entry) listed.push(entry);
    }
  }
  if (listed.length === 0 && !fileMissing)
    problems.push("INDEX_MODE=tracked needs wallets: set TRACKED_WALLETS (comma separated) or TRACKED_WALLETS_FILE.");
  const wallets = new Set<Address>();
  for (const entry of listed) {
    const parsed = addressSchema.safeParse(entry);
    if (parsed.success) wallets.add(parsed.data);
    else problems.push(`Tracked wallet "${entry}" is not an address: it ${parsed.error.issues[0]!.message}.`);
  }
  return wallets;
}
