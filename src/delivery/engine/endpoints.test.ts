import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { subscriptionSpecSchema, type SubscriptionSpecInput, type SubscriptionStatus } from "../../api/subscription.js";
import { closedBreaker } from "../../core/endpoint/breaker.js";
import { healthyEndpoint } from "../../core/endpoint/health.js";
import { plan, type EndpointCommit } from "../../core/attempt/plan.js";
import { resolvePolicy, type Policy } from "../../core/attempt/policy.js";
import { toRfc3339 } from "../../core/rfc3339.js";
import { EndpointRegistry, type Endpoint } from "./endpoints.js";

const NOW = Date.UTC(2025, 5, 15, 12, 0, 0);
const PROBE_INTERVAL = 600_000;

function policyOf(spec: Partial<SubscriptionSpecInput> = {}): Policy {
  return resolvePolicy(subscriptionSpecSchema.parse({ url: "https://hooks.acme.example/orders", ...spec }), {
    deliveryTimeoutMs: 10_000,
    breaker: { failureThreshold: 5, successThreshold: 1, cooldownMs: 60_000 },
  });
}

function setup(globalMax = 100) {
  const woken: string[] = [];
  const inFlightReports: number[] = [];
  const registry: EndpointRegistry & { park(ep: Endpoint, k: string, why: "endpoint" | "global" | "probe", wake?: () => void): void } = new EndpointRegistry({
    globalMax,
    healthProbeIntervalMs: PROBE_INTERVAL,
    defaults: { deliveryTimeoutMs: 10_000, breaker: { failureThreshold: 5, successThreshold: 1, cooldownMs: 60_000 } },
    wake: (k) => woken.push(k),
    onInFlight: (n) => inFlightReports.push(n),
  });
  // Parked keys carry their own wake; unless a test gives one, each reports itself to `woken`.
  const park = registry.park.bind(registry);
  registry.park = (ep, k, why, wake = () => woken.push(k)) => park(ep, k, why, wake);
  return { registry, woken, inFlightReports };
}

const commitOf = (ep: Endpoint): EndpointCommit => ({ breaker: ep.breaker, health: ep.health, bucket: ep.bucket });

function parkAll(registry: ReturnType<typeof setup>["registry"], ep: Endpoint, keys: string[], why: "endpoint" | "global" | "probe" = "endpoint") {
  for (const k of keys) registry.park(ep, k, why);
}

describe("EndpointRegistry: a parked key is woken by the function it was parked with", () => {
  it("a delivery and a stream message on one endpoint, and one parked globally, each go back to their own transport; the registry's wake is not used", () => {
    const { registry, woken } = setup(2);
    const ep = registry.ensure("shop/a", "uid-a", undefined, policyOf({ maxInFlight: 2 }), NOW);
    registry.acquire(ep, commitOf(ep));
    registry.acquire(ep, commitOf(ep));
    const cr: string[] = [];
    const stream: string[] = [];
    registry.park(ep, "shop/evt-1", "endpoint", () => cr.push("shop/evt-1"));
    registry.park(ep, "shop/stream:c:7", "endpoint", () => stream.push("shop/stream:c:7"));
    registry.park(ep, "shop/stream:c:8", "global", () => stream.push("shop/stream:c:8"));
    registry.release(ep, 2);
    registry.release(ep, 2);
    for (const k of ["shop/evt-1", "shop/stream:c:7", "shop/stream:c:8"]) registry.settle(k);
    expect(cr).toEqual(["shop/evt-1"]);
    expect(stream.sort()).toEqual(["shop/stream:c:7", "shop/stream:c:8"]);
    expect(woken).toEqual([]);
  });

  it("parked again with another function (a new stream reader for the same message), the latest one wakes it", () => {
    const { registry } = setup();
    const ep = registry.ensure("shop/a", "uid-a", undefined, policyOf(), NOW);
    const calls: string[] = [];
    registry.park(ep, "shop/stream:c:1", "probe", () => calls.push("old"));
    registry.park(ep, "shop/stream:c:1", "probe", () => calls.push("new"));
    registry.wakeEndpoint(ep);
    expect(calls).toEqual(["new"]);
  });
});

describe("EndpointRegistry: acquire and release", () => {
  it("counts requests in flight per endpoint and globally, reporting the global count", () => {
    const { registry, inFlightReports } = setup();
    const a = registry.ensure("shop/a", "uid-a", undefined, policyOf(), NOW);
    const b = registry.ensure("shop/b", "uid-b", undefined, policyOf(), NOW);
    registry.acquire(a, commitOf(a));
    registry.acquire(a, commitOf(a));
    registry.acquire(b, commitOf(b));
    expect([a.inFlight, b.inFlight, registry.inFlight]).toEqual([2, 1, 3]);
    expect(registry.view(a)).toMatchObject({ inFlight: 2, globalSlot: true, healthProbeIntervalMs: PROBE_INTERVAL });
    registry.release(a, 10);
    expect([a.inFlight, b.inFlight, registry.inFlight]).toEqual([1, 1, 2]);
    expect(inFlightReports).toEqual([1, 2, 3, 2]);
  });

  it("acquire commits the planned endpoint state", () => {
    const { registry } = setup();
    const ep = registry.ensure("shop/a", "uid", undefined, policyOf(), NOW);
    const commit: EndpointCommit = {
      breaker: { state: "HalfOpen", consecutiveFailures: 5, halfOpenSuccesses: 0, probeInFlight: true },
      health: { ...healthyEndpoint, totalAttempts: 3 },
      bucket: { tokens: 4, updatedAt: NOW },
    };
    registry.acquire(ep, commit);
    expect(ep.breaker).toBe(commit.breaker);
    expect(ep.health).toBe(commit.health);
    expect(ep.bucket).toBe(commit.bucket);
  });

  it("release never goes below zero", () => {
    const { registry } = setup();
    const ep = registry.ensure("shop/a", "uid", undefined, policyOf(), NOW);
    registry.release(ep, 10);
    expect(ep.inFlight).toBe(0);
    expect(registry.inFlight).toBe(0);
  });
});

describe("EndpointRegistry: parking and waking", () => {
  it.each([
    // maxInFlight, in flight before the release, parked, woken by one release
    [1, 1, 5, 1],
    [3, 3, 5, 1],
    [3, 1, 5, 3],
    [10, 1, 5, 5],
  ])("maxInFlight %i, %i in flight, %i parked: one release wakes %i, oldest first", (maxInFlight, inFlight, parked, expected) => {
    const { registry, woken } = setup();
    const ep = registry.ensure("shop/a", "uid", undefined, policyOf({ maxInFlight }), NOW);
    for (let i = 0; i < inFlight; i++) registry.acquire(ep, commitOf(ep));
    const keys = Array.from({ length: parked }, (_, i) => `shop/d${i}`);
    parkAll(registry, ep, keys);
    registry.release(ep, maxInFlight);
    expect(woken).toEqual(keys.slice(0, expected));
    expect(ep.parked.size).toBe(parked - expected);
  });

  it("kick after a woken delivery decided not to attempt wakes the next one, and only while slots are free", () => {
    const { registry, woken } = setup();
    const ep = registry.ensure("shop/a", "uid", undefined, policyOf({ maxInFlight: 1 }), NOW);
    registry.acquire(ep, commitOf(ep));
    parkAll(registry, ep, ["shop/d1", "shop/d2", "shop/d3"]);
    registry.kick(ep, 1);
    expect(woken).toEqual([]);
    registry.release(ep, 1);
    expect(woken).toEqual(["shop/d1"]);
    // d1 re-planned and got a WaitUntil (rate, backoff...): its slot is still free.
    registry.kick(ep, 1);
    expect(woken).toEqual(["shop/d1", "shop/d2"]);
    // d2 attempts: the slot is taken; a kick now wakes no one.
    registry.acquire(ep, commitOf(ep));
    registry.kick(ep, 1);
    expect(woken).toEqual(["shop/d1", "shop/d2"]);
    expect([...ep.parked.keys()]).toEqual(["shop/d3"]);
  });

  it("a delivery woken for an endpoint slot whose reconcile ends without taking it or parking again hands the slot on", () => {
    const { registry, woken } = setup();
    const ep = registry.ensure("shop/a", "uid", undefined, policyOf({ maxInFlight: 1 }), NOW);
    registry.acquire(ep, commitOf(ep), "shop/d0");
    parkAll(registry, ep, ["shop/d1", "shop/d2", "shop/d3"]);
    registry.release(ep, 1);
    expect(woken).toEqual(["shop/d1"]);
    // d1's reconcile returned early (deleted, waiting for the cache): its settle wakes d2.
    registry.settle("shop/d1");
    expect(woken).toEqual(["shop/d1", "shop/d2"]);
    // d2 takes the slot: settling it wakes no one; a second settle of d1 is a no-op.
    registry.acquire(ep, commitOf(ep), "shop/d2");
    registry.settle("shop/d2");
    registry.settle("shop/d1");
    expect(woken).toEqual(["shop/d1", "shop/d2"]);
    // d2 finishes: d3 is woken, parks again (the slot was taken meanwhile): settle hands on nothing.
    registry.release(ep, 1);
    expect(woken).toEqual(["shop/d1", "shop/d2", "shop/d3"]);
    registry.acquire(ep, commitOf(ep), "shop/other");
    registry.park(ep, "shop/d3", "endpoint");
    registry.settle("shop/d3");
    expect(woken).toEqual(["shop/d1", "shop/d2", "shop/d3"]);
    expect([...ep.parked.keys()]).toEqual(["shop/d3"]);
  });

  it("a key parked twice is woken once", () => {
    const { registry, woken } = setup();
    const ep = registry.ensure("shop/a", "uid", undefined, policyOf(), NOW);
    parkAll(registry, ep, ["shop/d1", "shop/d1"]);
    registry.kick(ep, 10);
    expect(woken).toEqual(["shop/d1"]);
  });

  it("global parking: keys wait for a slot freed anywhere; a woken key holds its slot until it decides", () => {
    const { registry, woken } = setup(2);
    const a = registry.ensure("shop/a", "uid-a", undefined, policyOf(), NOW);
    const b = registry.ensure("shop/b", "uid-b", undefined, policyOf(), NOW);
    registry.acquire(a, commitOf(a));
    registry.acquire(b, commitOf(b));
    parkAll(registry, a, ["shop/g1", "shop/g2"], "global");
    parkAll(registry, b, ["shop/g3"], "global");
    expect(a.parked.size + b.parked.size).toBe(0);
    registry.kick(a, 10);
    expect(woken).toEqual([]);
    registry.release(b, 10);
    expect(woken).toEqual(["shop/g1"]);
    expect(registry.view(a, "shop/g1").globalSlot).toBe(true);
    expect(registry.view(a, "shop/other").globalSlot).toBe(false); // the free slot is held for g1
    registry.release(a, 10);
    expect(woken).toEqual(["shop/g1", "shop/g2"]);
    // g1 decided not to attempt (a backoff, say): its slot goes to g3.
    registry.settle("shop/g1");
    expect(woken).toEqual(["shop/g1", "shop/g2", "shop/g3"]);
    registry.settle("shop/g1");
    expect(woken).toHaveLength(3);
  });

  it("kick without an endpoint still wakes globally parked keys", () => {
    const { registry, woken } = setup(1);
    const a = registry.ensure("shop/a", "uid-a", undefined, policyOf(), NOW);
    registry.park(a, "shop/g1", "global");
    registry.park(a, "shop/g2", "global");
    registry.kick(undefined, 0);
    expect(woken).toEqual(["shop/g1"]);
  });

  it("a release wakes the endpoint's own parked keys and the global ones", () => {
    const { registry, woken } = setup(1);
    const a = registry.ensure("shop/a", "uid-a", undefined, policyOf({ maxInFlight: 1 }), NOW);
    registry.acquire(a, commitOf(a));
    registry.park(a, "shop/e1", "endpoint");
    registry.park(a, "shop/g1", "global");
    registry.release(a, 1);
    expect(woken.sort()).toEqual(["shop/e1", "shop/g1"]);
  });

  it("wakeEndpoint wakes everything parked on the endpoint (probe or slot), nothing global, nothing elsewhere", () => {
    const { registry, woken } = setup(1);
    const a = registry.ensure("shop/a", "uid-a", undefined, policyOf({ maxInFlight: 1 }), NOW);
    const b = registry.ensure("shop/b", "uid-b", undefined, policyOf(), NOW);
    registry.acquire(a, commitOf(a));
    parkAll(registry, a, ["shop/p1", "shop/p2"], "probe");
    parkAll(registry, a, ["shop/e1"], "endpoint");
    parkAll(registry, a, ["shop/g1"], "global");
    parkAll(registry, b, ["shop/b1"], "probe");
    registry.wakeEndpoint(a);
    expect(woken).toEqual(["shop/p1", "shop/p2", "shop/e1"]);
    expect(a.parked.size).toBe(0);
    expect(b.parked.size).toBe(1);
    registry.wakeEndpoint(a);
    expect(woken).toHaveLength(3);
  });

  it("remove wakes what was parked on the endpoint and forgets it", () => {
    const { registry, woken } = setup();
    const a = registry.ensure("shop/a", "uid-a", undefined, policyOf(), NOW);
    parkAll(registry, a, ["shop/d1", "shop/d2"], "probe");
    registry.remove("shop/a");
    expect(woken).toEqual(["shop/d1", "shop/d2"]);
    expect(registry.get("shop/a")).toBeUndefined();
  });
});

describe("EndpointRegistry.ensure", () => {
  const openStatus: SubscriptionStatus = {
    breaker: { state: "Open", consecutiveFailures: 7, openedAt: toRfc3339(NOW - 10_000), nextProbeAt: toRfc3339(NOW + 50_000) },
    health: { state: "Degraded", consecutiveFailures: 7, totalAttempts: 40, totalFailures: 12, lastFailureAt: toRfc3339(NOW - 10_000) },
  };

  it("returns the same endpoint for the same subscription", () => {
    const { registry } = setup();
    const a = registry.ensure("shop/a", "uid-1", undefined, policyOf(), NOW);
    a.inFlight = 3;
    expect(registry.ensure("shop/a", "uid-1", openStatus, policyOf(), NOW + 1)).toBe(a);
    expect(registry.ensure("shop/a", undefined, undefined, undefined, NOW + 1)).toBe(a);
    expect(registry.get("shop/a")).toBe(a);
    expect(a.breaker.state).toBe("Closed");
  });

  it("re-creates the endpoint for a new uid (subscription deleted and re-created), from the new status", () => {
    const { registry } = setup();
    const old = registry.ensure("shop/a", "uid-1", undefined, policyOf(), NOW);
    old.breaker = { ...closedBreaker, consecutiveFailures: 4 };
    old.bucket = { tokens: 0, updatedAt: NOW };
    const fresh = registry.ensure("shop/a", "uid-2", undefined, policyOf(), NOW);
    expect(fresh).not.toBe(old);
    expect(fresh.uid).toBe("uid-2");
    expect(fresh.breaker).toEqual(closedBreaker);
    expect(fresh.bucket).toBeUndefined();
    expect(registry.get("shop/a")).toBe(fresh);
  });

  it("a new leader term takes an idle endpoint's breaker, health and hold from the status another leader wrote meanwhile; its unwritten counts stay; one with a request in flight stays as it is", () => {
    const { registry } = setup();
    const idle = registry.ensure("shop/a", "uid-a", openStatus, policyOf(), NOW);
    idle.succeededDelta = 3;
    idle.discardedDelta = 1;
    idle.bucket = { tokens: 0, updatedAt: NOW };
    const busy = registry.ensure("shop/b", "uid-b", undefined, policyOf(), NOW);
    busy.inFlight = 1;
    // Meanwhile another leader probed, failed and opened the breaker again, until later.
    const later: SubscriptionStatus = { ...openStatus, breaker: { ...openStatus.breaker!, nextProbeAt: toRfc3339(NOW + 90_000) }, throttle: { since: toRfc3339(NOW + 55_000), until: toRfc3339(NOW + 70_000), status: 429, retryAfter: "15" } };
    expect(registry.ensure("shop/a", "uid-a", later, policyOf(), NOW + 60_000).breaker.nextProbeAt).toBe(NOW + 50_000);
    registry.newTerm();
    const resumed = registry.ensure("shop/a", "uid-a", later, policyOf(), NOW + 60_000);
    expect(resumed).toBe(idle);
    expect(resumed.breaker).toMatchObject({ state: "Open", nextProbeAt: NOW + 90_000 });
    expect(resumed.throttle).toMatchObject({ until: NOW + 70_000, status: 429 });
    expect(resumed.bucket).toBeUndefined();
    expect([resumed.succeededDelta, resumed.discardedDelta]).toEqual([3, 1]);
    // Once: later calls keep what it then learns.
    resumed.breaker = { ...closedBreaker };
    expect(registry.ensure("shop/a", "uid-a", later, policyOf(), NOW + 60_001).breaker).toEqual(closedBreaker);
    expect(registry.ensure("shop/b", "uid-b", openStatus, policyOf(), NOW + 60_000).breaker).toEqual(closedBreaker);
  });

  it("where replicas share endpoint state, a new term keeps it", () => {
    const registry = new EndpointRegistry({ globalMax: 10, healthProbeIntervalMs: PROBE_INTERVAL, defaults: { deliveryTimeoutMs: 10_000, breaker: { failureThreshold: 5, successThreshold: 1, cooldownMs: 60_000 } }, wake: () => undefined, sharedAcrossReplicas: true });
    const ep = registry.ensure("shop/a", "uid-a", openStatus, policyOf(), NOW);
    registry.newTerm();
    expect(registry.ensure("shop/a", "uid-a", undefined, policyOf(), NOW)).toBe(ep);
    expect(ep.breaker.state).toBe("Open");
  });

  it("a new URL resets breaker, health and rate bucket (keeping the totals), marks it urgent and wakes its parked keys", () => {
    const { registry, woken } = setup();
    const ep = registry.ensure("shop/a", "uid", openStatus, policyOf(), NOW);
    ep.bucket = { tokens: 0, updatedAt: NOW };
    registry.park(ep, "shop/d1", "probe");
    const same = registry.ensure("shop/a", "uid", openStatus, policyOf({ url: "https://new.acme.example/hooks" }), NOW);
    expect(same).toBe(ep);
    expect(ep.url).toBe("https://new.acme.example/hooks");
    expect(ep.breaker).toEqual(closedBreaker);
    expect(ep.health).toEqual({ ...healthyEndpoint, totalAttempts: 40, totalFailures: 12 });
    expect(ep.bucket).toBeUndefined();
    expect([ep.dirty, ep.urgent]).toEqual([true, true]);
    expect(woken).toEqual(["shop/d1"]);
  });

  it("the same URL keeps what the endpoint knows", () => {
    const { registry, woken } = setup();
    const ep = registry.ensure("shop/a", "uid", openStatus, policyOf(), NOW);
    registry.park(ep, "shop/d1", "probe");
    registry.ensure("shop/a", "uid", undefined, policyOf({ maxInFlight: 2 }), NOW + 1);
    expect(ep.breaker.state).toBe("Open");
    expect(ep.dirty).toBe(false);
    expect(woken).toEqual([]);
  });

  it("an endpoint first seen without a policy adopts the URL later without a reset", () => {
    const { registry } = setup();
    const ep = registry.ensure("shop/a", "uid", openStatus, undefined, NOW);
    expect(ep.url).toBeUndefined();
    registry.ensure("shop/a", "uid", openStatus, policyOf(), NOW);
    expect(ep.url).toBe("https://hooks.acme.example/orders");
    expect(ep.breaker.state).toBe("Open");
  });

  it("resumes an Open breaker from status as Open, with its stored nextProbeAt, so plan() waits", () => {
    const { registry } = setup();
    const ep = registry.ensure("shop/a", "uid", openStatus, policyOf(), NOW);
    expect(ep.breaker).toMatchObject({ state: "Open", consecutiveFailures: 7, openedAt: NOW - 10_000, nextProbeAt: NOW + 50_000, probeInFlight: false });
    expect(ep.health).toMatchObject({ state: "Degraded", consecutiveFailures: 7, totalAttempts: 40 });
    const action = plan({
      now: NOW,
      delivery: { phase: "Pending", attempts: 0, nextAttemptAt: undefined, eventType: "order.paid", payloadBytes: 10 },
      subscription: { kind: "ok", policy: policyOf() },
      secret: { kind: "none" },
      endpoint: registry.view(ep),
    });
    expect(action).toEqual({ type: "WaitUntil", at: NOW + 50_000, why: "breaker" });
  });

  it("resumes an Open breaker without nextProbeAt from openedAt + the policy's cooldown", () => {
    const { registry } = setup();
    const status: SubscriptionStatus = { breaker: { state: "Open", consecutiveFailures: 5, openedAt: toRfc3339(NOW - 10_000) } };
    const ep = registry.ensure("shop/a", "uid", status, policyOf({ circuitBreaker: { cooldown: "30s" } }), NOW);
    expect(ep.breaker).toMatchObject({ state: "Open", nextProbeAt: NOW + 20_000 });
  });

  it("resumes a Disabled endpoint as Disabled until its stored nextProbeAt", () => {
    const { registry } = setup();
    const status: SubscriptionStatus = {
      health: { state: "Disabled", reason: "Gone", consecutiveFailures: 1, totalAttempts: 1, totalFailures: 1, nextProbeAt: toRfc3339(NOW + 5_000) },
    };
    const ep = registry.ensure("shop/a", "uid", status, policyOf(), NOW);
    expect(ep.health).toMatchObject({ state: "Disabled", disabledReason: "Gone", nextProbeAt: NOW + 5_000 });
  });

  it("a brand-new subscription starts Closed and Healthy", () => {
    const { registry } = setup();
    const ep = registry.ensure("shop/a", "uid", undefined, policyOf(), NOW);
    expect(ep.breaker).toEqual(closedBreaker);
    expect(ep.health).toEqual(healthyEndpoint);
    expect([ep.inFlight, ep.parked.size, ep.dirty]).toEqual([0, 0, false]);
  });
});

describe("EndpointRegistry: fair share of the global slots between namespaces", () => {
  type Layout = Record<string, { inFlight?: number; parked?: number }>;

  /**
   * Slots full: each namespace has `inFlight` requests (one endpoint per namespace) and then
   * parks `parked` deliveries named `<ns>/<ns><i>` (parked when no slot is free).
   */
  function fill(globalMax: number, layout: Layout) {
    const s = setup(globalMax);
    const eps = new Map<string, Endpoint>();
    for (const [ns, l] of Object.entries(layout)) {
      const ep = s.registry.ensure(`${ns}/sub`, `uid-${ns}`, undefined, policyOf({ maxInFlight: 100 }), NOW);
      eps.set(ns, ep);
      for (let i = 0; i < (l.inFlight ?? 0); i++) s.registry.acquire(ep, commitOf(ep));
    }
    for (const [ns, l] of Object.entries(layout)) for (let i = 1; i <= (l.parked ?? 0); i++) s.registry.park(eps.get(ns)!, `${ns}/${ns}${i}`, "global");
    const release = (ns: string) => s.registry.release(eps.get(ns)!, 100);
    return { ...s, eps, release };
  }

  it.each<[string, number, Layout, string[], string[]]>([
    // name, WEBHOOK_MAX_IN_FLIGHT, layout, releases (by namespace), woken in order
    ["alone: its parked work takes every freed slot", 4, { a: { inFlight: 4, parked: 3 } }, ["a", "a"], ["a/a1", "a/a2"]],
    ["a newcomer below its share goes before the holder's own backlog", 4, { a: { inFlight: 4, parked: 3 }, b: { parked: 2 } }, ["a", "a", "a"], ["b/b1", "b/b2", "a/a1"]],
    ["shares of 2 of 4: the newcomer gets two slots, then the holder two", 4, { a: { inFlight: 4, parked: 5 }, b: { parked: 5 } }, ["a", "a", "a", "a"], ["b/b1", "b/b2", "a/a1", "a/a2"]],
    ["three namespaces, shares of 1: the one with nothing in flight first", 4, { a: { inFlight: 2, parked: 1 }, b: { inFlight: 2, parked: 1 }, c: { parked: 1 } }, ["a", "b", "b"], ["c/c1", "a/a1", "b/b1"]],
    ["more namespaces than slots: a share is 1, never 0", 2, { a: { inFlight: 2, parked: 2 }, b: { parked: 1 }, c: { parked: 1 } }, ["a", "a"], ["b/b1", "c/c1"]],
  ])("%s", (_name, globalMax, layout, releases, expected) => {
    const { woken, release } = fill(globalMax, layout);
    expect(woken).toEqual([]);
    for (const ns of releases) release(ns);
    expect(woken).toEqual(expected);
  });

  it("round-robin among namespaces equally far below their share", () => {
    const { registry, woken, release } = fill(3, { x: { inFlight: 3 }, a: { parked: 3 }, b: { parked: 3 } });
    release("x");
    expect(woken).toEqual(["a/a1"]);
    // Each woken delivery decides not to attempt; its slot goes to the next namespace in turn.
    for (const k of ["a/a1", "b/b1", "a/a2"]) registry.settle(k);
    expect(woken).toEqual(["a/a1", "b/b1", "a/a2", "b/b2"]);
  });

  it.each<[string, number, Layout, string, string | undefined, boolean]>([
    // name, WEBHOOK_MAX_IN_FLIGHT, layout, asking namespace, asking delivery, may take a slot
    ["all slots in flight", 4, { a: { inFlight: 4 } }, "b", undefined, false],
    ["a free slot, a newcomer", 4, { a: { inFlight: 3 } }, "b", undefined, true],
    ["alone above the even share: idle shares are lent", 4, { a: { inFlight: 3 } }, "a", undefined, true],
    ["at its share, the other one not waiting: lent", 4, { a: { inFlight: 2 }, b: { inFlight: 1 } }, "a", undefined, true],
  ])("view: %s", (_name, globalMax, layout, ns, key, expected) => {
    const { registry, eps } = fill(globalMax, layout);
    const ep = eps.get(ns) ?? registry.ensure(`${ns}/sub`, `uid-${ns}`, undefined, policyOf(), NOW);
    expect(registry.view(ep, key).globalSlot).toBe(expected);
  });

  it("a slot freed for a namespace below its share is held for the woken delivery, not taken by one above", () => {
    const { registry, eps, woken, release } = fill(4, { a: { inFlight: 4, parked: 2 }, b: { parked: 1 } });
    release("a");
    expect(woken).toEqual(["b/b1"]);
    const [a, b] = [eps.get("a")!, eps.get("b")!];
    expect(registry.view(a, "a/timer").globalSlot).toBe(false); // a's backoff timer fired: no slot
    expect(registry.view(b, "b/b1").globalSlot).toBe(true);
    registry.acquire(b, commitOf(b), "b/b1");
    expect(registry.view(b, "b/b1").globalSlot).toBe(false); // taken
  });

  it("deliveries that vanished while parked free their namespace's claim when they reconcile", () => {
    const { registry, woken, release } = fill(2, { a: { inFlight: 2 }, b: { parked: 1 } });
    release("a");
    expect(woken).toEqual(["b/b1"]);
    registry.settle("b/b1"); // b1 was deleted: its reconcile found nothing
    const a = registry.get("a/sub")!;
    expect(registry.view(a, "a/next").globalSlot).toBe(true);
  });

  it("property: a free slot never sits beside parked work, and the cap holds", () => {
    const namespaces = ["a", "b", "c"];
    type Op = { kind: "deliver" | "release" | "settle" | "decline"; ns: number; n: number };
    const op = fc.record({ kind: fc.constantFrom<Op["kind"]>("deliver", "release", "settle", "decline"), ns: fc.nat(2), n: fc.nat(20) });
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.array(op, { minLength: 20, maxLength: 80 }), (globalMax, ops) => {
        const { registry, woken } = setup(globalMax);
        const eps = namespaces.map((ns) => registry.ensure(`${ns}/sub`, `uid-${ns}`, undefined, policyOf({ maxInFlight: 100 }), NOW));
        const inFlight: Endpoint[] = [];
        const parked = new Set<string>();
        let next = 0;
        // A delivery reconciles: plans with the view, then attempts or parks, then settles.
        const reconcile = (ep: Endpoint, key: string) => {
          if (registry.view(ep, key).globalSlot) {
            registry.acquire(ep, commitOf(ep), key);
            inFlight.push(ep);
          } else {
            registry.park(ep, key, "global");
            parked.add(key);
          }
          registry.settle(key);
        };
        for (const o of ops) {
          if (o.kind === "deliver") reconcile(eps[o.ns]!, `${namespaces[o.ns]}/d${next++}`);
          else if (o.kind === "release" && inFlight.length) registry.release(inFlight.splice(o.n % inFlight.length, 1)[0]!, 100);
          else if (o.kind === "settle") {
            // Woken deliveries reconcile (oldest first).
            for (const k of woken.splice(0)) {
              parked.delete(k);
              reconcile(eps[namespaces.indexOf(k.split("/")[0]!)]!, k);
            }
          } else if (o.kind === "decline" && woken.length) {
            // A woken delivery does not attempt (backoff, breaker, deleted...): its reconcile ends.
            const [k] = woken.splice(o.n % woken.length, 1);
            parked.delete(k!);
            registry.settle(k!);
          }
          expect(registry.inFlight + woken.length).toBeLessThanOrEqual(globalMax);
          // Slots neither in flight nor held for a woken delivery: nothing may be left parked.
          if (registry.inFlight + woken.length < globalMax) expect([...parked].filter((k) => !woken.includes(k))).toEqual([]);
        }
      }),
    );
  });
});

describe("EndpointRegistry.adopt: state another replica decided (stream mode)", () => {
  it("takes it without an Event, marks the rollup urgent on a state change and wakes what waited", () => {
    const changed: Array<[string, boolean]> = [];
    const created: string[] = [];
    const transitions: string[] = [];
    const woken: string[] = [];
    const registry = new EndpointRegistry({
      globalMax: 100,
      healthProbeIntervalMs: PROBE_INTERVAL,
      defaults: { deliveryTimeoutMs: 10_000, breaker: { failureThreshold: 5, successThreshold: 1, cooldownMs: 60_000 } },
      wake: (k) => woken.push(k),
      observer: {
        breakerMoved: (_ep, t) => void transitions.push(`${t.from}->${t.to}`),
        healthMoved: () => undefined,
        changed: (k, urgent) => void changed.push([k, urgent]),
        deliveriesOf: () => ["shop/d-waiting"],
        created: (ep) => void created.push(ep.key),
      },
    });
    const ep = registry.ensure("shop/a", "uid", undefined, policyOf(), NOW);
    expect(created).toEqual(["shop/a"]);
    registry.park(ep, "shop/d-parked", "endpoint", () => woken.push("shop/d-parked"));
    const opened = { ...ep.breaker, state: "Open" as const, consecutiveFailures: 5, openedAt: NOW, nextProbeAt: NOW + 60_000 };
    expect(registry.adopt(ep, { breaker: opened, health: ep.health })).toBe(true);
    expect(ep.breaker).toEqual(opened);
    expect([ep.dirty, ep.urgent]).toEqual([true, true]);
    expect(changed).toEqual([["shop/a", true]]);
    expect(transitions).toEqual([]);
    expect(woken.sort()).toEqual(["shop/d-parked", "shop/d-waiting"]);
    woken.length = 0;
    expect(registry.adopt(ep, { breaker: opened, health: ep.health })).toBe(false);
    expect(woken).toEqual([]);
    registry.adopt(ep, { breaker: opened, health: ep.health }, { wake: true });
    expect(woken).toEqual(["shop/d-waiting"]);
  });
});
