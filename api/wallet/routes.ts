import type { RouteHandler } from "@hono/zod-openapi";
import { z } from "zod";
import type { IndexTarget } from "../../config/target.ts";
import { analyzeRoute } from "../analyze/route.ts";
import type { IndexDb } from "../db.ts";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute } from "../http/declare.ts";
import { walletRead } from "../http/payment.ts";
import { isoFromSeconds as iso } from "../money.ts";
import { x402Billing } from "../payments/billing.ts";
import { screenRoute } from "../screen/route.ts";
import { latestStatement, statementSignal } from "../statement/record.ts";
import type { ServiceDb } from "../store/store.ts";
import type { Assessment, WalletAssessor } from "./assess.ts";
import { scoreHistory } from "./history.ts";
import { indexedWallet } from "./indexed.ts";
import { MAX_AGE_MS } from "./max-age.ts";
import { analysisSchema, historySchema, signalSchema, signalsSchema, walletParams } from "./schema.ts";
import {
  resolveSignal,
  SIGNAL_ALIASES,
  SIGNAL_NAMES,
  SIGNAL_READ_NAMES,
  SIGNALS,
  type SignalContext,
} from "./signal-catalog.ts";
import { walletData } from "./wallet-data.ts";

const tags = ["Wallet"];
const walletErrors = { 400: ["invalid_address"], 404: ["wallet_not_indexed"] } as const;

export const analysisRoute = declareRoute("analysis", {
  method: "get",
  path: "/api/wallet/{address}/analysis",
  tags,
  summary: "The wallet's full walletData",
  description:
    "Balances, monthly series per token, top counterparties and the income breakdown the scores were computed from (docs/api.md).",
  request: { params: walletParams },
  ok: analysisSchema,
  errors: walletErrors,
  middleware: [indexedWallet],
  payment: walletRead,
  ownWalletFree: true,
});

export const signalsRoute = declareRoute("signals", {
  method: "get",
  path: "/api/wallet/{address}/signals",
  tags,
  summary: "Every named signal with its cache status",
  request: { params: walletParams },
  ok: signalsSchema,
  errors: walletErrors,
  middleware: [indexedWallet],
  payment: walletRead,
});

const aliasList = Object.entries(SIGNAL_ALIASES)
  .map(([alias, name]) => `${alias} (${name})`)
  .join(", ");

export const signalRoute = declareRoute("signal", {
  method: "get",
  path: "/api/wallet/{address}/signals/{signal}",
  tags,
  summary: "One named signal",
  description: `One signal of the wallet. The original service's names are accepted as aliases: ${aliasList}.`,
  request: {
    params: walletParams.extend({
      signal: z
        .enum(SIGNAL_READ_NAMES)
        .describe("Signal name (GET /api/wallet/{address}/signals lists them), or an alias"),
    }),
  },
  ok: signalSchema,
  errors: { 400: ["invalid_address"], 404: ["unknown_signal", "wallet_not_indexed"] },
  middleware: [indexedWallet],
  payment: walletRead,
  freeAfter: [screenRoute, analyzeRoute, analysisRoute, signalsRoute],
});

export const historyRoute = declareRoute("history", {
  method: "get",
  path: "/api/wallet/{address}/history",
  tags,
  summary: "Scores at each of the last 12 month ends",
  description: "Each month end scored point in time, on the year of transfers before it.",
  request: { params: walletParams },
  ok: historySchema,
  errors: walletErrors,
  middleware: [indexedWallet],
  payment: walletRead,
});

export type WalletRouteDeps = {
  db: IndexDb;
  target: Pick<IndexTarget, "tokens" | "schema">;
  assessor: WalletAssessor;
  store?: Promise<ServiceDb>;
};

/** What signals read from the service store: the wallet's latest statement. */
const signalContext = async (store: Promise<ServiceDb> | undefined, wallet: string): Promise<SignalContext> => ({
  latestStatement: store ? statementSignal(await latestStatement(await store, wallet)) : null,
});

const dataAsOf = (a: Assessment) => ({ block: a.asOf.block, time: iso(a.asOf.timestamp) });
const cacheStatus = (a: Assessment) => ({
  cached: a.cached,
  cachedAt: new Date(a.computedAt).toISOString(),
  expiresAt: new Date(a.computedAt + MAX_AGE_MS).toISOString(),
  invalidatedBy: "any newly indexed transfer of this wallet",
});

export const analysisHandler =
  ({ db, target, assessor }: WalletRouteDeps): RouteHandler<typeof analysisRoute, AppEnv> =>
  async (c) => {
    const a = await assessor.assess(c.req.valid("param").address);
    const data = await walletData(db, target, a);
    return c.json(
      {
        walletAddress: a.facts.address,
        modelVersion: a.result.modelVersion,
        dataAsOf: dataAsOf(a),
        x402Billing: x402Billing(await c.var.billing),
        cached: a.cached,
        walletData: data,
      },
      200,
    );
  };

export const signalsHandler =
  ({ assessor, store }: WalletRouteDeps): RouteHandler<typeof signalsRoute, AppEnv> =>
  async (c) => {
    const { address } = c.req.valid("param");
    const [a, ctx] = await Promise.all([assessor.assess(address), signalContext(store, address)]);
    return c.json(
      {
        walletAddress: a.facts.address,
        modelVersion: a.result.modelVersion,
        dataAsOf: dataAsOf(a),
        x402Billing: x402Billing(await c.var.billing),
        cache: cacheStatus(a),
        signals: SIGNAL_NAMES.map((name) => ({
          name,
          value: SIGNALS[name].read(a, ctx),
          description: SIGNALS[name].description,
        })),
        aliases: SIGNAL_ALIASES,
      },
      200,
    );
  };

export const signalHandler =
  ({ assessor, store }: WalletRouteDeps): RouteHandler<typeof signalRoute, AppEnv> =>
  async (c) => {
    const { address, signal: asked } = c.req.valid("param");
    const name = resolveSignal(asked);
    const signal = SIGNALS[name];
    const [a, ctx] = await Promise.all([
      assessor.assess(address),
      name === "latestStatement" ? signalContext(store, address) : {},
    ]);
    const billing = await c.var.billing;
    return c.json(
      {
        walletAddress: address,
        name,
        value: signal.read(a, ctx),
        description: signal.description,
        modelVersion: a.result.modelVersion,
        dataAsOf: dataAsOf(a),
        x402Billing: x402Billing(billing),
        cache: cacheStatus(a),
        billing: { chargedUnits: billing.chargedUnits.toString(), freeRead: billing.waived },
      },
      200,
    );
  };

export const historyHandler =
  ({ db, target, assessor }: WalletRouteDeps): RouteHandler<typeof historyRoute, AppEnv> =>
  async (c) => {
    const current = await assessor.assess(c.req.valid("param").address);
    const history = await scoreHistory(db, target, current);
    return c.json(
      {
        walletAddress: current.facts.address,
        modelVersion: current.result.modelVersion,
        dataAsOf: dataAsOf(current),
        x402Billing: x402Billing(await c.var.billing),
        history,
      },
      200,
    );
  };
