import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { zeroAddress } from "viem";
import { type Manifest, manifestSchema } from "../config/manifest.ts";
import { DEVNET_ROLES } from "./accounts.ts";
import { type Anvil, PortTakenError, startAnvil } from "./anvil.ts";
import { deployContracts } from "./deploy.ts";
import { listSanctionedPersonas } from "./sanctions.ts";
import { DAY, historyMonths } from "./scenario/calendar.ts";
import { planPersonas } from "./scenario/personas.ts";
import type { PlannedTransfer } from "./scenario/plan.ts";
import { Population } from "./scenario/population.ts";
import { Random, usd } from "./scenario/random.ts";
import { HistorySeeder, type SeedStats } from "./seed.ts";

export type DevnetOptions = {
  /** Background wallets besides the personas. */
  wallets?: number;
  /** Aim for about this many background transfers (scales how active each wallet is). */
  transfers?: number;
  /** Calendar months of history, the last being the current one (12-18). */
  months?: number;
  seed?: number;
  /** One block per slot of this many hours that has transfers. */
  slotHours?: number;
  port?: number;
  apiUrl?: string;
  /** Where to write the manifest; nothing is written when undefined. */
  manifestPath?: string;
  log?: (line: string) => void;
  /** Seeding progress, after each block mined: days of history seeded of all there are, transfers and blocks so far. */
  onSeeding?: (progress: SeedingProgress) => void;
};

export type SeedingProgress = { days: number; ofDays: number; transfers: number; blocks: number };

export type Devnet = { anvil: Anvil; manifest: Manifest; stop: () => Promise<void> };

/**
 * Starts anvil, deploys the tokens, the reporter and the sanctions oracle, seeds the history, lists
 * the sanctioned personas on the oracle and writes the manifest.
 */
export async function startDevnet(options: DevnetOptions = {}): Promise<Devnet> {
  const started = performance.now();
  const log = options.log ?? (() => {});
  const seed = options.seed ?? 42;
  const monthsCount = options.months ?? 15;
  const now = Math.floor(Date.now() / 1000);
  const months = historyMonths(now, monthsCount);
  const genesisTimestamp = months[0]!.start - DAY;
  // A preferred port that is taken (someone else's node, a leftover devnet) is never used: anvil
  // goes on a free port from the OS instead, and the other node is left alone.
  const anvil = await startAnvil({ port: options.port, genesisTimestamp }).catch((error: Error) => {
    if (error instanceof PortTakenError) log(`port ${options.port} is taken by another process: using a free port`);
    return startAnvil({ genesisTimestamp });
  });
  try {
    const { deployer, lenders, reporter, relayer, treasury } = DEVNET_ROLES;
    const deployment = await deployContracts(anvil.rpcUrl, deployer.privateKey, reporter.address);
    log(
      `anvil on ${anvil.rpcUrl} (chain 42220); USDT ${deployment.tokens.USDT.address}, USDC ${deployment.tokens.USDC.address}, reporter ${deployment.reporter}`,
    );

    const population = new Population({
      seed,
      wallets: options.wallets ?? 300,
      months: monthsCount,
      targetTransfers: options.transfers,
    });
    const { personas, transfers: personaTransfers } = planPersonas({
      rng: new Random(seed),
      seed,
      months,
      now,
      shops: population.shops,
    });
    const personasByMonth = months.map((m) => personaTransfers.filter((t) => t.at >= m.start && t.at < m.end));

    // Progress in days of history: blocks are mined in time order, and how many there will be is not known before.
    const historyStart = months[0]!.start;
    const seeding = (timestamp: number, stats: SeedStats) =>
      options.onSeeding?.({
        days: Math.max(0, Math.min(now, timestamp) - historyStart) / DAY,
        ofDays: (now - historyStart) / DAY,
        transfers: stats.transfers,
        blocks: stats.blocks,
      });
    const seeder = new HistorySeeder(
      anvil.rpcUrl,
      deployer.address,
      { USDT: deployment.tokens.USDT.address, USDC: deployment.tokens.USDC.address },
      {
        slotSeconds: (options.slotHours ?? 6) * 3600,
        perTransaction: 400,
        onBlock: (stats, timestamp) => seeding(timestamp, stats),
      },
    );
    await seeder.begin();
    seeding(historyStart, seeder.stats);
    for (const month of months) await seeder.seed([...population.month(month), ...personasByMonth[month.index]!]);
    // Lenders get both stablecoins just before the present, so they can pay for calls.
    const funding: PlannedTransfer[] = lenders.flatMap((l) =>
      (["USDT", "USDC"] as const).map(
        (token) =>
          ({ at: now - 60, token, from: zeroAddress, to: l.address, amount: usd(25_000) }) satisfies PlannedTransfer,
      ),
    );
    await seeder.seed(funding);
    const historyHead = await seeder.end(now);
    await seeder.verify();
    // After the history, before anyone is handed the devnet: the owner lists the `sanctioned` and
    // `delisted` personas on the sanctions oracle, then removes `delisted` (one block each).
    const listings = await listSanctionedPersonas(anvil.rpcUrl, deployer.privateKey, personas);
    const headBlock = Math.max(historyHead, listings.addedBlock ?? 0, listings.removedBlock ?? 0);
    log(
      `sanctions oracle ${deployment.sanctions.address}: listed in block ${listings.addedBlock}, delisted in block ${listings.removedBlock} (history ends at ${historyHead})`,
    );

    const manifest: Manifest = manifestSchema.parse({
      chainId: 42220,
      rpcUrl: anvil.rpcUrl,
      apiUrl: options.apiUrl ?? "http://127.0.0.1:42069",
      createdAt: new Date(now * 1000).toISOString(),
      startBlock: deployment.startBlock,
      headBlock,
      history: {
        from: new Date(months[0]!.start * 1000).toISOString(),
        to: new Date(now * 1000).toISOString(),
        months: monthsCount,
      },
      tokens: deployment.tokens,
      reporter: { address: deployment.reporter, admin: deployer.address },
      sanctions: deployment.sanctions,
      deployer,
      lenders,
      service: { reporter, relayer, treasury: { address: treasury.address } },
      personas,
      population: {
        seed,
        wallets: population.members.length,
        transfers: seeder.stats.transfers,
        blocks: seeder.stats.blocks,
        seconds: Math.round((performance.now() - started) / 100) / 10,
      },
    });
    if (options.manifestPath) writeManifest(options.manifestPath, manifest);
    return { anvil, manifest, stop: anvil.stop };
  } catch (error) {
    await anvil.stop();
    throw error;
  }
}

/** Writes a devnet's manifest where the indexer and the scripts read it (DEVNET_MANIFEST). */
export function writeManifest(path: string, manifest: Manifest): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(manifest, null, 2)}\n`);
}

/** The readable summary printed when the devnet is up. */
export function describeDevnet(manifest: Manifest, manifestPath?: string): string {
  const lines = [
    `Devnet ready: ${manifest.rpcUrl} (chain ${manifest.chainId}), blocks ${manifest.startBlock}-${manifest.headBlock}`,
    `  history   ${manifest.history.from.slice(0, 10)} to ${manifest.history.to.slice(0, 10)} (${manifest.history.months} months): ` +
      `${manifest.population.transfers} transfers, ${manifest.population.wallets} background wallets, seeded in ${manifest.population.seconds}s`,
    `  USDT      ${manifest.tokens.USDT.address} ("${manifest.tokens.USDT.name}" v${manifest.tokens.USDT.version})`,
    `  USDC      ${manifest.tokens.USDC.address} ("${manifest.tokens.USDC.name}" v${manifest.tokens.USDC.version})`,
    `  reporter  ${manifest.reporter.address}`,
    ...(manifest.sanctions
      ? [`  sanctions ${manifest.sanctions.address} (Chainalysis oracle stand-in, owner ${manifest.sanctions.owner})`]
      : []),
    ...manifest.lenders.map((l) => `  ${l.label.padEnd(9)} ${l.address} (25,000 USDT + 25,000 USDC)`),
    "  personas:",
    ...Object.entries(manifest.personas).map(
      ([name, p]) => `    ${name.padEnd(13)} ${p.address}  expected ${p.expected.padEnd(7)} ${p.description}`,
    ),
  ];
  if (manifestPath) lines.push(`  manifest  ${manifestPath}`);
  return lines.join("\n");
}
