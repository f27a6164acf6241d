import type { MiddlewareHandler } from "hono";
import type { Address } from "../../config/addresses.ts";
import type { IndexTarget } from "../../config/target.ts";
import type { IndexDb } from "../db.ts";
import { ApiError } from "../http/errors.ts";
import { requestWallet } from "../http/validate.ts";
import type { WalletFacts } from "../scoring/facts.ts";
import { type ScoreResult, scoreWallet } from "../scoring/model.ts";
import { indexedHead } from "../stats/queries.ts";
import { loadWalletFacts, walletActivity } from "./queries.ts";

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
 * Scores wallets, caching each result until that wallet's indexed activity changes (its account
 * row: last activity and counts) or MAX_AGE_MS passes, whichever comes first.
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

  /** Middleware: the request's wallet must be indexed, checked before any payment is asked for. */
  indexedOnly(): MiddlewareHandler {
    return async (c, next) => {
      this.ensureIndexed(requestWallet(c)!);
      await next();
    };
  }

  async assess(address: Address): Promise<Assessment> {
    const { db, target } = this.deps;
    this.ensureIndexed(address);
    const [activity, head] = await Promise.all([walletActivity(db, address), indexedHead(db, target.schema)]);
    const fingerprint = activity ? `${activity.lastAt}:${activity.transfersIn}:${activity.transfersOut}` : "none";
    const hit = this.cache.get(address);
    if (hit && hit.fingerprint === fingerprint && Date.now() - hit.at < MAX_AGE_MS) return { ...hit.value, cached: true };

    const asOf = head ? { block: Number(head.blockNumber), timestamp: Number(head.timestamp) } : { block: 0, timestamp: Math.floor(Date.now() / 1000) };
    const facts = await loadWalletFacts(db, target.schema, address, asOf.timestamp, { activity });
    const value = { facts, result: scoreWallet(facts), asOf, computedAt: Date.now() };
    this.cache.delete(address);
    this.cache.set(address, { fingerprint, at: Date.now(), value });
    if (this.cache.size > MAX_ENTRIES) this.cache.delete(this.cache.keys().next().value!);
    return { ...value, cached: false };
  }
}
