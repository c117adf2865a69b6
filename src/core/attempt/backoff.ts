// Retry delays: exponential backoff with symmetric jitter, and how a Retry-After header
// combines with it. Randomness is injected so every delay is reproducible in tests.

export interface BackoffPolicy {
  /** Delay after the first failed attempt, in ms. */
  initialBackoffMs: number;
  /** Growth factor per further failure (the API allows integers 1..10). */
  multiplier: number;
  /** Upper bound of any delay, jitter included, in ms. */
  maxBackoffMs: number;
  /** Jitter as a percentage of the base delay (0..100): the delay is uniform in base ± this. */
  jitterPercent: number;
}

/** The longest delay a Retry-After header can impose: the contract caps it at one hour. */
export const RETRY_AFTER_CAP_MS = 3_600_000;

/**
 * The delay before the next attempt after `failedAttempts` failures (1 after the first failure,
 * which waits initialBackoff). base = min(initial * multiplier^(failedAttempts-1), max); the
 * result is uniform in base ± jitterPercent%, clamped to [0, maxBackoffMs] and rounded to whole
 * ms. `random` returns a number in [0, 1) (Math.random in production). A failedAttempts below 1
 * (or not an integer) is treated as the nearest valid count rather than throwing: the delivery
 * path must not crash on a miscount.
 */
export function backoffDelay(failedAttempts: number, policy: BackoffPolicy, random: () => number): number {
  const max = Math.max(0, policy.maxBackoffMs);
  const base = baseDelay(failedAttempts, policy, max);
  const spread = (base * clamp(policy.jitterPercent, 0, 100)) / 100;
  const jittered = base + spread * (2 * clamp(random(), 0, 1) - 1);
  return Math.round(clamp(jittered, 0, max));
}

/**
 * The delay before the next attempt, honouring a Retry-After (already parsed to ms, or undefined
 * when the response had none, was not 429/503, or the subscription sets respectRetryAfter:
 * false): never shorter than the backoff, and Retry-After itself counts for at most one hour.
 * The cap bounds what a receiver can impose; a configured maxBackoff above one hour still applies.
 */
export function nextDelay(
  failedAttempts: number,
  policy: BackoffPolicy,
  random: () => number,
  retryAfterMs?: number,
): number {
  const backoff = backoffDelay(failedAttempts, policy, random);
  if (retryAfterMs === undefined || !Number.isFinite(retryAfterMs) || retryAfterMs <= 0) return backoff;
  return Math.max(backoff, Math.min(Math.round(retryAfterMs), RETRY_AFTER_CAP_MS));
}

function baseDelay(failedAttempts: number, policy: BackoffPolicy, max: number): number {
  const initial = Math.max(0, policy.initialBackoffMs);
  if (initial === 0) return 0;
  const failures = Number.isNaN(failedAttempts) ? 1 : Math.max(1, Math.floor(failedAttempts));
  // 1 ** Infinity is NaN in JavaScript, so a multiplier of 1 never exponentiates; a larger one may
  // reach Infinity for huge counts, which min() turns into max.
  const factor = policy.multiplier > 1 ? policy.multiplier ** (failures - 1) : 1;
  return Math.min(initial * factor, max);
}

function clamp(value: number, low: number, high: number): number {
  return Math.min(high, Math.max(low, value));
}
