// What the replicas of one install share of an endpoint in stream mode, where every replica
// delivers: the breaker's and the health's gating state (Open until when, Disabled until when)
// and the probe one replica claimed. Each subscription has one record in a JetStream key-value
// bucket, written with compare-and-set (src/transports/stream/shared-endpoints.ts); this module is
// the pure part: the record of a replica's state, and what a replica adopts of a record.
//
// Failure streaks stay per replica: a replica opens its breaker after failureThreshold failures
// of its own, writes Open, and the others adopt it. With R replicas an endpoint may take up to
// R x failureThreshold failures before every replica holds back (docs/adr/0007).
import { createHmac } from "node:crypto";
import * as breaker from "./breaker.js";
import type { EndpointState } from "./endpoint-report.js";
import * as health from "./health.js";
import { fromRfc3339, toRfc3339 } from "../rfc3339.js";

export interface SharedEndpointRecord {
  /** namespace/name of the subscription (the record's key is its uid). */
  subscription: string;
  /** The URL the state describes, as endpointTarget(uid, url): a record of another URL is not adopted. */
  target: string;
  breaker: breaker.BreakerStatus;
  /** Disabled (why, and the next probe) or Healthy; Degraded is a replica's own view. */
  health: { state: "Healthy" | "Disabled"; reason?: health.DisabledReason; nextProbeAt?: string };
  /** The probe a replica claimed (an Open breaker's, or a Disabled endpoint's) and has not reported. */
  probe?: { by: string; until: string };
  /** The replica that wrote it, and when. */
  by: string;
  at: string;
}

/** Why a replica writes the record; decides who wins when another replica wrote first. */
export type SharedWrite =
  /** This replica's breaker opened (its own failure streak), or its endpoint became Disabled. */
  | "failing"
  /** This replica holds the probe just granted to it. */
  | "claim"
  /** The probe this replica claimed reported: its verdict (closed, open again, healthy, disabled again). */
  | "verdict"
  /** The probe this replica claimed ended without a verdict (interrupted, nothing sent). */
  | "release"
  /** An operator's reset (hookline.dev/reset-endpoint): Closed and Healthy. */
  | "reset";

/**
 * Which URL a record speaks of, without the URL: a URL may hold a secret in its path or query,
 * and the bucket is readable by whoever may read the stream. An HMAC keyed with the
 * subscription's uid: replicas compare it, no one can read the URL back, and two subscriptions
 * sending to one URL get different targets (a reader learns nothing by comparing them).
 */
export function endpointTarget(uid: string, url: string): string {
  return `hmac-sha256:${createHmac("sha256", uid).update(url).digest("base64url")}`;
}

/**
 * A record as an earlier version wrote it, with `url` where `target` now is: the same record
 * with its target and without the URL; undefined for a record of this version.
 */
export function fromLegacyRecord(uid: string, rec: SharedEndpointRecord | (Omit<SharedEndpointRecord, "target"> & { url: string })): SharedEndpointRecord | undefined {
  if (!("url" in rec) || typeof rec.url !== "string") return undefined;
  const { url, ...rest } = rec;
  return { ...rest, target: endpointTarget(uid, url) };
}

/** A replica's endpoint state as the shared record. `probeUntil`: a claim that lasts until then. */
export function toRecord(s: EndpointState, o: { subscription: string; target: string; by: string; now: number; probeUntil?: number }): SharedEndpointRecord {
  const hs = health.toStatus(s.health);
  return {
    subscription: o.subscription,
    target: o.target,
    breaker: breaker.toStatus(s.breaker),
    health:
      s.health.state === "Disabled" ?
        { state: "Disabled", ...(hs.reason ? { reason: hs.reason } : {}), ...(hs.nextProbeAt ? { nextProbeAt: hs.nextProbeAt } : {}) }
      : { state: "Healthy" },
    ...(o.probeUntil !== undefined ? { probe: { by: o.by, until: toRfc3339(o.probeUntil) } } : {}),
    by: o.by,
    at: toRfc3339(o.now),
  };
}

/** Whether a probe of the record is claimed by another replica and not expired. */
export function probeClaimedByOther(rec: SharedEndpointRecord, me: string, now: number): boolean {
  return rec.probe !== undefined && rec.probe.by !== me && (fromRfc3339(rec.probe.until) ?? 0) > now;
}

/** When the record's probe claim (by another replica) expires, if it has one. */
export function claimExpiresAt(rec: SharedEndpointRecord, me: string, now: number): number | undefined {
  return probeClaimedByOther(rec, me, now) ? fromRfc3339(rec.probe!.until) : undefined;
}

/**
 * What a replica holds after reading a record another replica wrote. Gating state is taken from
 * the record (Open until nextProbeAt, HalfOpen with the probe out, Closed; Disabled until
 * nextProbeAt, or no longer Disabled); the replica's own failure streak and totals are kept.
 */
export function adoptRecord(local: EndpointState, rec: SharedEndpointRecord, o: { me: string; now: number; breaker: breaker.BreakerConfig; health: health.HealthConfig }): EndpointState {
  return { breaker: adoptBreaker(local.breaker, rec, o), health: adoptHealth(local.health, rec, o) };
}

function adoptBreaker(local: breaker.BreakerState, rec: SharedEndpointRecord, o: { me: string; now: number; breaker: breaker.BreakerConfig }): breaker.BreakerState {
  const shared = breaker.fromStatus(rec.breaker, o.now, o.breaker);
  const streak = Math.max(local.consecutiveFailures, shared.consecutiveFailures);
  switch (shared.state) {
    case "Open":
      return { ...shared, consecutiveFailures: streak };
    case "HalfOpen": {
      const mine = rec.probe?.by === o.me;
      return {
        ...shared,
        consecutiveFailures: streak,
        halfOpenSuccesses: local.state === "HalfOpen" ? local.halfOpenSuccesses : 0,
        probeInFlight: probeClaimedByOther(rec, o.me, o.now) || (mine && local.probeInFlight),
      };
    }
    case "Closed":
      return local.state === "Closed" ? local : { ...breaker.closedBreaker };
  }
}

function adoptHealth(local: health.HealthState, rec: SharedEndpointRecord, o: { now: number; health: health.HealthConfig }): health.HealthState {
  const { disabledReason: _r, nextProbeAt: _n, ...rest } = local;
  if (rec.health.state === "Disabled") {
    return {
      ...rest,
      state: "Disabled",
      consecutiveFailures: local.consecutiveFailures,
      disabledReason: rec.health.reason === "Gone" ? "Gone" : "Failures",
      nextProbeAt: fromRfc3339(rec.health.nextProbeAt) ?? o.now + o.health.probeIntervalMs,
    };
  }
  return local.state === "Disabled" ? { ...rest, state: "Healthy", consecutiveFailures: 0 } : local;
}

/**
 * Another replica wrote `theirs` after the record this replica's write was based on: write
 * again on top of it (true), or take it as it is (false). A verdict and a reset speak for the
 * endpoint now; a failing replica yields to a record that already holds the endpoint back; a
 * claim or a release was about a record that no longer stands.
 */
export function writeAgain(kind: SharedWrite, ours: SharedEndpointRecord, theirs: SharedEndpointRecord | undefined): boolean {
  switch (kind) {
    case "verdict":
    case "reset":
      return true;
    case "claim":
    case "release":
      return false;
    case "failing": {
      if (!theirs) return true;
      const breakerHeld = theirs.breaker.state !== "Closed" || ours.breaker.state === "Closed";
      const healthHeld = theirs.health.state === "Disabled" || ours.health.state !== "Disabled";
      return !(breakerHeld && healthHeld);
    }
  }
}

/**
 * The record written again on top of `theirs` after a conflict: our breaker and health where we
 * move them, theirs where they already hold the endpoint back (a failing write never shortens
 * their cooldown), and no claim of ours.
 */
export function mergeFailing(ours: SharedEndpointRecord, theirs: SharedEndpointRecord): SharedEndpointRecord {
  return {
    ...ours,
    breaker: theirs.breaker.state !== "Closed" ? theirs.breaker : ours.breaker,
    health: theirs.health.state === "Disabled" ? theirs.health : ours.health,
    ...(theirs.probe ? { probe: theirs.probe } : {}),
  };
}
