import { BaseError, ContractFunctionRevertedError, ContractFunctionZeroDataError, formatEther, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { reputationReporterAbi } from "../abis/ReputationReporter.ts";
import { type ReporterSettings, resolveReporterSettings } from "../api/passport/reporter.ts";
import type { Address } from "./addresses.ts";
import { CELO_CHAIN_ID, LOW_GAS_WEI } from "./celo.ts";
import { type Env, parseEnvironment } from "./env.ts";
import { loadProcessEnvFiles } from "./env-files.ts";
import { collectProblems } from "./errors.ts";
import { resolvePayTo, resolveSettlement, type Settlement } from "./payments.ts";
import { MIN_POSTGRES_MAJOR, probePostgres } from "./postgres-probe.ts";
import { redactDatabaseUrl, redactUrl } from "./redact.ts";
import { checkClient, probeChainId, rpcFailure } from "./rpc-probe.ts";
import { resolveSignInOrigin } from "./sign-in.ts";
import { checkIndexTarget, type IndexTarget, readTrackedWallets } from "./target.ts";

export type Finding = { level: "ok" | "warn" | "error"; check: string; message: string };

/** Everything the check resolved, for the caller to run or describe; a part is missing when its settings are wrong. */
export type ConfigCheck = {
  findings: Finding[];
  env: Env;
  target?: IndexTarget;
  payTo?: Address;
  settlement?: Settlement;
  signInOrigin?: string;
};

export type CheckOptions = {
  /** The environment; process.env (with `.env.local` and `.env` loaded) by default. */
  source?: NodeJS.ProcessEnv;
  /**
   * Without PONDER_RPC_URL_42220: whether a devnet runs already and is checked like Celo (the
   * launchers, once it exists), or `npm start` will start one (`npm run check:config`): then there
   * is nothing on chain to check yet.
   */
  devnet: "running" | "not started";
  /** Each RPC and Postgres request's limit. */
  timeoutMs?: number;
};

/**
 * Checks the whole configuration and reports every problem at once: each invalid or missing
 * setting, then what the RPC, Postgres and the chain say about it (chain id, contracts, gas, the
 * reporter role). `npm run check:config` prints it all; the launchers stop on its errors.
 */
export async function checkConfig(options: CheckOptions): Promise<ConfigCheck> {
  const timeoutMs = options.timeoutMs ?? 5_000;
  const { env, problems: invalid, invalid: invalidVariables } = parseEnvironment(options.source);
  const findings: Finding[] = [];
  const add = (level: Finding["level"], check: string, message: string) => findings.push({ level, check, message });
  // An invalid value was reported and then read as unset: the problems that follow from that (its default, "set X") only repeat it.
  const repeats = (problem: string) =>
    [...invalidVariables].some((variable) => new RegExp(`\\b${variable}\\b`).test(problem));
  const errors = (check: string, problems: string[]) => {
    for (const p of problems) if (!repeats(p)) add("error", check, p);
  };

  for (const problem of invalid) add("error", "environment", problem);
  if (!invalid.length) add("ok", "environment", describeSources(options.source));
  // PGlite admits one process: with its worker off, nothing would ever settle the deferred queue.
  if (env.X402_SETTLEMENT_WORKER === "off" && !env.DATABASE_URL)
    add(
      "error",
      "settings",
      "X402_SETTLEMENT_WORKER=off without DATABASE_URL: PGlite admits one process, so no other could settle this one's deferred payments; leave it on, or use Postgres with a process that settles",
    );

  if (!env.PONDER_RPC_URL_42220 && options.devnet === "not started") {
    add(
      "ok",
      "network",
      "no PONDER_RPC_URL_42220: `npm start` starts a local devnet (anvil, chain 42220), deploys the tokens and the reporter and seeds their history; nothing on chain to check yet",
    );
    const trackedProblems: string[] = [];
    readTrackedWallets(env, trackedProblems);
    errors("tracked wallets", trackedProblems);
    findings.push(...(await checkPostgres(env, timeoutMs)));
    return { findings, env };
  }

  const { target, problems: targetProblems } = checkIndexTarget(env);
  if (target)
    add(
      "ok",
      "network",
      target.network === "celo" ? `live Celo (chain ${CELO_CHAIN_ID})` : "the local devnet of the manifest",
    );
  errors(env.PONDER_RPC_URL_42220 ? "index" : "devnet", targetProblems);
  const settingProblems: string[] = [];
  const payTo = target && collectProblems(settingProblems, () => resolvePayTo(target, env));
  const settlement = target && collectProblems(settingProblems, () => resolveSettlement(target, env));
  const signInOrigin = collectProblems(settingProblems, () => resolveSignInOrigin(env));
  errors("settings", settingProblems);
  const reporter = target && resolveReporterSettings(target, env);
  if (target?.network === "celo") findings.push(...reporterSettingFindings(env, reporter!));
  if (target?.network === "celo" && !target.sanctions)
    findings.push({
      level: "warn",
      check: "sanctions",
      message:
        "SANCTIONS_START_BLOCK unset: the sanctions oracle is indexed from CELO_START_BLOCK only, so a wallet not seen listed is reported as inconclusive, not as clear; set it to the oracle's creation block",
    });
  if (target?.network === "celo" && target.database.kind === "pglite") {
    add(
      "warn",
      "database",
      `PGlite at ${target.database.directory}: one process, no replicas; set DATABASE_URL (Postgres) for a served deployment`,
    );
  }

  const [postgres, chain] = await Promise.all([
    checkPostgres(env, timeoutMs),
    target ? checkChain({ target, payTo, settlement, reporter: reporter! }, timeoutMs) : [],
  ]);
  findings.push(...postgres, ...chain.filter((f) => f.level === "ok" || !repeats(f.message)));
  return { findings, env, target, payTo, settlement, signInOrigin };
}

/** Where the settings came from: the files read, and how many variables each one set. */
function describeSources(source: NodeJS.ProcessEnv | undefined): string {
  if (source && source !== process.env) return "valid";
  if (process.env.ENV_FILES === "ignore") return "valid (ENV_FILES=ignore: the environment alone)";
  const counts = new Map<string, number>();
  for (const file of loadProcessEnvFiles().values()) counts.set(file, (counts.get(file) ?? 0) + 1);
  if (!counts.size) return "valid (no .env or .env.local here: the environment alone)";
  return `valid (${[...counts].map(([file, n]) => `${n} from ${file}`).join(", ")}; the environment wins over the files)`;
}

function reporterSettingFindings(env: Env, reporter: ReporterSettings): Finding[] {
  const findings: Finding[] = [];
  const warn = (message: string) => findings.push({ level: "warn", check: "reporter", message });
  if (!reporter.contract || !reporter.privateKey) {
    const missing = [!reporter.contract && "REPORTER_ADDRESS", !reporter.privateKey && "REPORTER_PRIVATE_KEY"]
      .filter(Boolean)
      .join(" and ");
    warn(
      `${missing} unset: passports cannot be published (POST /api/agent/report answers 503); \`npm run reporter:deploy\` deploys our reporter`,
    );
  }
  if (env.REPORTER_START_BLOCK !== undefined && !env.REPORTER_ADDRESS)
    warn("REPORTER_START_BLOCK is set without REPORTER_ADDRESS: it is ignored");
  if (env.REPORTER_ADDRESS && env.REPORTER_START_BLOCK === undefined) {
    warn(
      "REPORTER_START_BLOCK unset: our reporter is indexed from CELO_START_BLOCK only, and passports it published before are not found; set it to its deployment block",
    );
  }
  return findings;
}

async function checkPostgres(env: Env, timeoutMs: number): Promise<Finding[]> {
  if (!env.DATABASE_URL) return [];
  const at = redactDatabaseUrl(env.DATABASE_URL);
  const probe = await probePostgres(env.DATABASE_URL, timeoutMs);
  if ("failure" in probe)
    return [{ level: "error", check: "postgres", message: `Cannot connect to Postgres at ${at} (${probe.failure}).` }];
  if (probe.major < MIN_POSTGRES_MAJOR)
    return [
      {
        level: "error",
        check: "postgres",
        message: `Postgres at ${at} is version ${probe.version}: ${MIN_POSTGRES_MAJOR} or newer is needed.`,
      },
    ];
  const ok: Finding = { level: "ok", check: "postgres", message: `${at}: PostgreSQL ${probe.version}` };
  if (probe.autovacuum) return [ok];
  return [
    ok,
    {
      level: "warn",
      check: "postgres",
      message: `autovacuum is off on Postgres at ${at}: the payment ledger's statistics are never refreshed, so its prepared writes keep the plans made while it was small and read more of it with every payment; turn autovacuum on, or ANALYZE the service schema on a schedule`,
    },
  ];
}

type ChainInput = { target: IndexTarget; payTo?: Address; settlement?: Settlement; reporter: ReporterSettings };

/** What the chain says about the configuration: every RPC URL, then the contracts and keys through the first good one. */
async function checkChain({ target, payTo, settlement, reporter }: ChainInput, timeoutMs: number): Promise<Finding[]> {
  const findings: Finding[] = [];
  const add = (level: Finding["level"], check: string, message: string) => findings.push({ level, check, message });
  const devnet = target.network === "devnet";
  // The devnet's URLs are spellings of one node (config/target.ts): one answers for all.
  const urls = devnet ? target.rpcUrls.slice(0, 1) : target.rpcUrls;
  const probes = await Promise.all(urls.map((url) => probeChainId(url, timeoutMs)));
  let rpcUrl: string | undefined;
  urls.forEach((url, i) => {
    const probe = probes[i]!;
    if ("failure" in probe)
      add(
        "error",
        "rpc",
        `RPC ${redactUrl(url)} does not answer (${probe.failure}).${devnet ? " Is the devnet running (`npm run devnet`)?" : ""}`,
      );
    else if (probe.chainId !== CELO_CHAIN_ID)
      add(
        "error",
        "rpc",
        `RPC ${redactUrl(url)} serves chain id ${probe.chainId}, expected ${CELO_CHAIN_ID} (Celo${devnet ? " devnet" : ""}).`,
      );
    else {
      add("ok", "rpc", `${redactUrl(url)} answers: chain ${CELO_CHAIN_ID}`);
      rpcUrl ??= url;
    }
  });
  if (!rpcUrl) return findings;

  const client = checkClient(rpcUrl, timeoutMs);
  const at = redactUrl(rpcUrl);
  // A read that fails part way (a flaky RPC) is one error naming what could not be read, not a crash.
  const read = async <T>(what: string, fn: () => Promise<T>): Promise<T | undefined> => {
    try {
      return await fn();
    } catch (error) {
      add("error", "rpc", `Could not read ${what} from ${at} (${rpcFailure(error, timeoutMs)}).`);
      return undefined;
    }
  };
  const hasCode = async (address: Address) => ((await client.getCode({ address })) ?? "0x") !== "0x";
  const relayer =
    settlement?.mode === "self"
      ? (privateKeyToAccount(settlement.relayerKey).address.toLowerCase() as Address)
      : undefined;
  const reporterKey = reporter.privateKey
    ? (privateKeyToAccount(reporter.privateKey as Hex).address.toLowerCase() as Address)
    : undefined;
  const ours = reporter.contract;

  const [head, tokenCode, reporterCode, treasuryCode, relayerBalance, role, reporterBalance, oracleCode] =
    await Promise.all([
      read("the head block", () => client.getBlockNumber()),
      read("the token contracts", () => Promise.all(target.tokens.map((token) => hasCode(token.address)))),
      read("the reporter contracts", () => Promise.all(target.reporters.map(hasCode))),
      payTo ? read("the treasury", () => hasCode(payTo)) : undefined,
      relayer ? read("the relayer's balance", () => client.getBalance({ address: relayer })) : undefined,
      ours && reporterKey
        ? readRole(client, ours, reporterKey, (what, error) =>
            add("error", "rpc", `Could not read ${what} from ${at} (${rpcFailure(error, timeoutMs)}).`),
          )
        : undefined,
      reporterKey && ours
        ? read("the reporter key's balance", () => client.getBalance({ address: reporterKey }))
        : undefined,
      target.sanctions ? read("the sanctions oracle", () => hasCode(target.sanctions!.address)) : undefined,
    ]);

  if (head !== undefined && BigInt(target.startBlock) > head)
    add(
      "warn",
      "index",
      `CELO_START_BLOCK ${target.startBlock} is past the chain head (${head}): nothing is indexed until the chain gets there`,
    );
  if (target.sanctions && oracleCode !== undefined) {
    if (oracleCode)
      add(
        "ok",
        "sanctions",
        `the sanctions oracle ${target.sanctions.address}, indexed from block ${target.sanctions.startBlock}`,
      );
    else
      add(
        "error",
        "sanctions",
        `No sanctions oracle at ${target.sanctions.address} on ${at}: is this Celo? Unset SANCTIONS_START_BLOCK on a chain without it (sanctions then answer inconclusive).`,
      );
  }
  target.tokens.forEach((token, i) => {
    if (!tokenCode) return;
    if (tokenCode[i]) add("ok", "tokens", `${token.symbol} ${token.address}`);
    else
      add(
        "error",
        "tokens",
        `No ${token.symbol} contract at ${token.address} on ${at}.${devnet ? " The devnet manifest is stale: run `npm run devnet` again." : ""}`,
      );
  });
  target.reporters.forEach((address, i) => {
    if (!reporterCode) return;
    const which = address === ours ? "our reporter" : "the original OnchainReporter";
    if (reporterCode[i])
      add(
        "ok",
        "reporter",
        `${which} ${address}, indexed from block ${address === ours ? target.reporterStartBlock : target.startBlock}`,
      );
    else if (address === ours)
      add(
        "error",
        "reporter",
        `No contract at REPORTER_ADDRESS ${address} on ${at}: deploy ours with \`npm run reporter:deploy\`.`,
      );
    else
      add(
        "warn",
        "reporter",
        `No contract at ONCHAIN_REPORTER_ADDRESS ${address} on ${at}: its passports will not be found`,
      );
  });

  if (payTo && treasuryCode !== undefined) {
    if (payTo === relayer || payTo === reporterKey)
      add(
        "warn",
        "treasury",
        `X402_PAY_TO ${payTo} is the ${payTo === relayer ? "relayer" : "reporter"} key's address: a key kept in the service's environment would hold the revenue`,
      );
    else add("ok", "treasury", `${payTo} (${treasuryCode ? "a contract, such as a multisig" : "an account"})`);
  }
  if (settlement?.mode === "facilitator")
    add("ok", "settlement", `through the facilitator at ${redactUrl(settlement.url)}`);
  if (relayer && relayerBalance !== undefined)
    findings.push(gasFinding("relayer", relayer, relayerBalance, "settlements fail"));

  if (ours && reporterKey && role !== undefined && reporterCode?.[target.reporters.indexOf(ours)]) {
    if (role === "unreadable")
      add(
        "error",
        "reporter",
        `${ours} does not answer isReporter(): is REPORTER_ADDRESS our ReputationReporter (\`npm run reporter:deploy\`)?`,
      );
    else if (!role) {
      add(
        "error",
        "reporter",
        `The reporter key's address ${reporterKey} does not hold the reporter role on ${ours}: grant it (setReporter, from the contract's admin) or set REPORTER_PRIVATE_KEY to the key that holds it.`,
      );
    } else add("ok", "reporter", `${reporterKey} holds the reporter role on ${ours}`);
  }
  if (reporterKey && reporterBalance !== undefined)
    findings.push(gasFinding("reporter", reporterKey, reporterBalance, "passports cannot be published"));
  return findings;
}

/** Whether `account` holds the reporter role on `contract`: "unreadable" when the contract does not answer isReporter (not our ReputationReporter). */
async function readRole(
  client: ReturnType<typeof checkClient>,
  contract: Address,
  account: Address,
  failed: (what: string, error: unknown) => void,
) {
  try {
    return await client.readContract({
      address: contract,
      abi: reputationReporterAbi,
      functionName: "isReporter",
      args: [account],
    });
  } catch (error) {
    if (
      error instanceof BaseError &&
      error.walk((e) => e instanceof ContractFunctionZeroDataError || e instanceof ContractFunctionRevertedError)
    )
      return "unreadable" as const;
    failed("the reporter role", error);
    return undefined;
  }
}

/** A key that pays gas: ok with its balance, a warning below LOW_GAS_WEI (the service runs, but this part of it stops when the key is empty). */
function gasFinding(role: "relayer" | "reporter", address: Address, balance: bigint, consequence: string): Finding {
  const celo = `${formatEther(balance)} CELO`;
  if (balance >= LOW_GAS_WEI) return { level: "ok", check: role, message: `${address} holds ${celo} for gas` };
  const when = balance === 0n ? "until it is funded" : "once it runs out: fund it";
  return {
    level: "warn",
    check: role,
    message: `the ${role} key's address ${address} holds ${celo}, below ${formatEther(LOW_GAS_WEI)} CELO: ${consequence} ${when}`,
  };
}
