import { describe, expect, it } from "vitest";
import { closedBreaker, type BreakerConfig, type BreakerState } from "./breaker.js";
import type { EndpointState } from "./endpoint-report.js";
import { healthConfig, healthyEndpoint, type HealthState } from "./health.js";
import { toRfc3339 } from "../rfc3339.js";
import { adoptRecord, claimExpiresAt, endpointTarget, fromLegacyRecord, mergeFailing, probeClaimedByOther, toRecord, writeAgain, type SharedEndpointRecord } from "./shared-endpoint.js";

const NOW = Date.UTC(2025, 5, 15, 12, 0, 0);
const cfg: BreakerConfig = { failureThreshold: 5, successThreshold: 1, cooldownMs: 60_000 };
const hcfg = healthConfig(600_000);
const o = { me: "replica-a", now: NOW, breaker: cfg, health: hcfg };
const URL = "https://hooks.acme.example/orders/s3cret-path?token=s3cret-query";
const UID = "0b9a3a6e-4d2f-4f0e-9a51-2f4c7d1e8b33";
const TARGET = endpointTarget(UID, URL);

const closed = (consecutiveFailures = 0): BreakerState => ({ ...closedBreaker, consecutiveFailures });
const open = (nextProbeAt: number, consecutiveFailures = 5): BreakerState => ({ state: "Open", consecutiveFailures, halfOpenSuccesses: 0, openedAt: nextProbeAt - 60_000, nextProbeAt, probeInFlight: false });
const halfOpen = (probeInFlight: boolean): BreakerState => ({ state: "HalfOpen", consecutiveFailures: 5, halfOpenSuccesses: 0, openedAt: NOW - 60_000, probeInFlight });
const healthy = (over: Partial<HealthState> = {}): HealthState => ({ ...healthyEndpoint, totalAttempts: 40, totalFailures: 3, ...over });
const disabled = (nextProbeAt: number, over: Partial<HealthState> = {}): HealthState => ({ ...healthy(), state: "Disabled", consecutiveFailures: 1, disabledReason: "Gone", nextProbeAt, ...over });

const record = (s: EndpointState, by = "replica-b", probeUntil?: number): SharedEndpointRecord => toRecord(s, { subscription: "shop/acme", target: TARGET, by, now: NOW, ...(probeUntil !== undefined ? { probeUntil } : {}) });

describe("toRecord", () => {
  it("shares the gating state: Open until when, Disabled why and until when, a probe's claim; not Degraded", () => {
    expect(record({ breaker: open(NOW + 60_000), health: healthy({ state: "Degraded", consecutiveFailures: 4 }) })).toEqual({
      subscription: "shop/acme",
      target: TARGET,
      breaker: { state: "Open", consecutiveFailures: 5, openedAt: toRfc3339(NOW), nextProbeAt: toRfc3339(NOW + 60_000) },
      health: { state: "Healthy" },
      by: "replica-b",
      at: toRfc3339(NOW),
    });
    expect(record({ breaker: halfOpen(true), health: disabled(NOW + 600_000) }, "replica-b", NOW + 15_000)).toMatchObject({
      breaker: { state: "HalfOpen" },
      health: { state: "Disabled", reason: "Gone", nextProbeAt: toRfc3339(NOW + 600_000) },
      probe: { by: "replica-b", until: toRfc3339(NOW + 15_000) },
    });
  });
});

describe("endpointTarget", () => {
  it("tells URLs apart without holding them: keyed with the uid, so one URL has another target in another subscription", () => {
    expect(TARGET).toMatch(/^hmac-sha256:[A-Za-z0-9_-]{43}$/);
    expect(TARGET).not.toContain("s3cret");
    expect(endpointTarget(UID, URL)).toBe(TARGET);
    expect(endpointTarget(UID, `${URL}x`)).not.toBe(TARGET);
    expect(endpointTarget("another-uid", URL)).not.toBe(TARGET);
  });

  it("a record an earlier version wrote with its URL becomes the same record with its target; a current one is left as it is", () => {
    const current = record({ breaker: open(NOW + 60_000), health: healthy() });
    const { target: _t, ...rest } = current;
    const legacy = { ...rest, url: URL };
    expect(fromLegacyRecord(UID, legacy)).toEqual(current);
    expect(JSON.stringify(fromLegacyRecord(UID, legacy))).not.toContain("s3cret");
    expect(fromLegacyRecord(UID, current)).toBeUndefined();
  });
});

describe("adoptRecord", () => {
  it("another replica's Open breaker is taken with its cooldown; the longer failure streak is kept", () => {
    const next = adoptRecord({ breaker: closed(2), health: healthy() }, record({ breaker: open(NOW + 30_000), health: healthy() }), o);
    expect(next.breaker).toMatchObject({ state: "Open", nextProbeAt: NOW + 30_000, consecutiveFailures: 5, probeInFlight: false });
    expect(next.health).toEqual(healthy());
  });

  it("a probe claimed by another replica is in flight here too, until its claim expires", () => {
    const rec = record({ breaker: halfOpen(true), health: healthy() }, "replica-b", NOW + 15_000);
    expect(adoptRecord({ breaker: open(NOW - 1), health: healthy() }, rec, o).breaker).toMatchObject({ state: "HalfOpen", probeInFlight: true });
    expect(probeClaimedByOther(rec, "replica-a", NOW)).toBe(true);
    expect(claimExpiresAt(rec, "replica-a", NOW)).toBe(NOW + 15_000);
    expect(adoptRecord({ breaker: open(NOW - 1), health: healthy() }, rec, { ...o, now: NOW + 15_000 }).breaker).toMatchObject({ state: "HalfOpen", probeInFlight: false });
    expect(probeClaimedByOther(rec, "replica-b", NOW)).toBe(false);
  });

  it("its own claim read back keeps this replica's probe as it is", () => {
    const rec = record({ breaker: halfOpen(true), health: healthy() }, "replica-a", NOW + 15_000);
    expect(adoptRecord({ breaker: halfOpen(true), health: healthy() }, rec, o).breaker.probeInFlight).toBe(true);
    expect(adoptRecord({ breaker: halfOpen(false), health: healthy() }, rec, o).breaker.probeInFlight).toBe(false);
  });

  it("Closed after a successful probe closes an Open or HalfOpen breaker; a Closed one keeps its own streak", () => {
    const rec = record({ breaker: closed(), health: healthy() });
    expect(adoptRecord({ breaker: open(NOW + 1_000), health: healthy() }, rec, o).breaker).toEqual(closedBreaker);
    expect(adoptRecord({ breaker: halfOpen(false), health: healthy() }, rec, o).breaker).toEqual(closedBreaker);
    const mine = closed(3);
    expect(adoptRecord({ breaker: mine, health: healthy() }, rec, o).breaker).toBe(mine);
  });

  it("Disabled is taken with its reason and next probe, keeping this replica's totals; Healthy re-enables", () => {
    const next = adoptRecord({ breaker: closed(), health: healthy({ totalAttempts: 7 }) }, record({ breaker: closed(), health: disabled(NOW + 600_000) }), o);
    expect(next.health).toMatchObject({ state: "Disabled", disabledReason: "Gone", nextProbeAt: NOW + 600_000, totalAttempts: 7 });
    const back = adoptRecord(next, record({ breaker: closed(), health: healthy() }), o);
    expect(back.health).toEqual({ ...healthy({ totalAttempts: 7 }), consecutiveFailures: 0 });
    expect(back.health).not.toHaveProperty("nextProbeAt");
    const degraded = healthy({ state: "Degraded", consecutiveFailures: 4 });
    expect(adoptRecord({ breaker: closed(), health: degraded }, record({ breaker: closed(), health: healthy() }), o).health).toBe(degraded);
  });
});

describe("writeAgain and mergeFailing: who wins when another replica wrote first", () => {
  const ours = record({ breaker: open(NOW + 60_000), health: healthy() }, "replica-a");
  const theirsOpen = record({ breaker: open(NOW + 30_000), health: healthy() });
  const theirsClosed = record({ breaker: closed(), health: healthy() });

  it("a verdict and a reset are written again; a claim and a release yield", () => {
    expect(writeAgain("verdict", ours, theirsOpen)).toBe(true);
    expect(writeAgain("reset", ours, theirsOpen)).toBe(true);
    expect(writeAgain("claim", ours, theirsClosed)).toBe(false);
    expect(writeAgain("release", ours, theirsClosed)).toBe(false);
  });

  it("a failing replica yields to a record that already holds the endpoint back, and writes over one that does not", () => {
    expect(writeAgain("failing", ours, theirsOpen)).toBe(false);
    expect(writeAgain("failing", ours, theirsClosed)).toBe(true);
    expect(writeAgain("failing", ours, undefined)).toBe(true);
    const goneHere = record({ breaker: closed(), health: disabled(NOW + 600_000) }, "replica-a");
    expect(writeAgain("failing", goneHere, theirsOpen)).toBe(true);
    expect(writeAgain("failing", goneHere, record({ breaker: closed(), health: disabled(NOW + 1_000) }))).toBe(false);
  });

  it("merging keeps their cooldown and Disabled, and adds ours where they had none", () => {
    const goneHere = record({ breaker: closed(), health: disabled(NOW + 600_000) }, "replica-a");
    const merged = mergeFailing(goneHere, theirsOpen);
    expect(merged.breaker).toEqual(theirsOpen.breaker);
    expect(merged.health).toEqual(goneHere.health);
    expect(merged.by).toBe("replica-a");
  });
});
