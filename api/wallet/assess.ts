import type { Address } from "../../config/addresses.ts";
import type { IndexTarget } from "../../config/target.ts";
import type { IndexDb } from "../db.ts";
import { ApiError } from "../http/errors.ts";
import type { WalletFacts } from "../scoring/facts.ts";
import { type ScoreResult, scoreWallet } from "../scoring/model.ts";
import { loadWalletFacts, walletPosition } from "./queries.ts";

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

  /** In tracked-wallets mode, a wallet outside the tracked set has no answer: 404. */
  ensureIndexed(address: Address): void {
    const { tracked } = this.deps.target;
    if (tracked && !tracked.has(address)) {
      throw new ApiError(404, "wallet_not_indexed", `This service indexes tracked wallets only, and ${address} is not one of them.`);
    }
  }

  async assess(address: Address): Promise<Assessment> {
    const { db, target } = this.deps;
    this.ensureIndexed(address);
    // A cached result needs only the wallet's position to be confirmed; without one, the position
    // is read with everything else in a single round.
    const hit = this.cache.get(address);
    const known = hit && Date.now() - hit.at < MAX_AGE_MS ? await walletPosition(db, target.schema, address) : undefined;
    if (hit && known && hit.fingerprint === known.fingerprint) return { ...hit.value, cached: true };

    const { facts, head, position } = await loadWalletFacts(db, target.schema, address, { position: known });
    const asOf = { block: head ? Number(head.blockNumber) : 0, timestamp: facts.asOf };
    const { fingerprint } = position;
    const value = { facts, result: scoreWallet(facts), asOf, computedAt: Date.now() };
    this.cache.delete(address);
    this.cache.set(address, { fingerprint, at: Date.now(), value });
    if (this.cache.size > MAX_ENTRIES) this.cache.delete(this.cache.keys().next().value!);
    return { ...value, cached: false };
  }
}
