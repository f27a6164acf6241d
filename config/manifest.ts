import { existsSync, readFileSync } from "node:fs";
import { z } from "zod";
import { addressSchema } from "./addresses.ts";
import { describeIssues, StartupError } from "./errors.ts";

const hexKey = z.string().regex(/^0x[0-9a-fA-F]{64}$/, "must be a 32-byte hex private key");

const tokenSchema = z.object({
  address: addressSchema,
  name: z.string(),
  version: z.string(),
  symbol: z.enum(["USDT", "USDC"]),
  decimals: z.literal(6),
});

const verdictSchema = z.enum(["approve", "review", "decline"]);

/** `.devnet/manifest.json`: everything a client, a test or the indexer needs to find the devnet. */
export const manifestSchema = z.object({
  chainId: z.literal(42220),
  rpcUrl: z.url(),
  apiUrl: z.url(),
  createdAt: z.iso.datetime(),
  /** First block with contracts; the indexer starts here. */
  startBlock: z.number().int().nonnegative(),
  headBlock: z.number().int().nonnegative(),
  history: z.object({ from: z.iso.datetime(), to: z.iso.datetime(), months: z.number() }),
  tokens: z.object({ USDT: tokenSchema, USDC: tokenSchema }),
  reporter: z.object({ address: addressSchema, admin: addressSchema }),
  /**
   * The Chainalysis sanctions oracle's stand-in, at its real address, and its owner (the deployer).
   * Optional: a manifest from before the devnet had one still validates (the sanctions signal is
   * then inconclusive).
   */
  sanctions: z.object({ address: addressSchema, owner: addressSchema }).optional(),
  /** Anvil's well-known dev accounts (never real keys): who deployed and who pays. */
  deployer: z.object({ address: addressSchema, privateKey: hexKey }),
  lenders: z.array(z.object({ label: z.string(), address: addressSchema, privateKey: hexKey })).min(1),
  /** Keys the service itself uses on the devnet: publishing passports, relaying payments, receiving them. */
  service: z.object({
    reporter: z.object({ address: addressSchema, privateKey: hexKey }),
    relayer: z.object({ address: addressSchema, privateKey: hexKey }),
    treasury: z.object({ address: addressSchema }),
  }),
  personas: z.record(
    z.string(),
    z.object({
      address: addressSchema,
      expected: verdictSchema,
      description: z.string(),
      /** Facts seeded on purpose, for tests and for a person reading the manifest. */
      truth: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
    }),
  ),
  population: z.object({
    seed: z.number().int(),
    wallets: z.number().int(),
    transfers: z.number().int(),
    blocks: z.number().int(),
    seconds: z.number(),
  }),
});

export type Manifest = z.infer<typeof manifestSchema>;
export type ManifestInput = z.input<typeof manifestSchema>;

/** Reads and validates the manifest, or throws a StartupError naming the file and the problem. */
export function readManifest(path: string): Manifest {
  if (!existsSync(path)) {
    throw new StartupError(
      `Devnet manifest not found at ${path}: start the devnet with \`npm run devnet\` (or \`npm start\`), or set PONDER_RPC_URL_42220 to index live Celo.`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new StartupError(
      `Devnet manifest ${path} is not valid JSON (${(error as Error).message}): delete it and run \`npm run devnet\` again.`,
    );
  }
  const parsed = manifestSchema.safeParse(json);
  if (!parsed.success) {
    throw new StartupError(
      `Devnet manifest ${path} is invalid: ${describeIssues(parsed.error.issues)}. Delete it and run \`npm run devnet\` again.`,
    );
  }
  return parsed.data;
}
