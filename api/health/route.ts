import type { RouteHandler } from "@hono/zod-openapi";
import { formatEther, type PublicClient, withTimeout } from "viem";
import { z } from "zod";
import { LOW_GAS_WEI } from "../../config/celo.ts";
import { firstLine } from "../../shared/async.ts";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute } from "../http/declare.ts";
import type { IndexState } from "../indexing/state.ts";
import type { IpfsNode } from "../ipfs/node.ts";
import type { ReporterClient } from "../passport/reporter.ts";
import type { PaymentCore } from "../payments/core.ts";
import { STALE_PENDING_MS } from "../payments/ledger/ledger.ts";

const statusSchema = z.enum(["ok", "degraded", "down"]);
type Status = z.infer<typeof statusSchema>;
const checkSchema = z.object({ status: statusSchema, latencyMs: z.number(), error: z.string().optional() }).loose();
type Check = z.infer<typeof checkSchema>;

const healthSchema = z.object({
  status: statusSchema.describe("down when any integration is down (answered with 503), degraded when one is degraded"),
  checkedAt: z.iso.datetime(),
  integrations: z.object({
    rpc: checkSchema.describe("The chain: its head block"),
    indexer: checkSchema.describe(
      "The index: down while it cannot back a paid answer (backfill running, crash recovery, more than MAX_LAG_BLOCKS behind the head), with where indexing stands",
    ),
    serviceStore: checkSchema.describe("The service store (payment ledger)"),
    payments: checkSchema.describe(
      `Payments whose outcome is unknown: degraded when one has been pending over ${STALE_PENDING_MS / 60_000} minutes`,
    ),
    settlement: checkSchema.describe("Self-settlement: relayer gas; or the remote facilitator's support for Celo"),
    ipfs: checkSchema.describe(
      "The IPFS node: its blockstore takes a write (a fixed probe, pinned once) and how many CIDs are pinned",
    ),
    reporter: checkSchema.describe(
      "The passport reporter: contract code present, the key holds the reporter role, and has gas (degraded when not configured)",
    ),
  }),
});

export const healthRoute = declareRoute("health", {
  method: "get",
  path: "/api/health/integrations",
  tags: ["Service"],
  summary: "Health of the chain, index, service store and settlement",
  description: "Each integration's status and latency. Answers 503, with the same report, when one is down. Free.",
  ok: healthSchema,
  rateLimited: true,
  alsoAnswers: { 503: { description: "An integration is down (the same report)", schema: healthSchema } },
});

export type HealthDeps = {
  chain?: Pick<PublicClient, "getBlock">;
  index: IndexState;
  payments: PaymentCore;
  ipfs?: Promise<IpfsNode>;
  reporter?: ReporterClient;
};

/** How long an integration may take to answer before it is reported down. */
const CHECK_TIMEOUT_MS = 3_000;
/**
 * The IPFS node opens on its first use (api/ipfs/open.ts: Helia and its stores, a second, several
 * under load): until it has answered once, and for at most this long, a check it is too slow for
 * says it is opening (degraded) rather than down.
 */
const IPFS_OPENING_GRACE_MS = 60_000;

type Result = { status: Status } & Record<string, unknown>;

/** `slow`: what a check that timed out reports instead of down (nothing: down). */
async function check(run: () => Promise<Result>, slow?: () => Result | undefined): Promise<Check> {
  const t0 = performance.now();
  const timedOut = new Error(`timeout after ${CHECK_TIMEOUT_MS} ms`);
  try {
    const result = await withTimeout(run, { timeout: CHECK_TIMEOUT_MS, errorInstance: timedOut });
    return { ...result, status: result.status, latencyMs: Math.round(performance.now() - t0) };
  } catch (error) {
    const instead = error === timedOut ? slow?.() : undefined;
    if (instead) return { ...instead, latencyMs: Math.round(performance.now() - t0) };
    return { status: "down", latencyMs: Math.round(performance.now() - t0), error: firstLine(error) };
  }
}

export function healthHandler({
  chain,
  index,
  payments,
  ipfs,
  reporter,
}: HealthDeps): RouteHandler<typeof healthRoute, AppEnv> {
  // Until the node has answered once, the checks may be waiting for it to open.
  let ipfsAnswered = false;
  let ipfsAskedSince: number | undefined;
  return async (c) => {
    const [rpc, store, settlement, unsettled, ipfsCheck, reporterCheck] = await Promise.all([
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
        return {
          status: balance === 0n ? "down" : balance < LOW_GAS_WEI ? "degraded" : "ok",
          mode: "self",
          relayer: facilitator.relayer,
          relayerGasCelo: formatEther(balance),
        };
      }),
      check(async () => {
        const stale = await payments.ledger.stalePending(STALE_PENDING_MS);
        return {
          status: stale.count > 0 ? "degraded" : "ok",
          stalePending: stale.count,
          oldestPendingSince: stale.oldest?.toISOString() ?? null,
        };
      }),
      check(
        async () => {
          if (!ipfs) throw new Error("no IPFS node configured");
          ipfsAskedSince ??= Date.now();
          const node = await ipfs;
          const probe = await node.add(new TextEncoder().encode("celo-wallet-reputation health probe\n"));
          ipfsAnswered = true;
          return { status: "ok", writable: true, probe, pinnedCount: await node.pinnedCount() };
        },
        () =>
          !ipfsAnswered && Date.now() - ipfsAskedSince! < IPFS_OPENING_GRACE_MS
            ? { status: "degraded", opening: true, note: "the node opens on its first use, and is opening" }
            : undefined,
      ),
      check(async () => {
        if (!reporter) return { status: "degraded", configured: false, note: "no reporter configured" };
        return reporter.health();
      }),
    ]);
    // Paid routes answer exactly when this is ok.
    const indexer = await check(async () => {
      const { indexedBlock, headBlock, ...state } = await index.status();
      return {
        ...state,
        status: state.current ? "ok" : "down",
        latestIndexedBlock: indexedBlock?.number ?? null,
        headBlock: headBlock?.number ?? null,
      };
    });
    const integrations = {
      rpc,
      indexer,
      serviceStore: store,
      settlement,
      payments: unsettled,
      ipfs: ipfsCheck,
      reporter: reporterCheck,
    };
    const statuses = Object.values(integrations).map((i) => i.status);
    const status: Status = statuses.includes("down") ? "down" : statuses.includes("degraded") ? "degraded" : "ok";
    const report = { status, checkedAt: new Date().toISOString(), integrations };
    return status === "down" ? c.json(report, 503) : c.json(report, 200);
  };
}
