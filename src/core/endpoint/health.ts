// Endpoint health (Healthy -> Degraded -> Disabled) as a pure state machine, and its conversion
// to and from the subscription's status.health. A Disabled endpoint (410 Gone, or too many
// failures in a row) is probed once per interval until it answers again.

import { fromRfc3339, toRfc3339 } from "../rfc3339.js";

export type HealthStateName = "Healthy" | "Degraded" | "Disabled";
export type DisabledReason = "Gone" | "Failures";

export interface HealthState {
  state: HealthStateName;
  consecutiveFailures: number;
  lastSuccessAt?: number;
  lastFailureAt?: number;
  totalAttempts: number;
  totalFailures: number;
  /** Disabled only: why. */
  disabledReason?: DisabledReason;
  /** Disabled only: when the next probe may go, epoch ms. */
  nextProbeAt?: number;
}

export interface HealthConfig {
  /** Consecutive failures that make an endpoint Degraded (3). */
  degradedAfter: number;
  /** Consecutive failures that disable it (10); a 410 Gone disables it at once. */
  disabledAfter: number;
  /** Time between probes of a Disabled endpoint, ms (the breaker's cooldown is a good choice). */
  probeIntervalMs: number;
}

export const HEALTH_DEGRADED_AFTER = 3;
export const HEALTH_DISABLED_AFTER = 10;

/** The standard thresholds with the given probe interval. */
export function healthConfig(probeIntervalMs: number): HealthConfig {
  return { degradedAfter: HEALTH_DEGRADED_AFTER, disabledAfter: HEALTH_DISABLED_AFTER, probeIntervalMs };
}

export interface HealthTransition {
  from: HealthStateName;
  to: HealthStateName;
}

export interface HealthUpdate {
  state: HealthState;
  transition?: HealthTransition;
}

export type HealthDecision = "allow" | "probe" | "wait";

export interface HealthAdmission extends HealthUpdate {
  decision: HealthDecision;
  waitUntil?: number;
}

export type FailureKind = "failure" | "gone";

/** The contract's status.health, plus `reason` and `nextProbeAt` while Disabled. RFC 3339 times. */
export interface HealthStatus {
  state: HealthStateName;
  consecutiveFailures: number;
  lastSuccessAt?: string;
  lastFailureAt?: string;
  totalAttempts: number;
  totalFailures: number;
  reason?: DisabledReason;
  nextProbeAt?: string;
}

export const healthyEndpoint: Readonly<HealthState> = Object.freeze({
  state: "Healthy",
  consecutiveFailures: 0,
  totalAttempts: 0,
  totalFailures: 0,
});

/**
 * Whether an attempt may go now. A Disabled endpoint lets one probe through once nextProbeAt
 * has passed, and moves nextProbeAt one interval on at the same time: concurrent callers wait,
 * and a probe that never reports back (interrupted) cannot block the endpoint for good.
 */
export function admit(state: HealthState, now: number, cfg: HealthConfig): HealthAdmission {
  if (state.state !== "Disabled") return { decision: "allow", state };
  const nextProbeAt = state.nextProbeAt ?? now;
  if (now < nextProbeAt) return { decision: "wait", waitUntil: nextProbeAt, state };
  return { decision: "probe", state: { ...state, nextProbeAt: now + cfg.probeIntervalMs } };
}

/** One attempt succeeded: the endpoint is Healthy again, whatever it was. */
export function recordSuccess(state: HealthState, now: number): HealthUpdate {
  const next: HealthState = {
    state: "Healthy",
    consecutiveFailures: 0,
    lastSuccessAt: now,
    totalAttempts: state.totalAttempts + 1,
    totalFailures: state.totalFailures,
  };
  if (state.lastFailureAt !== undefined) next.lastFailureAt = state.lastFailureAt;
  return withTransition(state, next);
}

/**
 * One attempt failed. "gone" (410) disables the endpoint at once; otherwise it is Degraded at
 * degradedAfter and Disabled at disabledAfter consecutive failures. A failure while Disabled
 * (a failed probe) keeps it Disabled, with its first reason, for another interval.
 */
export function recordFailure(state: HealthState, now: number, kind: FailureKind, cfg: HealthConfig): HealthUpdate {
  const counted = {
    consecutiveFailures: state.consecutiveFailures + 1,
    lastFailureAt: now,
    totalAttempts: state.totalAttempts + 1,
    totalFailures: state.totalFailures + 1,
    ...(state.lastSuccessAt === undefined ? {} : { lastSuccessAt: state.lastSuccessAt }),
  };
  let next: HealthState;
  if (state.state === "Disabled" || kind === "gone" || counted.consecutiveFailures >= cfg.disabledAfter) {
    const disabledReason: DisabledReason =
      state.state === "Disabled" && state.disabledReason !== undefined ? state.disabledReason : kind === "gone" ? "Gone" : "Failures";
    next = { ...counted, state: "Disabled", disabledReason, nextProbeAt: now + cfg.probeIntervalMs };
  } else if (counted.consecutiveFailures >= cfg.degradedAfter) {
    next = { ...counted, state: "Degraded" };
  } else {
    next = { ...counted, state: "Healthy" };
  }
  return withTransition(state, next);
}

/** The status.health to write. */
export function toStatus(state: HealthState): HealthStatus {
  const status: HealthStatus = {
    state: state.state,
    consecutiveFailures: state.consecutiveFailures,
    totalAttempts: state.totalAttempts,
    totalFailures: state.totalFailures,
  };
  if (state.lastSuccessAt !== undefined) status.lastSuccessAt = toRfc3339(state.lastSuccessAt);
  if (state.lastFailureAt !== undefined) status.lastFailureAt = toRfc3339(state.lastFailureAt);
  if (state.state === "Disabled") {
    if (state.disabledReason !== undefined) status.reason = state.disabledReason;
    if (state.nextProbeAt !== undefined) status.nextProbeAt = toRfc3339(state.nextProbeAt);
  }
  return status;
}

/**
 * The health a (re)started operator resumes from status.health: Healthy when there is none. A
 * Disabled endpoint stays Disabled until its stored nextProbeAt (or one interval from now when
 * that cannot be read).
 */
export function fromStatus(status: HealthStatus | undefined, now: number, cfg: HealthConfig): HealthState {
  if (status === undefined) return { ...healthyEndpoint };
  const state: HealthState = {
    state: status.state === "Degraded" || status.state === "Disabled" ? status.state : "Healthy",
    consecutiveFailures: count(status.consecutiveFailures),
    totalAttempts: count(status.totalAttempts),
    totalFailures: count(status.totalFailures),
  };
  const lastSuccessAt = fromRfc3339(status.lastSuccessAt);
  const lastFailureAt = fromRfc3339(status.lastFailureAt);
  if (lastSuccessAt !== undefined) state.lastSuccessAt = lastSuccessAt;
  if (lastFailureAt !== undefined) state.lastFailureAt = lastFailureAt;
  if (state.state === "Disabled") {
    state.disabledReason = status.reason === "Gone" ? "Gone" : "Failures";
    state.nextProbeAt = fromRfc3339(status.nextProbeAt) ?? now + cfg.probeIntervalMs;
  }
  return state;
}

function withTransition(prev: HealthState, next: HealthState): HealthUpdate {
  return prev.state === next.state ? { state: next } : { state: next, transition: { from: prev.state, to: next.state } };
}

function count(value: unknown): number {
  return typeof value === "number" && Number.isSafeInteger(value) && value > 0 ? value : 0;
}

/** The value of the webhook_endpoint_health gauge: 0 Healthy, 1 Degraded, 2 Disabled. */
export function healthGaugeValue(state: HealthStateName): 0 | 1 | 2 {
  return state === "Healthy" ? 0 : state === "Degraded" ? 1 : 2;
}
