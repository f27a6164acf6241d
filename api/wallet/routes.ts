import { Hono } from "hono";
import { addressSchema } from "../../config/addresses.ts";
import type { IndexTarget } from "../../config/target.ts";
import type { IndexDb } from "../db.ts";
import { ApiError } from "../http/errors.ts";
import { isoFromSeconds as iso } from "../money.ts";
import { DAY, WINDOW_DAYS } from "../scoring/facts.ts";
import { scoreWallet } from "../scoring/model.ts";
import { factsAt } from "../scoring/point-in-time.ts";
import { MAX_AGE_MS, type WalletAssessor } from "./assess.ts";
import { loadWalletFacts } from "./queries.ts";
import { SIGNAL_NAMES, SIGNALS } from "./signal-catalog.ts";
import { walletData } from "./wallet-data.ts";

export type WalletRouteDeps = { db: IndexDb; target: Pick<IndexTarget, "tokens">; assessor: WalletAssessor };


function parseAddress(value: string) {
  const parsed = addressSchema.safeParse(value);
  if (!parsed.success) throw new ApiError(400, "invalid_address", `"${value}" is not a wallet address (0x followed by 40 hex characters).`);
  return parsed.data;
}

/** GET /api/wallet/{address}/…: the analysis, the named signals and the score history. */
export function walletRoutes({ db, target, assessor }: WalletRouteDeps) {
  const dataAsOf = (a: { asOf: { block: number; timestamp: number } }) => ({ block: a.asOf.block, time: iso(a.asOf.timestamp) });
  const cacheStatus = (a: { cached: boolean; computedAt: number }) => ({
    cached: a.cached,
    cachedAt: new Date(a.computedAt).toISOString(),
    expiresAt: new Date(a.computedAt + MAX_AGE_MS).toISOString(),
    invalidatedBy: "any newly indexed transfer of this wallet",
  });

  return new Hono()
    .get("/:address/analysis", async (c) => {
      const a = await assessor.assess(parseAddress(c.req.param("address")));
      return c.json({ walletAddress: a.facts.address, modelVersion: a.result.modelVersion, dataAsOf: dataAsOf(a), cached: a.cached, walletData: await walletData(db, target, a) });
    })
    .get("/:address/signals", async (c) => {
      const a = await assessor.assess(parseAddress(c.req.param("address")));
      return c.json({
        walletAddress: a.facts.address,
        modelVersion: a.result.modelVersion,
        dataAsOf: dataAsOf(a),
        cache: cacheStatus(a),
        signals: SIGNAL_NAMES.map((name) => ({ name, value: SIGNALS[name]!.read(a), description: SIGNALS[name]!.description })),
      });
    })
    .get("/:address/signals/:signal", async (c) => {
      const address = parseAddress(c.req.param("address"));
      const name = c.req.param("signal");
      const signal = SIGNALS[name];
      if (!signal) throw new ApiError(404, "unknown_signal", `No signal named "${name}". Signals: ${SIGNAL_NAMES.join(", ")}.`, { signals: SIGNAL_NAMES });
      const a = await assessor.assess(address);
      return c.json({ walletAddress: address, name, value: signal.read(a), description: signal.description, modelVersion: a.result.modelVersion, dataAsOf: dataAsOf(a), cache: cacheStatus(a) });
    })
    .get("/:address/history", async (c) => {
      const current = await assessor.assess(parseAddress(c.req.param("address")));
      // Two years of transfers: each month end is scored on the year before it.
      const facts = await loadWalletFacts(db, current.facts.address, current.asOf.timestamp, { windowDays: 2 * WINDOW_DAYS });
      const now = new Date(current.asOf.timestamp * 1000);
      const months = Array.from({ length: 12 }, (_, k) => Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 11 + k, 1) / 1000 - 1);
      return c.json({
        walletAddress: current.facts.address,
        modelVersion: current.result.modelVersion,
        dataAsOf: dataAsOf(current),
        history: months.map((t) => {
          const r = scoreWallet(factsAt(facts, t));
          return {
            monthEnd: iso(t),
            month: iso(t - DAY).slice(0, 7),
            financialHealth: r.scores.financialHealth,
            reputation: r.scores.reputation,
            recommendation: r.recommendation,
            thinFile: r.thinFile.thinFile,
          };
        }),
      });
    });
}
