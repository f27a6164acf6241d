// npm run reporter:deploy [-- --write-env]: deploys our ReputationReporter with the deployer key
// (REPORTER_DEPLOYER_PRIVATE_KEY, which becomes its admin), the reporter role granted to the
// reporter key's address (REPORTER_PRIVATE_KEY) by the constructor, in the same transaction. On
// live Celo (PONDER_RPC_URL_42220); without it on the running devnet, with its manifest's keys.
// Prints REPORTER_ADDRESS and REPORTER_START_BLOCK (the deployment block); --write-env sets them in
// .env, every other line kept.
import { parseArgs } from "node:util";
import { createWalletClient, formatEther, type Hex, http, publicActions } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { reputationReporterAbi } from "../abis/ReputationReporter.ts";
import { CELO_CHAIN_ID, celoChain } from "../config/celo.ts";
import { readEnv } from "../config/env.ts";
import { updateEnvFile } from "../config/env-file-update.ts";
import { loadProcessEnvFiles } from "../config/env-files.ts";
import { StartupError } from "../config/errors.ts";
import { readManifest } from "../config/manifest.ts";
import { redactUrl } from "../config/redact.ts";
import { probeChainId } from "../config/rpc-probe.ts";
import { reputationReporterArtifact } from "../contracts/artifacts.ts";
import { firstLine } from "../shared/async.ts";
import { waitForReceipt } from "../shared/receipt.ts";

/** How long the deployment's receipt is waited for (Celo makes a block a second). */
const RECEIPT_TIMEOUT_MS = 180_000;

/** Where to deploy and with which keys: live Celo from the environment, or the devnet's manifest. */
function deploymentSettings(writeEnv: boolean) {
  const env = readEnv();
  const problems: string[] = [];
  if (!env.PONDER_RPC_URL_42220) {
    if (writeEnv)
      throw new StartupError(
        "--write-env writes live Celo settings, and PONDER_RPC_URL_42220 is unset: on the devnet the indexer takes its reporter from the manifest.",
      );
    const manifest = readManifest(env.DEVNET_MANIFEST);
    return {
      network: "the devnet",
      rpcUrl: manifest.rpcUrl,
      deployerKey: (env.REPORTER_DEPLOYER_PRIVATE_KEY ?? manifest.deployer.privateKey) as Hex,
      reporterKey: (env.REPORTER_PRIVATE_KEY ?? manifest.service.reporter.privateKey) as Hex,
    };
  }
  if (!env.REPORTER_DEPLOYER_PRIVATE_KEY)
    problems.push(
      "Set REPORTER_DEPLOYER_PRIVATE_KEY: the key that deploys the reporter and becomes its admin (it pays the deployment in CELO).",
    );
  if (!env.REPORTER_PRIVATE_KEY)
    problems.push(
      "Set REPORTER_PRIVATE_KEY: the key the service publishes passports with, which the reporter role is granted to.",
    );
  if (env.REPORTER_ADDRESS) {
    problems.push(
      `REPORTER_ADDRESS is set already (${env.REPORTER_ADDRESS}): a second reporter would leave the passports of the first one unindexed. Unset it to deploy a new one.`,
    );
  }
  if (problems.length) throw new StartupError(problems);
  return {
    network: "Celo",
    rpcUrl: env.PONDER_RPC_URL_42220[0]!,
    deployerKey: env.REPORTER_DEPLOYER_PRIVATE_KEY as Hex,
    reporterKey: env.REPORTER_PRIVATE_KEY as Hex,
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { "write-env": { type: "boolean", default: false } } });
  const { network, rpcUrl, deployerKey, reporterKey } = deploymentSettings(values["write-env"]);
  const at = redactUrl(rpcUrl);
  const probe = await probeChainId(rpcUrl, 10_000);
  if ("failure" in probe) throw new StartupError(`RPC ${at} does not answer (${probe.failure}).`);
  if (probe.chainId !== CELO_CHAIN_ID)
    throw new StartupError(
      `RPC ${at} serves chain id ${probe.chainId}, expected ${CELO_CHAIN_ID} (Celo): nothing deployed.`,
    );

  const deployer = privateKeyToAccount(deployerKey);
  const reporter = privateKeyToAccount(reporterKey);
  const client = createWalletClient({
    account: deployer,
    chain: celoChain(rpcUrl),
    transport: http(rpcUrl, { retryCount: 1, timeout: 30_000 }),
  }).extend(publicActions);
  const balance = await client.getBalance({ address: deployer.address });
  if (balance === 0n)
    throw new StartupError(
      `The deployer ${deployer.address} (REPORTER_DEPLOYER_PRIVATE_KEY) holds no CELO to pay for the deployment: fund it first.`,
    );

  console.log(
    `Deploying ReputationReporter on ${network} (chain ${CELO_CHAIN_ID}, ${at}) from ${deployer.address} (${formatEther(balance)} CELO)…`,
  );
  const hash = await client.deployContract({ ...reputationReporterArtifact, args: [reporter.address] });
  const receipt = await waitForReceipt(client, { hash, timeout: RECEIPT_TIMEOUT_MS });
  if (receipt.status !== "success" || !receipt.contractAddress)
    throw new StartupError(`The deployment ${hash} reverted (block ${receipt.blockNumber}).`);
  const address = receipt.contractAddress.toLowerCase();
  const contract = { address: receipt.contractAddress, abi: reputationReporterAbi } as const;
  // Read back from the chain: what the service will rely on.
  const [granted, admin] = await Promise.all([
    client.readContract({ ...contract, functionName: "isReporter", args: [reporter.address] }),
    client.readContract({ ...contract, functionName: "admin" }),
  ]);
  if (!granted)
    throw new StartupError(`${address} was deployed, but ${reporter.address} does not hold the reporter role on it.`);

  const settings = { REPORTER_ADDRESS: address, REPORTER_START_BLOCK: String(receipt.blockNumber) };
  console.log(
    [
      `Deployed in block ${receipt.blockNumber} (transaction ${hash}):`,
      ...Object.entries(settings).map(([key, value]) => `${key}=${value}`),
      `  admin (REPORTER_DEPLOYER_PRIVATE_KEY's address): ${admin.toLowerCase()}`,
      `  reporter role (REPORTER_PRIVATE_KEY's address): ${reporter.address.toLowerCase()}`,
    ].join("\n"),
  );
  if (!values["write-env"]) {
    console.log(
      network === "Celo"
        ? "Set these two lines in .env."
        : "On the devnet the indexer keeps the manifest's reporter: these are for trying the deployment.",
    );
    return;
  }
  updateEnvFile(".env", settings);
  console.log("Wrote REPORTER_ADDRESS and REPORTER_START_BLOCK to .env.");
  // The environment and .env.local win over .env (config/env-files.ts): say so if one of them holds an older value.
  const origins = loadProcessEnvFiles();
  for (const key of Object.keys(settings)) {
    if (process.env[key] !== undefined && origins.get(key) !== ".env")
      console.log(
        `Note: ${key} is also set in ${origins.get(key) ?? "the environment"}, which wins over .env: remove it there.`,
      );
  }
  console.log(
    "The deployer key is the reporter's admin: keep it out of the service's environment from now on (docs/operations.md, \"Keys\").",
  );
}

main().catch((error) => {
  console.error(error instanceof StartupError ? error.message : firstLine(error));
  process.exit(1);
});
