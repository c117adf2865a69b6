// What a delivery that is due but held by its endpoint tells the user: the Succeeded condition
// (status Unknown) names what it waits for and since when. Endpoint-wide holds (health Disabled,
// breaker Open, a Retry-After hold) are written at once; throttling (slots, rate limit) only once the delivery is
// overdue by THROTTLE_REPORT_AFTER_MS, so a busy endpoint does not pay a status write per
// delivery for a wait of milliseconds. Pure.
import type { Action } from "./plan.js";
import { toRfc3339 } from "../rfc3339.js";

export type EndpointWaitReason = "EndpointDisabled" | "BreakerOpen" | "EndpointThrottled" | "EndpointBusy" | "OperatorBusy" | "RateLimited";

/** A due delivery held this long by slots or the rate limit gets a condition saying so. */
export const THROTTLE_REPORT_AFTER_MS = 10_000;

export interface WaitContext {
  now: number;
  /** How long the delivery has been due (now - nextAttemptAt, or - creation when never tried). */
  overdueMs: number;
  maxInFlight: number;
  ratePerSecond?: number;
}

export function endpointWait(action: Action, c: WaitContext): { reason: EndpointWaitReason; message: string } | undefined {
  const since = `since ${toRfc3339(c.now)}`;
  if (action.type === "WaitUntil" && action.why === "disabled") {
    return { reason: "EndpointDisabled", message: `waiting for the endpoint, disabled after repeated failures (see the subscription's EndpointHealthy condition); next probe at ${toRfc3339(action.at)}; waiting ${since}` };
  }
  if (action.type === "WaitUntil" && action.why === "throttled") {
    return { reason: "EndpointThrottled", message: `waiting for the endpoint, which asked for no requests before ${toRfc3339(action.at)} (429 or 503 with Retry-After; see the subscription's EndpointThrottled condition); waiting ${since}` };
  }
  if ((action.type === "WaitUntil" && action.why === "breaker") || (action.type === "Park" && action.why === "probe")) {
    const next = action.type === "WaitUntil" ? `; next probe at ${toRfc3339(action.at)}` : "; a probe request is in flight";
    return { reason: "BreakerOpen", message: `waiting for the endpoint's circuit breaker to close${next}; waiting ${since}` };
  }
  if (c.overdueMs < THROTTLE_REPORT_AFTER_MS) return undefined;
  if (action.type === "Park" && action.why === "endpoint") {
    return { reason: "EndpointBusy", message: `waiting for one of the endpoint's ${c.maxInFlight} request slots (maxInFlight); waiting ${since}` };
  }
  if (action.type === "Park" && action.why === "global") {
    return { reason: "OperatorBusy", message: `waiting for one of the operator's request slots (WEBHOOK_MAX_IN_FLIGHT, shared fairly between namespaces); waiting ${since}` };
  }
  if (action.type === "WaitUntil" && action.why === "rate") {
    return { reason: "RateLimited", message: `waiting for the subscription's rate limit (${c.ratePerSecond ?? "?"}/s); waiting ${since}` };
  }
  return undefined;
}
