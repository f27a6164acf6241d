import { Hono, type MiddlewareHandler } from "hono";
import { z } from "zod";
import { addressSchema } from "../../config/addresses.ts";
import type { IndexTarget } from "../../config/target.ts";
import type { IndexDb } from "../db.ts";
import { ApiError } from "../http/errors.ts";
import { type InputEnv, paramInput } from "../http/validate.ts";
import { isoFromSeconds as iso } from "../money.ts";
import { paid, type PaidEnv, type PaymentDeps } from "../payments/guard.ts";
import { DAY, WINDOW_DAYS } from "../scoring/facts.ts";
import { scoreWallet } from "../scoring/model.ts";
import { factsAt } from "../scoring/point-in-time.ts";
import { MAX_AGE_MS, type WalletAssessor } from "./assess.ts";
import { loadWalletFacts } from "./queries.ts";
import { SIGNAL_NAMES, SIGNALS } from "./signal-catalog.ts";
import { walletData } from "./wallet-data.ts";

export type WalletRouteDeps = { db: IndexDb; target: Pick<IndexTarget, "tokens" | "schema">; assessor: WalletAssessor; payments: PaymentDeps };

const walletParams = z.object({ address: addressSchema });
const signalParams = z.object({ address: addressSchema, signal: z.string() });
type WalletParams = z.infer<typeof signalParams>;

/** Unknown signal names are a 404 before any payment is asked for. */
const knownSignal: MiddlewareHandler<InputEnv<WalletParams>> = async (c, next) => {
  const name = c.get("input").signal;
  if (!SIGNALS[name]) throw new ApiError(404, "unknown_signal", `No signal named "${name}". Signals: ${SIGNAL_NAMES.join(", ")}.`, { signals: SIGNAL_NAMES });
  await next();
};

/** GET /api/wallet/{address}/…: the analysis, the named signals and the score history, each paid per call. */
export function walletRoutes({ db, target, assessor, payments }: WalletRouteDeps) {
  const dataAsOf = (a: { asOf: { block: number; timestamp: number } }) => ({ block: a.asOf.block, time: iso(a.asOf.timestamp) });
  const cacheStatus = (a: { cached: boolean; computedAt: number }) => ({
    cached: a.cached,
    cachedAt: new Date(a.computedAt).toISOString(),
    expiresAt: new Date(a.computedAt + MAX_AGE_MS).toISOString(),
    invalidatedBy: "any newly indexed transfer of this wallet",
  });

  const wallet = paramInput(walletParams, "invalid_address");
  const indexed = assessor.indexedOnly();
  return new Hono<PaidEnv & InputEnv<WalletParams>>()
    .get("/:address/analysis", wallet, indexed, paid("analysis", payments), async (c) => {
      const a = await assessor.assess(c.get("input").address);
      return c.json({ walletAddress: a.facts.address, modelVersion: a.result.modelVersion, dataAsOf: dataAsOf(a), cached: a.cached, walletData: await walletData(db, target, a) });
    })
    .get("/:address/signals", wallet, indexed, paid("signals", payments), async (c) => {
      const a = await assessor.assess(c.get("input").address);
      return c.json({
        walletAddress: a.facts.address,
        modelVersion: a.result.modelVersion,
        dataAsOf: dataAsOf(a),
        cache: cacheStatus(a),
        signals: SIGNAL_NAMES.map((name) => ({ name, value: SIGNALS[name]!.read(a), description: SIGNALS[name]!.description })),
      });
    })
    .get("/:address/signals/:signal", paramInput(signalParams, "invalid_address"), knownSignal, indexed, paid("signal", payments), async (c) => {
      const { address, signal: name } = c.get("input");
      const signal = SIGNALS[name]!;
      const a = await assessor.assess(address);
      const { chargedUnits, waived } = c.get("billing");
      return c.json({
        walletAddress: address,
        name,
        value: signal.read(a),
        description: signal.description,
        modelVersion: a.result.modelVersion,
        dataAsOf: dataAsOf(a),
        cache: cacheStatus(a),
        billing: { chargedUnits: chargedUnits.toString(), freeRead: waived },
      });
    })
    .get("/:address/history", wallet, indexed, paid("history", payments), async (c) => {
      const current = await assessor.assess(c.get("input").address);
      // Two years of transfers: each month end is scored on the year before it.
      const { facts } = await loadWalletFacts(db, target.schema, current.facts.address, { windowDays: 2 * WINDOW_DAYS });
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
