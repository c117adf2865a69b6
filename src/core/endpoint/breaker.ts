// The per-endpoint circuit breaker as a pure state machine (Closed -> Open -> HalfOpen), and its
// conversion to and from the subscription's status.breaker so a restarted operator resumes it.
// Every function returns a new state (or the same object when nothing changed); none mutates.

import { fromRfc3339, toRfc3339 } from "../rfc3339.js";

export type BreakerStateName = "Closed" | "Open" | "HalfOpen";

export interface BreakerState {
  state: BreakerStateName;
  /** Consecutive failed attempts; reset by a success in Closed and on closing. */
  consecutiveFailures: number;
  /** Successes so far in this HalfOpen period. */
  halfOpenSuccesses: number;
  /** When the breaker last opened (kept through HalfOpen), epoch ms. */
  openedAt?: number;
  /** Open only: when the next probe may go, epoch ms. */
  nextProbeAt?: number;
  /** HalfOpen only: a probe has been granted and has not reported back. */
  probeInFlight: boolean;
}

export interface BreakerConfig {
  /** Consecutive failures that open a Closed breaker (1..100). */
  failureThreshold: number;
  /** Successful probes in HalfOpen that close it (1..20). */
  successThreshold: number;
  /** Open -> HalfOpen after this long, ms (1s..300s). */
  cooldownMs: number;
}

export interface BreakerTransition {
  from: BreakerStateName;
  to: BreakerStateName;
}

export interface BreakerUpdate {
  state: BreakerState;
  transition?: BreakerTransition;
}

/**
 * allow: send as usual. probe: send, this attempt is the breaker's single trial. wait: do not
 * send (no attempt spent); retry at waitUntil, or, when it is absent, when the probe in flight
 * reports back (the caller re-admits after recordSuccess/recordFailure/releaseProbe).
 */
export type AdmitDecision = "allow" | "probe" | "wait";

export interface Admission extends BreakerUpdate {
  decision: AdmitDecision;
  waitUntil?: number;
}

/** The contract's status.breaker. Timestamps are RFC 3339. */
export interface BreakerStatus {
  state: BreakerStateName;
  consecutiveFailures: number;
  openedAt?: string;
  nextProbeAt?: string;
}

export const closedBreaker: Readonly<BreakerState> = Object.freeze({
  state: "Closed",
  consecutiveFailures: 0,
  halfOpenSuccesses: 0,
  probeInFlight: false,
});

/** Whether an attempt may go now. Only Open -> HalfOpen happens here. */
export function admit(state: BreakerState, now: number, cfg: BreakerConfig): Admission {
  switch (state.state) {
    case "Closed":
      return { decision: "allow", state };
    case "Open": {
      const nextProbeAt = state.nextProbeAt ?? (state.openedAt ?? now) + cfg.cooldownMs;
      if (now < nextProbeAt) return { decision: "wait", waitUntil: nextProbeAt, state };
      return {
        decision: "probe",
        state: { ...withoutProbeTime(state), state: "HalfOpen", halfOpenSuccesses: 0, probeInFlight: true },
        transition: { from: "Open", to: "HalfOpen" },
      };
    }
    case "HalfOpen":
      if (state.probeInFlight) return { decision: "wait", state };
      return { decision: "probe", state: { ...state, probeInFlight: true } };
  }
}

/**
 * One attempt succeeded. Closed: the failure streak resets. HalfOpen: one more success; at
 * successThreshold the breaker closes. Open: ignored: the attempt was admitted before the
 * breaker opened, and one late success must not cut the cooldown short.
 */
export function recordSuccess(state: BreakerState, _now: number, cfg: BreakerConfig): BreakerUpdate {
  switch (state.state) {
    case "Closed":
      return state.consecutiveFailures === 0 ? { state } : { state: { ...state, consecutiveFailures: 0 } };
    case "Open":
      return { state };
    case "HalfOpen": {
      const successes = state.halfOpenSuccesses + 1;
      if (successes >= cfg.successThreshold) {
        return { state: { ...closedBreaker }, transition: { from: "HalfOpen", to: "Closed" } };
      }
      return { state: { ...state, halfOpenSuccesses: successes, consecutiveFailures: 0, probeInFlight: false } };
    }
  }
}

/**
 * One attempt failed. Closed: at failureThreshold consecutive failures the breaker opens.
 * HalfOpen: the probe failed, so it re-opens with a fresh cooldown. Open: the streak grows, the
 * cooldown is not extended (the attempt was admitted before the breaker opened).
 */
export function recordFailure(state: BreakerState, now: number, cfg: BreakerConfig): BreakerUpdate {
  const consecutiveFailures = state.consecutiveFailures + 1;
  switch (state.state) {
    case "Closed":
      if (consecutiveFailures >= cfg.failureThreshold) {
        return { state: opened(consecutiveFailures, now, cfg), transition: { from: "Closed", to: "Open" } };
      }
      return { state: { ...state, consecutiveFailures } };
    case "Open":
      return { state: { ...state, consecutiveFailures } };
    case "HalfOpen":
      return { state: opened(consecutiveFailures, now, cfg), transition: { from: "HalfOpen", to: "Open" } };
  }
}

/** A granted probe ended without a verdict (interrupted, never sent): let another probe go. */
export function releaseProbe(state: BreakerState): BreakerState {
  return state.state === "HalfOpen" && state.probeInFlight ? { ...state, probeInFlight: false } : state;
}

/** The status.breaker to write. */
export function toStatus(state: BreakerState): BreakerStatus {
  const status: BreakerStatus = { state: state.state, consecutiveFailures: state.consecutiveFailures };
  if (state.openedAt !== undefined) status.openedAt = toRfc3339(state.openedAt);
  if (state.state === "Open" && state.nextProbeAt !== undefined) status.nextProbeAt = toRfc3339(state.nextProbeAt);
  return status;
}

/**
 * The breaker a (re)started operator resumes from status.breaker: Closed when there is none.
 * An Open breaker stays Open until its stored nextProbeAt (or openedAt + cooldown, or now +
 * cooldown when neither can be read: never sooner than the user was told). A HalfOpen one resumes
 * with no probe in flight and its success count at 0 (the count is not in the status).
 */
export function fromStatus(status: BreakerStatus | undefined, now: number, cfg: BreakerConfig): BreakerState {
  if (status === undefined) return { ...closedBreaker };
  const consecutiveFailures = Number.isSafeInteger(status.consecutiveFailures) ? Math.max(0, status.consecutiveFailures) : 0;
  const openedAt = fromRfc3339(status.openedAt);
  switch (status.state) {
    case "Open": {
      const nextProbeAt = fromRfc3339(status.nextProbeAt) ?? (openedAt ?? now) + cfg.cooldownMs;
      return { state: "Open", consecutiveFailures, halfOpenSuccesses: 0, openedAt: openedAt ?? now, nextProbeAt, probeInFlight: false };
    }
    case "HalfOpen":
      return { state: "HalfOpen", consecutiveFailures, halfOpenSuccesses: 0, ...(openedAt === undefined ? {} : { openedAt }), probeInFlight: false };
    case "Closed":
      return { ...closedBreaker, consecutiveFailures };
    default:
      // An unknown state written by someone else: start Closed rather than refuse to deliver.
      return { ...closedBreaker };
  }
}

/** The value of the webhook_breaker_state gauge: 0 Closed, 1 Open, 2 HalfOpen. */
export function breakerGaugeValue(state: BreakerStateName): 0 | 1 | 2 {
  switch (state) {
    case "Closed":
      return 0;
    case "Open":
      return 1;
    case "HalfOpen":
      return 2;
  }
}

function opened(consecutiveFailures: number, now: number, cfg: BreakerConfig): BreakerState {
  return {
    state: "Open",
    consecutiveFailures,
    halfOpenSuccesses: 0,
    openedAt: now,
    nextProbeAt: now + cfg.cooldownMs,
    probeInFlight: false,
  };
}

function withoutProbeTime(state: BreakerState): BreakerState {
  const { nextProbeAt: _drop, ...rest } = state;
  return rest;
}

/**
 * What one attempt's report does to the breaker. Only the probe (or an explicit replay) speaks
 * for an Open or HalfOpen breaker: an attempt admitted while it was Closed may report after it
 * opened, and must neither re-open it (a second probe while the first is still out) nor count
 * as a HalfOpen success. The callers' one rule for late reports.
 */
export function recordReport(s: BreakerState, now: number, cfg: BreakerConfig, report: { success: boolean; probe: boolean; explicit?: boolean }): BreakerUpdate {
  if (!report.probe && !report.explicit && s.state !== "Closed") return { state: s };
  return report.success ? recordSuccess(s, now, cfg) : recordFailure(s, now, cfg);
}
