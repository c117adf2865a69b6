// The retry policy, in one place: whether a delivery has attempts left, and after a retryable
// failure when the next attempt is due (backoff with jitter, a receiver's Retry-After honoured
// on 429/503 when the subscription says so). Both transports use it: CR mode writes the time as
// status.nextAttemptAt; stream mode hands the delay to a negative acknowledgement.
import { nextDelay } from "./backoff.js";
import { isRetryAfterStatus } from "./classify.js";
import { parseRetryAfter } from "./retry-after.js";

export interface RetryPolicy {
  maxAttempts: number;
  initialBackoffMs: number;
  multiplier: number;
  maxBackoffMs: number;
  jitterPercent: number;
  respectRetryAfter: boolean;
}

/** What the receiver said that bears on the next delay. */
export interface RetryHint {
  responseStatus?: number;
  /** The raw Retry-After header. */
  retryAfter?: string;
}

export type RetryDecision =
  /** No attempt left: the delivery is dead-lettered as Exhausted. */
  | { kind: "exhausted" }
  /** Try again `delayMs` from now (at `at`). */
  | { kind: "retry"; delayMs: number; at: number };

/** Whether a delivery that made `attempts` counted attempts may make another. */
export function attemptsLeft(retry: Pick<RetryPolicy, "maxAttempts">, attempts: number): boolean {
  return attempts < retry.maxAttempts;
}

/**
 * After the `attempts`-th counted attempt failed in a retryable way: exhausted, or the delay
 * before the next one. `random` returns a number in [0, 1) (jitter).
 */
export function retryDecision(retry: RetryPolicy, attempts: number, hint: RetryHint, now: number, random: () => number): RetryDecision {
  if (!attemptsLeft(retry, attempts)) return { kind: "exhausted" };
  const retryAfterMs =
    retry.respectRetryAfter && hint.responseStatus !== undefined && isRetryAfterStatus(hint.responseStatus) ? parseRetryAfter(hint.retryAfter, now) : undefined;
  const delayMs = nextDelay(attempts, retry, random, retryAfterMs);
  return { kind: "retry", delayMs, at: now + delayMs };
}
