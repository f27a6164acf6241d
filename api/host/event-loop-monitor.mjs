// Preloaded into every Ponder process the service starts (NODE_OPTIONS: api/host/ponder-process.ts,
// and package.json's `serve` and `dev:ponder`). Ponder 0.17.7 has prom-client sample the event
// loop's delay every millisecond (internal/metrics.js: eventLoopMonitoringPrecision: 1): a libuv
// timer that wakes the process a thousand times a second for as long as it runs, busy or idle. An
// idle indexer spent 1.85 CPU-s in 20 s, 1.35 with this (2026-12-02, Postgres, polling every 200 ms).
// The lag metrics stay, sampled at prom-client's own default, every 10 ms.
import perfHooks from "node:perf_hooks";

/** The finest sampling interval a process may ask for (prom-client's default). */
const MIN_RESOLUTION_MS = 10;

const monitor = perfHooks.monitorEventLoopDelay;
perfHooks.monitorEventLoopDelay = (options = {}) =>
  monitor({ ...options, resolution: Math.max(options.resolution ?? MIN_RESOLUTION_MS, MIN_RESOLUTION_MS) });
