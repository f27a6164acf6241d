import { type DestinationStream, type Logger, pino } from "pino";

export type { Logger };

/** Levels LOG_LEVEL takes (pino's). */
const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

/**
 * A JSON logger: one object per line on stdout (or `destination`). Header values, payment
 * signatures and keys are never passed to it; `redact` is a second guard for the field names
 * that could carry them.
 */
export function createLogger(options: { level?: string; destination?: DestinationStream } = {}): Logger {
  const level = options.level ?? levelFromEnv();
  return pino(
    {
      level,
      base: { service: "celo-wallet-reputation" },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: [
          "headers",
          "*.headers",
          "privateKey",
          "*.privateKey",
          "signature",
          "*.signature",
          "authorization",
          "*.authorization",
        ],
        censor: "[redacted]",
      },
    },
    options.destination,
  );
}

function levelFromEnv(): string {
  const level = process.env.LOG_LEVEL?.trim().toLowerCase();
  return level && (LOG_LEVELS as readonly string[]).includes(level) ? level : "info";
}

/** The process's logger (LOG_LEVEL), for code that has no app at hand. */
export const log: Logger = createLogger();
