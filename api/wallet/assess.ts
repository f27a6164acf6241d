import type { Address } from "../../config/addresses.ts";
import type { IndexTarget } from "../../config/target.ts";
import type { IndexDb } from "../db.ts";
import { ApiError } from "../http/errors.ts";
import type { WalletFacts } from "../scoring/facts.ts";
import { type ScoreResult, scoreWallet } from "../scoring/model.ts";
import { loadWalletsFacts, type WalletPosition, walletPositions } from "./queries.ts";

export type Assessment = {
  facts: WalletFacts;
  result: ScoreResult;
  asOf: { block: number; timestamp: number };
  computedAt: number;
  cached: boolean;
};

export type AssessDeps = { db: IndexDb; target: Pick<IndexTarget, "schema" | "tracked"> };

/** Results stay valid while the wallet's indexed activity is unchanged, and at most this long. */
export const MAX_AGE_MS = 10 * 60_000;
const MAX_ENTRIES = 10_000;

/**
 * Scores wallets, caching each result until that wallet's indexed activity changes (its position:
 * counts and last activity per token) or MAX_AGE_MS passes, whichever comes first.
 */
export class WalletAssessor {
  private readonly cache = new Map<Address, { fingerprint: string; at: number; value: Omit<Assessment, "cached"> }>();

  constructor(private readonly deps: AssessDeps) {}

  /** In tracked-wallets mode, only the tracked set is indexed; otherwise every wallet is. */
  isIndexed(address: Address): boolean {
    const { tracked } = this.deps.target;
    return !tracked || tracked.has(address);
  }

  /** In tracked-wallets mode, a wallet outside the tracked set has no answer: 404. */
  ensureIndexed(address: Address): void {
    if (!this.isIndexed(address)) {
      throw new ApiError(404, "wallet_not_indexed", `This service indexes tracked wallets only, and ${address} is not one of them.`);
    }
  }

  async assess(address: Address): Promise<Assessment> {
    return (await this.assessMany([address]))[0]!;
  }

  /** Many wallets in the same few statements (the batch screen), in the order given. */
  async assessMany(addresses: readonly Address[]): Promise<Assessment[]> {
    const { db, target } = this.deps;
    for (const address of addresses) this.ensureIndexed(address);
    // A cached result needs only the wallet's position to be confirmed; without one, the position
    // is read with everything else in a single round.
    const hits = addresses.filter((a) => Date.now() - (this.cache.get(a)?.at ?? -Infinity) < MAX_AGE_MS);
    const known = hits.length ? await walletPositions(db, target.schema, hits) : new Map<Address, WalletPosition>();
    const answers = new Map<Address, Assessment>();
    for (const [address, position] of known) {
      const hit = this.cache.get(address)!;
      if (hit.fingerprint === position.fingerprint) answers.set(address, { ...hit.value, cached: true });
    }
    const misses = addresses.filter((a) => !answers.has(a));
    if (misses.length) {
      const { head, wallets } = await loadWalletsFacts(db, target.schema, misses, { positions: known });
      for (const [address, { facts, position }] of wallets) {
        const asOf = { block: head ? Number(head.blockNumber) : 0, timestamp: facts.asOf };
        const value = { facts, result: scoreWallet(facts), asOf, computedAt: Date.now() };
        this.cache.delete(address);
        this.cache.set(address, { fingerprint: position.fingerprint, at: Date.now(), value });
        if (this.cache.size > MAX_ENTRIES) this.cache.delete(this.cache.keys().next().value!);
        answers.set(address, { ...value, cached: false });
      }
    }
    return addresses.map((a) => answers.get(a)!);
  }
}
