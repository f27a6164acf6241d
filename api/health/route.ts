import { Hono } from "hono";
import { formatEther, type PublicClient } from "viem";
import type { IndexTarget } from "../../config/target.ts";
import type { IndexDb } from "../db.ts";
import { withTimeout } from "../http/timeout.ts";
import type { Payments } from "../payments/payments.ts";
import { indexedHead } from "../stats/queries.ts";

export type HealthDeps = {
  db: IndexDb;
  target: Pick<IndexTarget, "schema">;
  chain?: Pick<PublicClient, "getBlock">;
  payments: Payments;
};

type Status = "ok" | "degraded" | "down";
type Check = { status: Status; latencyMs: number; error?: string } & Record<string, unknown>;

/** Below this the relayer can still settle, but not for long: the operator should top it up. */
const LOW_GAS_WEI = 10n ** 17n; // 0.1 CELO
/** The index is "degraded" when it is this many blocks behind the chain (about a minute on Celo). */
const LAG_DEGRADED_BLOCKS = 60n;

async function check(run: () => Promise<{ status: Status } & Record<string, unknown>>): Promise<Check> {
  const t0 = performance.now();
  try {
    const result = await withTimeout(run(), 3_000);
    return { ...result, status: result.status, latencyMs: Math.round(performance.now() - t0) };
  } catch (error) {
    return { status: "down", latencyMs: Math.round(performance.now() - t0), error: (error as Error).message.split("\n")[0] };
  }
}

/** GET /api/health/integrations: the chain, the index, the service store and settlement; free. */
export function healthRoutes({ db, target, chain, payments }: HealthDeps) {
  return new Hono().get("/integrations", async (c) => {
    const [rpc, store, settlement] = await Promise.all([
      check(async () => {
        if (!chain) throw new Error("no chain client configured");
        const head = await chain.getBlock({ blockTag: "latest" });
        return { status: "ok", headBlock: Number(head.number) };
      }),
      check(async () => {
        await payments.ledger.ping();
        return { status: "ok" };
      }),
      check(async () => {
        const { facilitator } = payments;
        if (facilitator.mode === "facilitator") {
          const supported = await facilitator.getSupported();
          const celo = supported.kinds.some((k) => k.network === payments.settings.network && k.scheme === "exact");
          return { status: celo ? "ok" : "down", mode: "facilitator", supportsCelo: celo };
        }
        const balance = await payments.chain.getBalance({ address: facilitator.relayer! });
        return { status: balance === 0n ? "down" : balance < LOW_GAS_WEI ? "degraded" : "ok", mode: "self", relayer: facilitator.relayer, relayerGasCelo: formatEther(balance) };
      }),
    ]);
    const indexer = await check(async () => {
      const indexed = await indexedHead(db, target.schema);
      if (!indexed) return { status: "degraded", latestIndexedBlock: null, note: "nothing indexed yet" };
      const lag = typeof rpc.headBlock === "number" ? BigInt(rpc.headBlock) - indexed.blockNumber : null;
      return { status: lag !== null && lag > LAG_DEGRADED_BLOCKS ? "degraded" : "ok", latestIndexedBlock: Number(indexed.blockNumber), lagBlocks: lag === null ? null : Number(lag) };
    });
    const integrations = { rpc, indexer, serviceStore: store, settlement };
    const statuses = Object.values(integrations).map((i) => i.status);
    const status: Status = statuses.includes("down") ? "down" : statuses.includes("degraded") ? "degraded" : "ok";
    return c.json({ status, checkedAt: new Date().toISOString(), integrations }, status === "down" ? 503 : 200);
  });
}
