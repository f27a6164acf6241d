import {
  createPublicClient,
  createWalletClient,
  formatEther,
  type Hex,
  http,
  publicActions,
  type TransactionReceipt,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { reputationReporterAbi } from "../../abis/ReputationReporter.ts";
import type { Address } from "../../config/addresses.ts";
import { CELO_CHAIN_ID, CELO_ONCHAIN_REPORTER, celoChain, LOW_GAS_WEI } from "../../config/celo.ts";
import { type Env, readEnv } from "../../config/env.ts";
import { readManifest } from "../../config/manifest.ts";
import type { IndexTarget } from "../../config/target.ts";
import { firstLine } from "../../shared/async.ts";
import { log } from "../../shared/log.ts";
import { waitForReceipt } from "../../shared/receipt.ts";

/** Where passports are published and which reporters verify reads: ours, and the original OnchainReporter. */
export type ReporterSettings = {
  rpcUrl: string;
  /** Our reporter contract (null on Celo without REPORTER_ADDRESS: the report route is then unavailable). */
  contract: Address | null;
  /** The publishing key (anvil #3 on the devnet, REPORTER_PRIVATE_KEY on Celo). */
  privateKey: Hex | null;
  /** The original OnchainReporter (Celo), indexed beside ours: its passports verify the same way. */
  original: Address | null;
};

export function resolveReporterSettings(
  target: Pick<IndexTarget, "network" | "rpcUrls">,
  env: Env = readEnv(),
): ReporterSettings {
  if (target.network === "devnet") {
    const manifest = readManifest(env.DEVNET_MANIFEST);
    return {
      rpcUrl: manifest.rpcUrl,
      contract: manifest.reporter.address,
      privateKey: (env.REPORTER_PRIVATE_KEY ?? manifest.service.reporter.privateKey) as Hex,
      original: env.ONCHAIN_REPORTER_ADDRESS ?? null,
    };
  }
  return {
    rpcUrl: target.rpcUrls[0]!,
    contract: env.REPORTER_ADDRESS ?? null,
    privateKey: (env.REPORTER_PRIVATE_KEY as Hex | undefined) ?? null,
    original: env.ONCHAIN_REPORTER_ADDRESS ?? CELO_ONCHAIN_REPORTER,
  };
}

export type PublishInput = {
  wallet: Address;
  buyer: Address;
  reputationScore: number;
  financialHealthScore: number;
  loanCapacity: string;
  reportId: string;
  reportHash: string;
  expiresAt: bigint;
  supersedes: string;
};

export type Published = { transaction: Hex; block: number; publishedAt: number };

/** Why a publication failed: refused by the chain (reverted, no role, no gas) or no answer (RPC down, receipt late). */
export class PublishError extends Error {
  constructor(
    message: string,
    readonly unavailable: boolean,
    /** The transaction was sent: it may still be mined (the caller must see to its revocation). */
    readonly sent?: Hex,
  ) {
    super(message);
  }
}

/** How long publishing waits for its receipt before giving up (the transaction is then revoked if it is mined later). */
const PUBLISH_RECEIPT_WAIT_MS = 60_000;

/**
 * Our reporter contract through the reporter key: publish, revoke, and the chain reads issuance
 * needs (id taken? the wallet's previous valid passport, the chain's time). One publication at a
 * time per process: the supersede link and the key's nonce are read just before each send.
 */
export type ReporterClient = ReturnType<typeof createReporter>;

export function createReporter(settings: ReporterSettings) {
  const chain = celoChain(settings.rpcUrl);
  const client = createPublicClient({
    chain,
    transport: http(settings.rpcUrl, { retryCount: 1, timeout: 15_000 }),
    pollingInterval: 100,
  });
  const account = settings.privateKey ? privateKeyToAccount(settings.privateKey) : null;
  const wallet =
    account &&
    createWalletClient({
      account,
      chain,
      transport: http(settings.rpcUrl, { retryCount: 0, timeout: 20_000 }),
      pollingInterval: 100,
    }).extend(publicActions);
  let lock: Promise<unknown> = Promise.resolve();
  const exclusive = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = lock.then(fn, fn);
    lock = run.catch(() => undefined);
    return run;
  };
  const contract = settings.contract;
  const need = () => {
    if (!contract || !wallet || !account)
      throw new PublishError("no reporter configured (REPORTER_ADDRESS and REPORTER_PRIVATE_KEY)", true);
    return { contract, wallet, account };
  };

  const api = {
    settings,
    contract,
    chainId: CELO_CHAIN_ID,
    reporterAccount: (account?.address.toLowerCase() ?? null) as Address | null,
    client,

    /** The chain's current time (latest block), in seconds. */
    async chainTime(): Promise<number> {
      return Number((await client.getBlock({ blockTag: "latest" })).timestamp);
    },

    /** Whether `reportId` is taken on a reporter contract (ours by default). */
    async exists(reportId: string, at: Address | null = contract): Promise<boolean> {
      if (!at) return false;
      const [exists] = await client.readContract({
        address: at,
        abi: reputationReporterAbi,
        functionName: "verifyReport",
        args: [reportId],
      });
      return exists;
    },

    /** The wallet's latest passport on our contract that is still valid at `now` (not revoked, superseded or expired), from the chain. */
    async previousValid(walletAddress: Address, now: number): Promise<string | null> {
      const { contract } = need();
      const ids = await client.readContract({
        address: contract,
        abi: reputationReporterAbi,
        functionName: "getWalletReportIds",
        args: [walletAddress],
      });
      for (const id of [...ids].reverse().slice(0, 5)) {
        const [exists, revoked, expiresAt, supersededBy] = await client.readContract({
          address: contract,
          abi: reputationReporterAbi,
          functionName: "reportStatus",
          args: [id],
        });
        if (exists && !revoked && supersededBy === "" && (expiresAt === 0n || Number(expiresAt) > now)) return id;
        if (supersededBy === "") continue;
        return null; // an older one superseded by a newer: nothing valid further back
      }
      return null;
    },

    /** Runs `fn` while no other publication of this process runs (the supersede link is read inside). */
    exclusive,

    /** Publishes and waits for the receipt. Throws PublishError (with `sent` when a transaction may still be mined). */
    async publish(p: PublishInput): Promise<Published> {
      const { contract, wallet } = need();
      let hash: Hex;
      try {
        hash = await wallet.writeContract({
          address: contract,
          abi: reputationReporterAbi,
          functionName: "publishFinancialReportV2",
          args: [
            p.wallet,
            p.buyer,
            p.reputationScore,
            p.financialHealthScore,
            p.loanCapacity,
            p.reportId,
            p.reportHash,
            p.expiresAt,
            p.supersedes,
          ],
        });
      } catch (error) {
        throw new PublishError(firstLine(error), isTransport(error));
      }
      let receipt: TransactionReceipt;
      try {
        receipt = await waitForReceipt(client, {
          hash,
          timeout: PUBLISH_RECEIPT_WAIT_MS,
          pollingInterval: 100,
        });
      } catch (error) {
        throw new PublishError(`no receipt for ${hash}: ${firstLine(error)}`, true, hash);
      }
      if (receipt.status !== "success") throw new PublishError(`publication ${hash} reverted`, false);
      const block = await client.getBlock({ blockNumber: receipt.blockNumber });
      return { transaction: hash, block: Number(receipt.blockNumber), publishedAt: Number(block.timestamp) };
    },

    /** Revokes a passport of ours on chain and waits for the receipt. */
    async revoke(reportId: string, reason: string): Promise<{ transaction: Hex; block: number }> {
      const { contract, wallet } = need();
      const hash = await wallet.writeContract({
        address: contract,
        abi: reputationReporterAbi,
        functionName: "revokeReport",
        args: [reportId, reason],
      });
      const receipt = await waitForReceipt(client, {
        hash,
        timeout: PUBLISH_RECEIPT_WAIT_MS,
        pollingInterval: 100,
      });
      if (receipt.status !== "success") throw new Error(`revocation ${hash} reverted`);
      return { transaction: hash, block: Number(receipt.blockNumber) };
    },

    /**
     * Revokes a passport of ours unless it is already revoked or not on chain: what may be asked
     * more than once (a retried sweep, two replicas, the request and the reconciler) does it once.
     * Returns whether this call revoked it.
     */
    async revokeOnce(reportId: string, reason: string): Promise<boolean> {
      const { contract } = need();
      const standing = async () => {
        const [exists, revoked] = await client.readContract({
          address: contract,
          abi: reputationReporterAbi,
          functionName: "reportStatus",
          args: [reportId],
        });
        return exists && !revoked;
      };
      return exclusive(async () => {
        if (!(await standing())) return false;
        try {
          await api.revoke(reportId, reason);
          return true;
        } catch (error) {
          // Revoked meanwhile by someone else (another replica): the contract refused the second revocation.
          if (!(await standing())) return false;
          throw error;
        }
      });
    },

    /** Waits (in the background) for a publication whose receipt did not come in time, and revokes it if it is mined. */
    revokeIfMined(hash: Hex, reportId: string, reason: string): void {
      void (async () => {
        try {
          const receipt = await waitForReceipt(client, {
            hash,
            timeout: 30 * 60_000,
            pollingInterval: 2_000,
          });
          if (receipt.status === "success") await exclusive(() => api.revoke(reportId, reason));
        } catch (error) {
          log.error(`[passport] ${reportId}: could not settle the fate of publication ${hash}: ${firstLine(error)}`);
        }
      })();
    },

    /** For health: the contract has code, the key holds the reporter role, and it has gas. */
    async health(): Promise<{ status: "ok" | "degraded" | "down" } & Record<string, unknown>> {
      if (!contract || !account)
        return {
          status: "degraded",
          configured: false,
          note: "no reporter configured: POST /api/agent/report is unavailable",
        };
      const [code, role, balance] = await Promise.all([
        client.getCode({ address: contract }),
        client.readContract({
          address: contract,
          abi: reputationReporterAbi,
          functionName: "isReporter",
          args: [account.address],
        }),
        client.getBalance({ address: account.address }),
      ]);
      const hasCode = !!code && code !== "0x";
      const status = !hasCode || !role || balance === 0n ? "down" : balance < LOW_GAS_WEI ? "degraded" : "ok";
      return {
        status,
        contract,
        reporter: account.address.toLowerCase(),
        codePresent: hasCode,
        holdsReporterRole: role,
        reporterGasCelo: formatEther(balance),
      };
    },
  };
  return api;
}

const isTransport = (error: unknown) =>
  /fetch failed|ECONNREFUSED|ECONNRESET|socket|timed? ?out|HTTP request failed/i.test(
    String((error as Error)?.message ?? error),
  );
