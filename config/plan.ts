import { privateKeyToAccount } from "viem/accounts";
import { CELO_CHAIN_ID } from "./celo.ts";
import type { ConfigCheck } from "./check.ts";
import { redactDatabaseUrl, redactUrl } from "./redact.ts";
import { resolveStorage } from "./target.ts";

/**
 * What `npm start` would run with this configuration, as label/value rows: where it reads the
 * chain, where it writes, what it indexes from which block, how payments are settled, the ports
 * and the Ponder command. URLs are redacted and keys appear only as their addresses.
 */
export function describePlan(check: ConfigCheck, ponderArgs: (schema: string) => string[]): [string, string][] {
  const { env, target, payTo, settlement } = check;
  const network = target?.network ?? (env.PONDER_RPC_URL_42220 ? "celo" : "devnet");
  const storage = target ?? resolveStorage(env, network);
  const rows: [string, string][] = [];
  const row = (label: string, value: string) => rows.push([label, value]);

  if (network === "celo") {
    row("network", `live Celo (chain ${CELO_CHAIN_ID})`);
    row("rpc", (env.PONDER_RPC_URL_42220 ?? []).map(redactUrl).join(", "));
  } else {
    row(
      "network",
      target
        ? `the running devnet (chain ${CELO_CHAIN_ID}, ${env.DEVNET_MANIFEST})`
        : `a new local devnet: anvil on 127.0.0.1:${env.DEVNET_PORT} (or a free port), ${env.DEVNET_WALLETS} background wallets, ${env.DEVNET_MONTHS} months of history`,
    );
    if (target) row("rpc", redactUrl(target.rpcUrls[0]!));
  }
  row(
    "database",
    storage.database.kind === "postgres"
      ? `Postgres ${redactDatabaseUrl(storage.database.connectionString)}`
      : `PGlite ${storage.database.directory}`,
  );
  row("schema", storage.schema);
  // On Postgres the IPFS content is in the service store; IPFS_DIR is PGlite's.
  if (storage.database.kind === "pglite") row("ipfs", storage.ipfsDirectory);
  if (target) {
    row("tokens", target.tokens.map((t) => `${t.symbol} ${t.address}`).join(", "));
    row("reporters", target.reporters.join(", "));
    row(
      "start block",
      target.reporterStartBlock === target.startBlock
        ? String(target.startBlock)
        : `${target.startBlock} (the reporters from ${target.reporterStartBlock})`,
    );
  } else if (network === "devnet")
    row("contracts", "deployed by `npm start` (the tokens, the reporter), indexed from their first block");
  row(
    "mode",
    env.INDEX_MODE === "tracked"
      ? `tracked: ${target?.tracked?.size ?? "?"} wallets`
      : "all: every transfer of the tokens",
  );
  if (payTo) row("treasury", payTo);
  const timing =
    env.X402_SETTLEMENT === "deferred"
      ? "deferred (answers first, settles within seconds)"
      : "before (settles, then answers)";
  if (settlement)
    row(
      "settlement",
      `${settlement.mode === "self" ? `self-settled by the relayer ${privateKeyToAccount(settlement.relayerKey).address.toLowerCase()}` : `facilitator ${redactUrl(settlement.url)}`}; ${timing}`,
    );
  else if (network === "devnet") row("settlement", `self-settled with the devnet's relayer; ${timing}`);
  row("ports", `API ${env.HOST ?? "every interface"}:${env.PORT}, data listener ${env.DATA_HOST}:${env.DATA_PORT}`);
  row("command", ["ponder", ...ponderArgs(storage.schema)].join(" "));
  return rows;
}
