import { parseUnits } from "viem";
import { z } from "zod";
import { addressSchema } from "./addresses.ts";
import { loadProcessEnvFiles } from "./env-files.ts";
import { StartupError } from "./errors.ts";

const csv = z.string().transform((value) => value.split(/[\s,]+/).filter(Boolean));

/** A USD amount ("0.05"), read as micro-USD (6 decimals, the stablecoins' smallest unit). */
const usdAmount = z
  .string()
  .regex(/^\d+(\.\d{1,6})?$/, "must be a USD amount such as 0.05")
  .transform((value) => parseUnits(value, 6));

const blankAsUndefined = (value: unknown) => (typeof value === "string" && value.trim() === "" ? undefined : value);

const privateKey = z.string().regex(/^0x[0-9a-fA-F]{64}$/, "must be a 32-byte hex private key");

/**
 * Every environment variable the service reads, in one place (the README table is written from
 * this). Unset means the embedded default: a local devnet indexed into PGlite.
 */
export const envSchema = z.object({
  /** "read": the launchers, Ponder and every script also read `.env.local` and `.env` (the environment wins over both, `.env.local` over `.env`). "ignore": the environment alone (the test suite sets it). Only the environment itself can set it. */
  ENV_FILES: z.preprocess(blankAsUndefined, z.enum(["read", "ignore"]).default("read")),
  /** Live Celo JSON-RPC URL(s), comma separated. Unset: run on the local devnet. */
  PONDER_RPC_URL_42220: z.preprocess(blankAsUndefined, csv.pipe(z.array(z.url()).min(1)).optional()),
  /** First block indexed on live Celo. */
  CELO_START_BLOCK: z.preprocess(blankAsUndefined, z.coerce.number().int().nonnegative().optional()),
  /** The block the sanctions oracle (Chainalysis SanctionsList, 0x40C57923924B5c5c5455c48D93317139ADDaC8fb) was created in on live Celo: its listings are indexed from there. Unset: indexed from CELO_START_BLOCK, and a wallet not seen listed is "inconclusive", never "not listed" (a block explorer shows the creation block). */
  SANCTIONS_START_BLOCK: z.preprocess(blankAsUndefined, z.coerce.number().int().nonnegative().optional()),
  /** Our own reporter contract on live Celo, indexed beside the original OnchainReporter. */
  REPORTER_ADDRESS: z.preprocess(blankAsUndefined, addressSchema.optional()),
  /** The block our reporter was deployed in (`npm run reporter:deploy` prints it). Our reporter is indexed from there even when CELO_START_BLOCK is later, so every passport it published is indexed. */
  REPORTER_START_BLOCK: z.preprocess(blankAsUndefined, z.coerce.number().int().nonnegative().optional()),
  /** The key that publishes passports through our reporter on Celo (it must hold the reporter role; needs CELO for gas). Devnet default: anvil dev account #3. */
  REPORTER_PRIVATE_KEY: z.preprocess(blankAsUndefined, privateKey.optional()),
  /** `npm run reporter:deploy` only: the key that deploys our reporter and becomes its admin (grants and revokes the reporter role); it pays the deployment in CELO. The service never uses it. Devnet default: anvil dev account #0. */
  REPORTER_DEPLOYER_PRIVATE_KEY: z.preprocess(blankAsUndefined, privateKey.optional()),
  /** The original OnchainReporter indexed beside ours. Default on Celo: 0xE7621aF5dE3806ba26115bdC89190c65ed835C21; unset on the devnet (a test may deploy one). */
  ONCHAIN_REPORTER_ADDRESS: z.preprocess(blankAsUndefined, addressSchema.optional()),
  /** GET /api/agent/verify/{id} (page and badge included): requests per minute per client. */
  VERIFY_RATE_LIMIT_PER_MINUTE: z.preprocess(blankAsUndefined, z.coerce.number().int().min(1).max(100_000).default(60)),
  /** Free routes (GET /api/stats, /api/x402/config, /api/health/integrations, /openapi.json, /docs): requests per minute per client, shared across them. */
  FREE_RATE_LIMIT_PER_MINUTE: z.preprocess(
    blankAsUndefined,
    z.coerce.number().int().min(1).max(1_000_000).default(120),
  ),
  /** Sign-in-with-x: the public origin clients sign in to (CAIP-122 domain and URI), e.g. https://api.example.com; never taken from a request's Host. Required on live Celo; devnet default http://127.0.0.1:<PORT>. */
  SIGN_IN_ORIGIN: z.preprocess(
    blankAsUndefined,
    z
      .url()
      .refine(
        (v) => /^https?:$/.test(new URL(v).protocol) && new URL(v).pathname === "/" && !new URL(v).search,
        "an http(s) origin, with no path or query",
      )
      .optional(),
  ),
  /** Sign-in-with-x: free analyses of one's own wallet, per wallet per hour (a token bucket); then 429 `rate_limited`. */
  SIGN_IN_OWN_ANALYSES_PER_HOUR: z.preprocess(
    blankAsUndefined,
    z.coerce.number().int().min(1).max(100_000).default(20),
  ),
  /** Monitors' webhook endpoints: "on" lets them point at loopback, private and link-local addresses (the SSRF guard refuses them otherwise). Default: on for the devnet, off on live Celo. */
  MONITOR_ALLOW_PRIVATE_ENDPOINTS: z.preprocess(blankAsUndefined, z.enum(["on", "off"]).optional()),
  /** Monitors: most active (paid, not deleted) monitored wallets per owner; past it 409 `monitor_limit`, nothing charged. */
  MONITOR_MAX_WALLETS_PER_OWNER: z.preprocess(
    blankAsUndefined,
    z.coerce.number().int().min(1).max(1_000_000).default(1000),
  ),
  /** The API's JSON log level (pino): fatal, error, warn, info, debug, trace or silent. */
  LOG_LEVEL: z.preprocess(
    blankAsUndefined,
    z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  ),
  /** Postgres connection string. Unset: PGlite in PGLITE_DIR. */
  DATABASE_URL: z.preprocess(blankAsUndefined, z.string().optional()),
  /** Schema the indexer writes its tables to. Default: "reputation" on Celo, "devnet" on the devnet. */
  DATABASE_SCHEMA: z.preprocess(
    blankAsUndefined,
    z
      .string()
      .regex(/^[a-z_][a-z0-9_]{0,44}$/, "lowercase letters, digits and _ (max 45)")
      .optional(),
  ),
  /** PGlite directory. Default: .ponder/<network>/pglite, so devnet and live data never mix. */
  PGLITE_DIR: z.preprocess(blankAsUndefined, z.string().optional()),
  /** PGlite: the service's IPFS blockstore and datastore (passports, statements; on Postgres they are in the service store). Default: beside the database, `<PGLITE_DIR>-ipfs` or `.ponder/<network>/ipfs-<database>`. */
  IPFS_DIR: z.preprocess(blankAsUndefined, z.string().optional()),
  /** "all": every transfer of the tokens. "tracked": only transfers of TRACKED_WALLETS(_FILE). */
  INDEX_MODE: z.preprocess(blankAsUndefined, z.enum(["all", "tracked"]).default("all")),
  TRACKED_WALLETS: z.preprocess(blankAsUndefined, csv.optional()),
  /** File with one wallet address per line ("#" starts a comment). */
  TRACKED_WALLETS_FILE: z.preprocess(blankAsUndefined, z.string().optional()),
  /** Devnet manifest written by `npm run devnet`. */
  DEVNET_MANIFEST: z.preprocess(blankAsUndefined, z.string().default(".devnet/manifest.json")),
  /** `npm start`: preferred anvil port (a free one is used if it is taken), background wallets, months of history. */
  DEVNET_PORT: z.preprocess(blankAsUndefined, z.coerce.number().int().min(0).max(65535).default(8545)),
  DEVNET_WALLETS: z.preprocess(blankAsUndefined, z.coerce.number().int().min(0).default(300)),
  DEVNET_MONTHS: z.preprocess(blankAsUndefined, z.coerce.number().int().min(2).max(36).default(15)),
  /** Paid routes answer only when the indexed block is at most this many blocks behind the chain head (and the backfill is done); otherwise 503 `index_not_current`. */
  MAX_LAG_BLOCKS: z.preprocess(blankAsUndefined, z.coerce.number().int().min(0).max(100_000).default(10)),
  /** How often the indexer polls for new blocks. */
  POLLING_INTERVAL_MS: z.preprocess(blankAsUndefined, z.coerce.number().int().min(100).default(1000)),
  /** x402: the treasury payments are made out to (publicPayTo). Devnet default: anvil dev account #5. */
  X402_PAY_TO: z.preprocess(blankAsUndefined, addressSchema.optional()),
  /** x402 self-settlement: the key that submits transferWithAuthorization (needs CELO for gas). Devnet default: anvil dev account #4. */
  X402_RELAYER_PRIVATE_KEY: z.preprocess(blankAsUndefined, privateKey.optional()),
  /** x402: settle through this remote facilitator (POST /verify, /settle) instead of the relayer key. */
  X402_FACILITATOR_URL: z.preprocess(blankAsUndefined, z.url().optional()),
  /** x402: "before" settles each payment, then answers (the x402 convention); "deferred" answers once the payment is verified and claimed, and a worker settles it (docs/payments.md). */
  X402_SETTLEMENT: z.preprocess(blankAsUndefined, z.enum(["before", "deferred"]).default("before")),
  /**
   * x402: whether this process runs a settlement worker on the shared queue of deferred payments.
   * "off" leaves the queue to the processes that run one (at least one on the database must), and
   * signals them what it queues (api/payments/queue-signal.ts): the settlements' work (signing,
   * RPC, receipts) then stays off the process that answers.
   */
  X402_SETTLEMENT_WORKER: z.preprocess(blankAsUndefined, z.enum(["on", "off"]).default("on")),
  /**
   * x402 deferred mode: most unsettled value per payer, in USD; past it, that payer's call settles first.
   * A payer's unsettled value is its rate times the time a deferred answer takes to settle (0.8 s p50,
   * 1.4 s p99 with 1 s blocks): 25 calls keep a payer calling up to about 15 a second deferred.
   */
  X402_DEFERRED_MAX_PER_PAYER: z.preprocess(blankAsUndefined, usdAmount.default(parseUnits("0.25", 6))),
  /** x402 deferred mode: most unsettled value across all payers, in USD (the most the service can lose at once); past it, calls settle first. */
  X402_DEFERRED_MAX_TOTAL: z.preprocess(blankAsUndefined, usdAmount.default(parseUnits("20", 6))),
  /** Prepaid credit: the most one purchase (POST /api/credit) may buy, in USD; the least is 0.10. */
  CREDIT_MAX_USD: z.preprocess(blankAsUndefined, usdAmount.default(parseUnits("50", 6))),
  /** Chat model mode: an OpenAI-compatible chat-completions endpoint (base URL, e.g. http://127.0.0.1:11434/v1). Unset: the deterministic engine answers. */
  CHAT_MODEL_URL: z.preprocess(blankAsUndefined, z.url().optional()),
  /** Chat model mode: the model name sent to CHAT_MODEL_URL. */
  CHAT_MODEL: z.preprocess(blankAsUndefined, z.string().optional()),
  /** Chat model mode: bearer token for CHAT_MODEL_URL (sent to it only, never to the model's context). */
  CHAT_MODEL_API_KEY: z.preprocess(blankAsUndefined, z.string().optional()),
  /** Chat model mode: how long the whole model exchange may take before the deterministic engine answers. */
  CHAT_MODEL_TIMEOUT_MS: z.preprocess(blankAsUndefined, z.coerce.number().int().min(100).max(60_000).default(8000)),
  /** Statements: also pin them to this remote IPFS Pinning Service API endpoint (POST {url}/pins). Unset: local pins only. */
  PINNING_SERVICE_URL: z.preprocess(blankAsUndefined, z.url().optional()),
  /** Bearer token for PINNING_SERVICE_URL. */
  PINNING_SERVICE_TOKEN: z.preprocess(blankAsUndefined, z.string().optional()),
  /** Statements: "on" renders a made-up statement a second after start (about a CPU-second), so that the first real one is not made cold; "off" skips it (the test suite, where most processes never make one). */
  STATEMENT_WARMUP: z.preprocess(blankAsUndefined, z.enum(["on", "off"]).default("on")),
  /** Port of the HTTP API. */
  PORT: z.preprocess(blankAsUndefined, z.coerce.number().int().min(0).max(65535).default(42069)),
  /** Address the public API binds to. Unset: Ponder's default, every interface ("0.0.0.0" or "::"). */
  HOST: z.preprocess(blankAsUndefined, z.string().optional()),
  /** Port of the data listener (GraphQL /graphql, SQL over HTTP /sql, Prometheus /metrics); 0 takes a free port. */
  DATA_PORT: z.preprocess(blankAsUndefined, z.coerce.number().int().min(0).max(65535).default(42070)),
  /** Whether this process opens the data listener: "on" or "off". Unset: the indexer (ponder start, dev) does, a replica (ponder serve) does not, so that replicas on one host do not all claim DATA_PORT. */
  DATA_LISTENER: z.preprocess(blankAsUndefined, z.enum(["on", "off"]).optional()),
  /** Address the data listener binds to: keep it private (docs/data.md). */
  DATA_HOST: z.preprocess(blankAsUndefined, z.string().default("127.0.0.1")),
  /** Data listener, SQL over HTTP: statement timeout of a query on Postgres (PGlite cannot interrupt one: it refuses, before it runs, what the planner prices high; docs/data.md). */
  DATA_QUERY_TIMEOUT_MS: z.preprocess(blankAsUndefined, z.coerce.number().int().min(100).max(600_000).default(10_000)),
  /** Data listener, SQL over HTTP: most rows a query may return; past it 413 `too_many_rows`. */
  DATA_QUERY_MAX_ROWS: z.preprocess(blankAsUndefined, z.coerce.number().int().min(1).max(1_000_000).default(10_000)),
  /** A stable schema of views over the indexed tables for direct Postgres access (Ponder's --views-schema; docs/data.md). Unset: none. */
  DATABASE_VIEWS_SCHEMA: z.preprocess(
    blankAsUndefined,
    z
      .string()
      .regex(/^[a-z_][a-z0-9_]{0,44}$/, "lowercase letters, digits and _ (max 45)")
      .optional(),
  ),
});

export type Env = z.infer<typeof envSchema>;

/**
 * Reads the environment (from process.env, with `.env.local` and `.env` loaded into it first) and
 * reports every invalid value at once. An invalid variable is left out of `env`, as if unset, so the
 * rest of the configuration can still be checked.
 */
export function parseEnvironment(source: NodeJS.ProcessEnv = process.env): {
  env: Env;
  problems: string[];
  invalid: ReadonlySet<string>;
} {
  if (source === process.env) loadProcessEnvFiles();
  const parsed = envSchema.safeParse(source);
  if (parsed.success) return { env: parsed.data, problems: [], invalid: new Set() };
  const invalid = new Set(parsed.error.issues.map((issue) => String(issue.path[0])));
  const rest = Object.fromEntries(Object.entries(source).filter(([key]) => !invalid.has(key)));
  // Never the value itself: it may be a key.
  const problems = parsed.error.issues.map(
    ({ path: [variable, ...item], message }) =>
      `${String(variable)} is invalid: ${item.length ? `item ${item.map((i) => (typeof i === "number" ? i + 1 : String(i))).join(".")}: ` : ""}${message}`,
  );
  return { env: envSchema.parse(rest), problems, invalid };
}

/** The environment, or a StartupError listing every invalid value. */
export function readEnv(source: NodeJS.ProcessEnv = process.env): Env {
  const { env, problems } = parseEnvironment(source);
  if (problems.length) throw new StartupError(problems);
  return env;
}
