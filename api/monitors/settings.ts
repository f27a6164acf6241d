import { type Env, readEnv } from "../../config/env.ts";
import type { ServiceDb } from "../store/store.ts";

/** Limits and the SSRF guard's setting, per owner (the wallet that paid for the monitors). */
export type MonitorSettings = {
  /** Webhook endpoints may point at loopback, private and link-local addresses (MONITOR_ALLOW_PRIVATE_ENDPOINTS). */
  allowPrivateEndpoints: boolean;
  /** Most active monitors per owner (MONITOR_MAX_WALLETS_PER_OWNER). */
  maxWalletsPerOwner: number;
};

/** Most webhook endpoints per owner. */
export const MAX_ENDPOINTS_PER_OWNER = 10;

/** From the environment: private endpoints are allowed on the devnet (no PONDER_RPC_URL_42220) unless set off. */
export function monitorSettings(env: Env = readEnv()): MonitorSettings {
  return {
    allowPrivateEndpoints: (env.MONITOR_ALLOW_PRIVATE_ENDPOINTS ?? (env.PONDER_RPC_URL_42220 ? "off" : "on")) === "on",
    maxWalletsPerOwner: env.MONITOR_MAX_WALLETS_PER_OWNER,
  };
}

/** What the monitor routes read from `c.var.monitors` (set by createApp): the service store and the settings. */
export type MonitorServices = { store?: Promise<ServiceDb>; settings: MonitorSettings };
