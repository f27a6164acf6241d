import type { Address } from "../../config/addresses.ts";
import type { IndexTarget } from "../../config/target.ts";
import { ApiError } from "../../shared/errors.ts";
import type { IndexDb } from "../db.ts";
import { INDEX_NOT_CURRENT } from "../indexing/gate.ts";
import { sanctionsVersion } from "../sanctions/queries.ts";
import type { WalletFacts } from "../scoring/facts.ts";
import { type ScoreResult, scoreWallet } from "../scoring/model.ts";
import { indexedHead } from "../stats/queries.ts";
import { MAX_AGE_MS } from "./max-age.ts";
import { loadWalletsFacts, type WalletPosition, walletPositions } from "./queries.ts";

export type Assessment = {
  facts: WalletFacts;
  result: ScoreResult;
  asOf: { block: number; timestamp: number };
  computedAt: number;
  cached: boolean;
};

export type AssessDeps = { db: IndexDb; target: Pick<IndexTarget, "schema" | "tracked" | "sanctions"> };

/** Reads of one answer made again at most this many times while blocks keep being committed under them. */
const READ_ATTEMPTS = 5;

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
      throw new ApiError(
        404,
        "wallet_not_indexed",
        `This service indexes tracked wallets only, and ${address} is not one of them.`,
      );
    }
  }

  async assess(address: Address): Promise<Assessment> {
    return (await this.assessMany([address]))[0]!;
  }

  /**
   * Many wallets in the same few statements (the batch screen), in the order given, all as of one
   * indexed block: the checkpoint is read before and after the reads (which run on several
   * connections on Postgres), and the reads are made again when a block was committed meanwhile.
   * `asOf.block` is then the block every figure was counted at.
   */
  async assessMany(addresses: readonly Address[]): Promise<Assessment[]> {
    const { db, target } = this.deps;
    for (const address of addresses) this.ensureIndexed(address);
    for (let attempt = 1; ; attempt++) {
      const before = await indexedHead(db, target.schema);
      const answers = await this.read(addresses);
      const after = await indexedHead(db, target.schema);
      if (before?.blockNumber === after?.blockNumber) {
        const asOf = {
          block: Number(after?.blockNumber ?? 0),
          timestamp: Number(after?.timestamp ?? Math.floor(Date.now() / 1000)),
        };
        for (const [address, fresh] of answers.fresh)
          this.remember(address, fresh.fingerprint, { ...fresh.value, asOf });
        return addresses.map((a) => ({ ...answers.all.get(a)!, asOf }));
      }
      if (attempt === READ_ATTEMPTS)
        throw new ApiError(
          503,
          INDEX_NOT_CURRENT,
          "The index moved on while this answer was read; nothing was charged. Retry.",
        );
    }
  }

  private remember(address: Address, fingerprint: string, value: Omit<Assessment, "cached">) {
    this.cache.delete(address);
    this.cache.set(address, { fingerprint, at: Date.now(), value });
    if (this.cache.size > MAX_ENTRIES) this.cache.delete(this.cache.keys().next().value!);
  }

  /** The wallets' assessments from the cache where their position is unchanged, else from their facts. */
  private async read(addresses: readonly Address[]) {
    const { db, target } = this.deps;
    // A cached result needs only the wallet's position to be confirmed; without one, the position
    // is read with everything else in a single round.
    // A listing added or removed changes answers without a transfer of the wallet's: it is part of the key.
    const hits = addresses.filter((a) => Date.now() - (this.cache.get(a)?.at ?? -Infinity) < MAX_AGE_MS);
    const [known, listings] = await Promise.all([
      hits.length ? walletPositions(db, target.schema, hits) : new Map<Address, WalletPosition>(),
      sanctionsVersion(db, target.schema),
    ]);
    const fingerprint = (position: WalletPosition) => `${position.fingerprint}|${listings}`;
    const answers = new Map<Address, Assessment>();
    for (const [address, position] of known) {
      const hit = this.cache.get(address)!;
      if (hit.fingerprint === fingerprint(position)) answers.set(address, { ...hit.value, cached: true });
    }
    const misses = addresses.filter((a) => !answers.has(a));
    const fresh = new Map<Address, { fingerprint: string; value: Omit<Assessment, "cached"> }>();
    if (misses.length) {
      const { wallets } = await loadWalletsFacts(db, target.schema, misses, {
        positions: known,
        sanctions: { complete: target.sanctions !== null },
      });
      for (const [address, { facts, position }] of wallets) {
        const value = {
          facts,
          result: scoreWallet(facts),
          asOf: { block: 0, timestamp: facts.asOf },
          computedAt: Date.now(),
        };
        fresh.set(address, { fingerprint: fingerprint(position), value });
        answers.set(address, { ...value, cached: false });
      }
    }
    return { all: answers, fresh };
  }
}
