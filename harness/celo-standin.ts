import {
  type Address,
  createPublicClient,
  createTestClient,
  createWalletClient,
  type Hex,
  http,
  zeroAddress,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { CELO_CHAIN_ID, CELO_TOKENS, MULTICALL3, SANCTIONS_ORACLE } from "../config/celo.ts";
import { multicall3Artifact } from "../contracts/artifacts.ts";
import { DEVNET_ROLES } from "../devnet/accounts.ts";
import { startAnvil } from "../devnet/anvil.ts";
import { devnetChain } from "../devnet/chain.ts";
import { listSanctionedPersonas, placeSanctionsOracle } from "../devnet/sanctions.ts";
import { DAY, historyMonths } from "../devnet/scenario/calendar.ts";
import { planPersonas } from "../devnet/scenario/personas.ts";
import type { PersonaTruth, PlannedTransfer } from "../devnet/scenario/plan.ts";
import { Population } from "../devnet/scenario/population.ts";
import { Random, usd } from "../devnet/scenario/random.ts";
import { HistorySeeder } from "../devnet/seed.ts";
import { waitForReceipt } from "../shared/receipt.ts";
import { placeDevStablecoin } from "./place-dev-token.ts";

export type CeloStandinOptions = {
  /** Background wallets besides the personas (default 30). */
  wallets?: number;
  /** Aim for about this many background transfers (default 1,500). */
  transfers?: number;
  /** Calendar months of history, the last being the current one (default 13). */
  months?: number;
  seed?: number;
  /** One block per slot of this many hours that has transfers (default 24). */
  slotHours?: number;
  log?: (line: string) => void;
};

type Key = { address: Address; privateKey: Hex };

export type CeloStandin = {
  rpcUrl: string;
  chainId: typeof CELO_CHAIN_ID;
  /** anvil's pid (its own process group). */
  pid: number;
  /** Stops anvil (its process group); it is also killed when this process exits. */
  stop: () => Promise<void>;
  /** Celo's USDT and USDC: the real addresses, names, versions and decimals (config/celo.ts). */
  tokens: typeof CELO_TOKENS;
  /**
   * The Chainalysis sanctions oracle's stand-in at its real address (SANCTIONS_ORACLE), owned by the
   * deployer, listing the `sanctioned` persona (and having listed, then removed, `delisted`).
   */
  sanctions: { address: Address; owner: Address };
  /** Anvil dev keys (public knowledge), each holding 1,000,000 native CELO for gas. */
  accounts: {
    /** Owner of both tokens (it seeded the history) and of the sanctions oracle, deployer of Multicall3: deploys the reporter. */
    deployer: Key;
    /** Hold 25,000 USDT and 25,000 USDC each, to pay for calls. */
    lenders: (Key & { label: string })[];
    /** For the service's REPORTER_PRIVATE_KEY. */
    reporter: Key;
    /** For X402_RELAYER_PRIVATE_KEY: sends the settlements. */
    relayer: Key;
    /** For X402_PAY_TO. */
    treasury: { address: Address };
  };
  /** The named personas with their expected verdicts (devnet/scenario/personas.ts). */
  personas: Record<string, PersonaTruth>;
  history: {
    /** First block with a transfer: CELO_START_BLOCK. */
    startBlock: number;
    /** The head when seeding ended (the sanctions listings included); blocks after it are mined once a second and are empty. */
    headBlock: number;
    /** Transfer events in [startBlock, headBlock], USDT and USDC together. */
    transfers: number;
    blocks: number;
    /** Background wallets (personas and their counterparties aside). */
    wallets: number;
    from: string;
    to: string;
  };
  /** Wall-clock seconds from spawning anvil to mining once a second. */
  seconds: number;
};

/**
 * An anvil standing in for Celo mainnet: chain 42220, the dev token's code and state at the real
 * USDT and USDC addresses with Celo's EIP-712 domains, Multicall3 and the Chainalysis sanctions
 * oracle at their addresses, and months of history already there (personas, background wallets,
 * funded lenders, the `sanctioned` persona listed on the oracle), then a block every second
 * as on Celo. Nothing is deployed at a devnet address the service would be told about: it runs as
 * on Celo, with PONDER_RPC_URL_42220 set to `rpcUrl` and CELO_START_BLOCK to `history.startBlock`.
 *
 * History is seeded with automine off and blocks mined by hand at past timestamps (many
 * transactions per block, seconds for months); only then does interval mining start.
 */
export async function startCeloStandin(options: CeloStandinOptions = {}): Promise<CeloStandin> {
  const started = performance.now();
  const log = options.log ?? (() => {});
  const seed = options.seed ?? 42;
  const monthsCount = options.months ?? 13;
  const now = Math.floor(Date.now() / 1000);
  const months = historyMonths(now, monthsCount);
  const anvil = await startAnvil({ genesisTimestamp: months[0]!.start - DAY });
  try {
    const { deployer, lenders, reporter, relayer, treasury } = DEVNET_ROLES;
    const chain = devnetChain(anvil.rpcUrl);
    const transport = http(anvil.rpcUrl);
    const clients = {
      publicClient: createPublicClient({ chain, transport, pollingInterval: 50 }),
      walletClient: createWalletClient({ chain, transport, account: privateKeyToAccount(deployer.privateKey) }),
      testClient: createTestClient({ mode: "anvil", chain, transport }),
    };

    for (const token of Object.values(CELO_TOKENS)) await placeDevStablecoin(clients, token);
    // Celo has Multicall3 (the service settles batches through it): deploy it anywhere, move its code there.
    const multicall = await waitForReceipt(clients.publicClient, {
      hash: await clients.walletClient.deployContract(multicall3Artifact),
    });
    await clients.testClient.setCode({
      address: MULTICALL3,
      bytecode: (await clients.publicClient.getCode({ address: multicall.contractAddress! }))!,
    });
    // Celo has the Chainalysis sanctions oracle: its code at its address, the deployer its owner.
    const sanctions = await placeSanctionsOracle(anvil.rpcUrl, deployer.privateKey);
    log(
      `anvil on ${anvil.rpcUrl} (chain ${CELO_CHAIN_ID}): dev token at USDT ${CELO_TOKENS.USDT.address} and USDC ${CELO_TOKENS.USDC.address}`,
    );

    const population = new Population({
      seed,
      wallets: options.wallets ?? 30,
      months: monthsCount,
      targetTransfers: options.transfers ?? 1_500,
    });
    const { personas, transfers: personaTransfers } = planPersonas({
      rng: new Random(seed),
      seed,
      months,
      now,
      shops: population.shops,
    });
    const seeder = new HistorySeeder(
      anvil.rpcUrl,
      deployer.address,
      { USDT: CELO_TOKENS.USDT.address, USDC: CELO_TOKENS.USDC.address },
      {
        slotSeconds: (options.slotHours ?? 24) * 3600,
        perTransaction: 400,
      },
    );
    await seeder.begin();
    const startBlock = Number(await clients.publicClient.getBlockNumber()) + 1;
    for (const month of months) {
      await seeder.seed([
        ...population.month(month),
        ...personaTransfers.filter((t) => t.at >= month.start && t.at < month.end),
      ]);
    }
    // Lenders get both stablecoins just before the present, so they can pay for calls.
    const funding = lenders.flatMap((l) =>
      (["USDT", "USDC"] as const).map(
        (token) =>
          ({ at: now - 60, token, from: zeroAddress, to: l.address, amount: usd(25_000) }) satisfies PlannedTransfer,
      ),
    );
    await seeder.seed(funding);
    const historyHead = await seeder.end(now);
    await seeder.verify();
    // The personas the devnet lists on the oracle, listed here too (automine is still on).
    const listings = await listSanctionedPersonas(anvil.rpcUrl, deployer.privateKey, personas);
    const headBlock = Math.max(historyHead, listings.addedBlock ?? 0, listings.removedBlock ?? 0);
    log(
      `seeded ${seeder.stats.transfers} transfers in blocks ${startBlock}-${historyHead}; sanctions oracle ${SANCTIONS_ORACLE} listings up to block ${headBlock}`,
    );

    // From here on, a block a second whether or not anything is sent, as on Celo.
    await clients.testClient.setAutomine(false);
    await clients.testClient.setIntervalMining({ interval: 1 });

    return {
      rpcUrl: anvil.rpcUrl,
      chainId: CELO_CHAIN_ID,
      pid: anvil.pid,
      stop: anvil.stop,
      tokens: CELO_TOKENS,
      sanctions,
      accounts: { deployer, lenders, reporter, relayer, treasury: { address: treasury.address } },
      personas,
      history: {
        startBlock,
        headBlock,
        transfers: seeder.stats.transfers,
        blocks: seeder.stats.blocks,
        wallets: population.members.length,
        from: new Date(months[0]!.start * 1000).toISOString(),
        to: new Date(now * 1000).toISOString(),
      },
      seconds: Math.round((performance.now() - started) / 100) / 10,
    };
  } catch (error) {
    await anvil.stop();
    throw error;
  }
}
