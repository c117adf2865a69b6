// Configuration advice: settings the API accepts that work against each other. One so far: a
// circuit-breaker cooldown shorter than the largest delay of the retry schedule (such a breaker
// probes the endpoint sooner than the retries themselves would wait, so the probe is likely to
// meet the same outage and the breaker opens again at once). (spec.ordering in stream mode once
// had advice of its own: stream mode now orders published events, ordered-handoff.ts.) Pure: the subscription reconciler
// turns the advice into the ConfigurationAdvice condition and an Event, config/ into a start-up
// warning for WEBHOOK_CB_TIMEOUT_MS.
import { formatDuration } from "../api/duration.js";
import { backoffDelay, type BackoffPolicy } from "./attempt/backoff.js";
import type { ConditionInput } from "./conditions.js";
import type { Policy } from "./attempt/policy.js";

/** The subscription condition that carries advice (True while some applies). */
export const ADVICE_CONDITION = "ConfigurationAdvice";
export const ADVICE_REASONS = { cooldown: "CooldownShorterThanBackoff", none: "NoAdvice" } as const;

export interface RetrySchedule extends BackoffPolicy {
  /** Attempts in all, the first included: the schedule has maxAttempts - 1 delays. */
  maxAttempts: number;
}

/**
 * The longest delay `retry` can wait between two attempts, jitter included: the delay before the
 * last attempt (delays never shrink: the multiplier is at least 1), at the top of its jitter
 * band, capped at maxBackoff as the engine caps it (core/attempt/backoff.ts). 0 when there is no retry.
 */
export function largestRetryDelayMs(retry: RetrySchedule): number {
  if (!Number.isFinite(retry.maxAttempts) || retry.maxAttempts < 2) return 0;
  return backoffDelay(Math.floor(retry.maxAttempts) - 1, retry, () => 1);
}

export interface CooldownAdviceInput {
  cooldownMs: number;
  /** spec: the subscription's circuitBreaker.cooldown; default: WEBHOOK_CB_TIMEOUT_MS (it sets none). */
  cooldownFrom: "spec" | "default";
  retry: RetrySchedule;
}

export interface Advice {
  reason: (typeof ADVICE_REASONS)["cooldown"];
  message: string;
  cooldownMs: number;
  largestDelayMs: number;
}

/** Advice when the breaker's cooldown is shorter than the largest retry delay; undefined when it is not. */
export function cooldownAdvice(input: CooldownAdviceInput): Advice | undefined {
  const largest = largestRetryDelayMs(input.retry);
  if (!(input.cooldownMs < largest)) return undefined;
  const d = formatDuration;
  const cooldown = input.cooldownFrom === "spec" ? `circuitBreaker.cooldown ${d(input.cooldownMs)}` : `the breaker cooldown (WEBHOOK_CB_TIMEOUT_MS, ${d(input.cooldownMs)}: the subscription sets no circuitBreaker.cooldown)`;
  const fix = input.cooldownFrom === "spec" ? `set circuitBreaker.cooldown to at least ${d(largest)}` : `set circuitBreaker.cooldown (or WEBHOOK_CB_TIMEOUT_MS) to at least ${d(largest)}`;
  return {
    reason: ADVICE_REASONS.cooldown,
    cooldownMs: input.cooldownMs,
    largestDelayMs: largest,
    message:
      `${cooldown} is shorter than the largest retry delay, ${d(largest)} (${describeRetrySchedule(input.retry)}): ` +
      `an open breaker would probe sooner than the retries wait, and a probe into the same outage opens it again at once; ` +
      `${fix}, or lower retry.maxBackoff`,
  };
}

/** "6 attempts, delays from 1s times 2, capped at 30s, jitter 10%" */
export function describeRetrySchedule(r: RetrySchedule): string {
  const attempts = `${r.maxAttempts} attempts`;
  const growth = r.multiplier > 1 ? `from ${formatDuration(r.initialBackoffMs)} times ${r.multiplier}` : `${formatDuration(r.initialBackoffMs)} each`;
  return `${attempts}, delays ${growth}, capped at ${formatDuration(r.maxBackoffMs)}${r.jitterPercent > 0 ? `, jitter ${r.jitterPercent}%` : ""}`;
}

/**
 * The ConfigurationAdvice condition of a subscription: True while advice applies (reason
 * CooldownShorterThanBackoff), False (NoAdvice) otherwise, Unknown when the spec cannot be read.
 * `cooldownFromSpec`: the spec sets circuitBreaker.cooldown (else the policy holds the default).
 */
export function adviceCondition(policy: Policy | undefined, cooldownFromSpec: boolean): ConditionInput {
  if (!policy) return { type: ADVICE_CONDITION, status: "Unknown", reason: "InvalidSpec", message: "the spec could not be read (see Ready)" };
  const a = cooldownAdvice({ cooldownMs: policy.breaker.cooldownMs, cooldownFrom: cooldownFromSpec ? "spec" : "default", retry: policy.retry });
  if (a) return { type: ADVICE_CONDITION, status: "True", reason: a.reason, message: a.message };
  return { type: ADVICE_CONDITION, status: "False", reason: ADVICE_REASONS.none, message: "the breaker cooldown is at least the largest retry delay" };
}
