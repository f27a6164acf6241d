/**
 * What every route costs, keyed by route id (each route's declaration names its id; nothing else
 * about a route is written here). Amounts are in micro-USD, the smallest unit of both accepted
 * stablecoins (6 decimals).
 */
const CENT = 10_000n;

export const PRICES = {
  screen: CENT,
  /** Per wallet answered (api/screen/batch-route.ts): a batch costs what its single screens would. */
  screenBatch: CENT,
  analyze: CENT,
  chat: CENT,
  report: 10n * CENT,
  statement: CENT,
  analysis: CENT,
  signals: CENT,
  signal: CENT,
  history: CENT,
  /** Per wallet watched, for one period (MONITOR_PERIOD_MS): api/monitors/routes.ts. */
  monitor: CENT,
  /** One monitor, one period more. */
  monitorRenew: CENT,
  monitorList: 0n,
  monitorRead: 0n,
  monitorDelete: 0n,
  monitorEndpoints: 0n,
  monitorEndpointRotate: 0n,
  monitorEndpointRecover: 0n,
  monitorEvents: 0n,
  /** Per cent of credit bought (api/credit/routes.ts): a purchase costs what it buys. */
  credit: CENT,
  creditRead: 0n,
  creditToken: 0n,
  creditRevoke: 0n,
  verify: 0n,
  config: 0n,
  health: 0n,
  stats: 0n,
  openapi: 0n,
  ipfs: 0n,
  mcp: 0n,
  wellKnownX402: 0n,
  llms: 0n,
} as const satisfies Record<string, bigint>;

export type RouteId = keyof typeof PRICES;

/** A declared route's price (its operationId is its id in the table). */
export const priceOfRoute = (route: { operationId?: string }): bigint => PRICES[route.operationId as RouteId] ?? 0n;

/** What a monitor's price pays for: this long of watching, from creation or renewal. */
export const MONITOR_PERIOD_MS = 30 * 24 * 3_600_000;

/** A price in a token's smallest units (both accepted tokens have 6 decimals, like micro-USD). */
export function priceInUnits(microUsd: bigint, decimals: number): bigint {
  return decimals >= 6 ? microUsd * 10n ** BigInt(decimals - 6) : microUsd / 10n ** BigInt(6 - decimals);
}
