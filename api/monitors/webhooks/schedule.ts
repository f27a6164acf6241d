const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/**
 * When each attempt is made, counted from the failure before it: the first at once, the last
 * about 3 days and 3 hours after the first. After the last one fails the delivery is `failed`.
 */
const ATTEMPT_DELAYS_MS = [
  0,
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  14 * HOUR,
  20 * HOUR,
  24 * HOUR,
];

/** Each delay is spread by ±20 %, so that the retries of many messages that failed together do not arrive together. */
const JITTER = 0.2;
/** The most a receiver's Retry-After may hold a message back. */
const MAX_RETRY_AFTER_MS = 24 * HOUR;

/**
 * When the next attempt is due after `attempts` attempts have failed (the one just made
 * included), or null when the schedule is spent. `retryAfterMs` (a 429 or 503's Retry-After)
 * holds it back at least that long, up to a day.
 */
export function nextAttemptAt(
  attempts: number,
  now: Date,
  retryAfterMs?: number,
  random: () => number = Math.random,
): Date | null {
  const base = ATTEMPT_DELAYS_MS[attempts];
  if (base === undefined) return null;
  const delay = base * (1 - JITTER + 2 * JITTER * random());
  const floor = retryAfterMs === undefined ? 0 : Math.min(retryAfterMs, MAX_RETRY_AFTER_MS);
  return new Date(now.getTime() + Math.max(delay, floor));
}

/** A Retry-After header (delay in seconds, or an HTTP date) as milliseconds from `now`; undefined when absent or unreadable. */
export function retryAfterMs(header: string | null, now: Date): number | undefined {
  const value = header?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value) * SECOND;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now.getTime());
}
