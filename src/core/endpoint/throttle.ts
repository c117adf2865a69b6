// Endpoint-wide backpressure: a 429 or 503 with Retry-After holds the whole endpoint, not only
// the delivery that got it. No new attempt (retry, first try, probe or replay) goes to that
// endpoint before the time it asked for, capped at one hour like the per-delivery delay. A hold
// that starts while one runs extends it (the later time wins) and keeps its start. Off with
// retry.respectRetryAfter: false. Pure: the endpoint registry keeps the state, plan() obeys it.
import { isRetryAfterStatus } from "../attempt/classify.js";
import { parseRetryAfter } from "../attempt/retry-after.js";

export interface Throttle {
  /** When the current hold began (epoch ms). */
  since: number;
  /** No attempt before this (epoch ms). */
  until: number;
  /** The status that asked for it (429 or 503) and the header as sent. */
  status: number;
  retryAfter: string;
}

/**
 * The endpoint's hold after an answer: extended or started by a 429/503 with a usable
 * Retry-After (a delay above zero), else unchanged. `respectRetryAfter` false: never held.
 */
export function nextThrottle(current: Throttle | undefined, answer: { responseStatus?: number; retryAfter?: string }, now: number, respectRetryAfter: boolean): Throttle | undefined {
  if (!respectRetryAfter || answer.responseStatus === undefined || !isRetryAfterStatus(answer.responseStatus)) return current;
  const ms = parseRetryAfter(answer.retryAfter, now);
  if (ms === undefined || ms <= 0) return current;
  const until = now + ms;
  const active = current !== undefined && current.until > now;
  if (active && current.until >= until) return current;
  return { since: active ? current.since : now, until, status: answer.responseStatus, retryAfter: answer.retryAfter!.trim().slice(0, 64) };
}

/** Whether the endpoint is held at `now`. */
export function isThrottled(t: Throttle | undefined, now: number): t is Throttle {
  return t !== undefined && t.until > now;
}
