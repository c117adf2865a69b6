// Per-endpoint (per-subscription) state that lives in memory, and every rule that changes it:
// breaker, health, token bucket, requests in flight, the deliveries parked until a slot or the
// probe frees, and the transitions with their Events and gauges. It starts from the
// subscription's stored status, so a new leader resumes an Open breaker as Open; the
// subscription reconciler mirrors it back into status (it never changes it).
import type { SubscriptionStatus } from "../../api/subscription.js";
import * as breaker from "../../core/endpoint/breaker.js";
import type { Classification } from "../../core/attempt/classify.js";
import { reportAttempt, type EndpointState } from "../../core/endpoint/endpoint-report.js";
import * as health from "../../core/endpoint/health.js";
import type { EndpointCommit, EndpointView } from "../../core/attempt/plan.js";
import type { Policy, PolicyDefaults } from "../../core/attempt/policy.js";
import { fromRfc3339 } from "../../core/rfc3339.js";
import { isThrottled, nextThrottle, type Throttle } from "../../core/endpoint/throttle.js";
import type { TokenBucket } from "../../core/endpoint/token-bucket.js";
import { GlobalSlots, namespaceOf } from "./global-slots.js";

export class Endpoint {
  // Set by resume(), which the constructor calls.
  breaker!: breaker.BreakerState;
  health!: health.HealthState;
  bucket: TokenBucket | undefined;
  inFlight = 0;
  /** Keys waiting for a slot here or for the probe in flight, each with the function that wakes it (its transport's). */
  readonly parked = new Map<string, () => void>();
  /** Finished deliveries not yet added to status.deliveries (flushed by the subscription rollup). */
  succeededDelta = 0;
  discardedDelta = 0;
  /** Set when status.breaker/health should be written; `urgent` on transitions. */
  dirty = false;
  urgent = false;

  /** The URL the breaker and health describe; a new URL is a new endpoint. */
  url: string | undefined;

  /** The endpoint's Retry-After hold (core/endpoint/throttle.ts): no attempt of any transport before its end. */
  throttle: Throttle | undefined;

  /** Kept from an earlier leader term: its state is taken from status again when next needed (EndpointRegistry.newTerm). */
  stale = false;

  constructor(
    readonly key: string,
    readonly uid: string | undefined,
    status: SubscriptionStatus | undefined,
    now: number,
    breakerConfig: breaker.BreakerConfig,
    url: string | undefined,
    healthProbeIntervalMs: number,
  ) {
    this.resume(status, now, breakerConfig, url, healthProbeIntervalMs);
  }

  /** Breaker, health and Retry-After hold as the subscription's status says (the counts not yet written stay). */
  resume(status: SubscriptionStatus | undefined, now: number, breakerConfig: breaker.BreakerConfig, url: string | undefined, healthProbeIntervalMs: number): void {
    this.breaker = breaker.fromStatus(status?.breaker, now, breakerConfig);
    this.health = health.fromStatus(status?.health as health.HealthStatus | undefined, now, health.healthConfig(healthProbeIntervalMs));
    this.url = url;
    this.throttle = throttleFromStatus(status?.throttle, now);
    this.bucket = undefined;
    this.stale = false;
  }

  /** The subscription now points elsewhere: what we knew about the old endpoint does not apply. */
  resetFor(url: string): void {
    this.url = url;
    this.resetBreaker();
    this.bucket = undefined;
    this.throttle = undefined;
  }

  /** Breaker Closed and health Healthy now (the totals stay); written to status at once. */
  resetBreaker(): void {
    this.breaker = { ...breaker.closedBreaker };
    this.health = { ...health.healthyEndpoint, totalAttempts: this.health.totalAttempts, totalFailures: this.health.totalFailures };
    this.dirty = true;
    this.urgent = true;
  }

  commit(c: EndpointCommit): void {
    this.breaker = c.breaker;
    this.health = c.health;
    this.bucket = c.bucket;
    this.inFlight++;
  }
}

/** What the world learns of an endpoint's transitions: Events, gauges, the status rollup. */
export interface EndpointObserver {
  breakerMoved(ep: Endpoint, t: breaker.BreakerTransition): void;
  healthMoved(ep: Endpoint, t: health.HealthTransition): void;
  /** The endpoint's counters moved (`urgent`: a transition): its subscription's status is rolled up. */
  changed(subKey: string, urgent: boolean): void;
  /** Every active delivery of the subscription (woken when the endpoint recovers). */
  deliveriesOf(subKey: string): Iterable<string>;
  /** A Retry-After hold began (not when a running one is extended). */
  throttled?(ep: Endpoint, t: Throttle): void;
  /** An endpoint was made (from its subscription's status). */
  created?(ep: Endpoint): void;
  /** An operator's reset closed the breaker and re-enabled the endpoint. */
  reset?(ep: Endpoint): void;
}

/** A hold persisted in the subscription's status, while it still runs (a new leader keeps it). */
function throttleFromStatus(s: SubscriptionStatus["throttle"], now: number): Throttle | undefined {
  const since = fromRfc3339(s?.since);
  const until = fromRfc3339(s?.until);
  if (!s || since === undefined || until === undefined || until <= now) return undefined;
  return { since, until, status: s.status, retryAfter: s.retryAfter };
}

export interface EndpointRegistryOptions {
  /** WEBHOOK_MAX_IN_FLIGHT. */
  globalMax: number;
  /** WEBHOOK_HEALTH_PROBE_INTERVAL_MS. */
  healthProbeIntervalMs: number;
  /** The operator's breaker defaults, for a subscription whose spec cannot be used. */
  defaults: PolicyDefaults;
  /** Queues a WebhookDelivery's key again: a subscription's deliveries, when its endpoint recovers. Parked keys carry their own wake. */
  wake: (deliveryKey: string) => void;
  onInFlight?: (n: number) => void;
  observer?: EndpointObserver;
  /** Replicas delivering (stream mode: every replica, each with its own token buckets); default 1. */
  replicas?: () => number;
  /** Replicas share breaker and health (stream mode: the observer keeps every endpoint current): a new leader term keeps them. */
  sharedAcrossReplicas?: boolean;
  now?: () => number;
  /** How many namespaces have WebhookSubscriptions (GlobalSlots keeps slots back for the others when two or more do). */
  namespacesKnown?: (now: number) => number;
}

export class EndpointRegistry {
  private readonly endpoints = new Map<string, Endpoint>();
  private readonly slots: GlobalSlots;
  /** Deliveries woken for a free endpoint slot whose reconcile has not ended yet (see settle). */
  private readonly wokenForEndpoint = new Map<string, { ep: Endpoint; maxInFlight: number }>();
  private readonly now: () => number;
  private readonly healthConfig: health.HealthConfig;

  constructor(private readonly o: EndpointRegistryOptions) {
    this.slots = new GlobalSlots(o.globalMax, o.onInFlight, o.now, o.namespacesKnown);
    this.now = o.now ?? Date.now;
    this.healthConfig = health.healthConfig(o.healthProbeIntervalMs);
  }

  get(subKey: string): Endpoint | undefined {
    return this.endpoints.get(subKey);
  }

  /** The endpoint of a subscription, created from its status the first time it is needed. */
  ensure(subKey: string, uid: string | undefined, status: SubscriptionStatus | undefined, policy: Policy | undefined, now: number): Endpoint {
    let ep = this.endpoints.get(subKey);
    if (ep && uid && ep.uid && ep.uid !== uid) {
      // Deleted and re-created under the same name: a new endpoint.
      this.endpoints.delete(subKey);
      ep = undefined;
    }
    if (!ep) {
      ep = new Endpoint(subKey, uid, status, now, policy?.breaker ?? this.o.defaults.breaker, policy?.url, this.o.healthProbeIntervalMs);
      this.endpoints.set(subKey, ep);
      this.o.observer?.created?.(ep);
    } else if (ep.stale && ep.inFlight === 0) {
      ep.resume(status, now, policy?.breaker ?? this.o.defaults.breaker, policy?.url ?? ep.url, this.o.healthProbeIntervalMs);
    } else if (policy && ep.url !== undefined && ep.url !== policy.url) {
      ep.resetFor(policy.url);
      this.wakeEndpoint(ep);
    } else if (policy && ep.url === undefined) ep.url = policy.url;
    return ep;
  }

  /**
   * Closes the breaker and re-enables the endpoint now, and wakes what waited for it: the
   * parked deliveries and the subscription's deliveries (some wait on a probe timer).
   */
  reset(ep: Endpoint): void {
    ep.resetBreaker();
    this.o.observer?.reset?.(ep);
    this.wakeEndpoint(ep);
    this.wakeSubscription(ep.key);
  }

  /**
   * Takes the breaker and health state another replica decided (stream mode's shared state):
   * no Event (the replica whose transition it was recorded it), a rollup soon, and what waited
   * on the endpoint looks again. `wake`: also when nothing changed (a lost probe claim).
   */
  adopt(ep: Endpoint, next: EndpointState, opts: { wake?: boolean } = {}): boolean {
    const moved = ep.breaker.state !== next.breaker.state || ep.health.state !== next.health.state;
    const changed = moved || JSON.stringify(ep.breaker) !== JSON.stringify(next.breaker) || JSON.stringify(ep.health) !== JSON.stringify(next.health);
    ep.breaker = next.breaker;
    ep.health = next.health;
    if (changed) {
      ep.dirty = true;
      if (moved) ep.urgent = true;
      this.o.observer?.changed(ep.key, moved);
    }
    if (changed || opts.wake) {
      this.wakeEndpoint(ep);
      this.wakeSubscription(ep.key);
    }
    return changed;
  }

  /**
   * A leader term begins. Where only the leader holds endpoint state (CR mode), what this replica
   * kept from an earlier term may be stale: another leader may have probed, re-opened or closed
   * the breaker since, and written it to status. Each endpoint with no request in flight takes
   * its breaker, health and Retry-After hold from its subscription's status again when next
   * needed, as a replica leading for the first time does; the counts it has not written yet stay.
   * Where the replicas share the state, it is current and stays.
   */
  newTerm(): void {
    if (this.o.sharedAcrossReplicas) return;
    for (const ep of this.endpoints.values()) if (ep.inFlight === 0) ep.stale = true;
  }

  remove(subKey: string): void {
    const ep = this.endpoints.get(subKey);
    this.endpoints.delete(subKey);
    if (ep) for (const wake of ep.parked.values()) wake();
  }

  all(): IterableIterator<Endpoint> {
    return this.endpoints.values();
  }

  /** What plan() needs of the endpoint; `deliveryKey` is the delivery being planned. */
  view(ep: Endpoint, deliveryKey?: string): EndpointView {
    return {
      breaker: ep.breaker,
      health: ep.health,
      bucket: ep.bucket,
      inFlight: ep.inFlight,
      globalSlot: this.slots.mayTake(namespaceOf(ep.key), deliveryKey),
      healthProbeIntervalMs: this.o.healthProbeIntervalMs,
      ...(isThrottled(ep.throttle, this.now()) ? { throttledUntil: ep.throttle.until } : {}),
      replicas: this.o.replicas?.() ?? 1,
    };
  }

  /**
   * An answer's Retry-After, applied to the whole endpoint (core/endpoint/throttle.ts): a 429 or 503 with
   * Retry-After holds every new attempt to it until the time asked for. A hold that begins is
   * said (Event) and rolled up into the subscription's status at once.
   */
  holdFor(ep: Endpoint, policy: Policy, answer: { responseStatus?: number; retryAfter?: string }): void {
    const now = this.now();
    const before = ep.throttle;
    const next = nextThrottle(before, answer, now, policy.retry.respectRetryAfter);
    if (next === before || !next) return;
    ep.throttle = next;
    ep.dirty = true;
    if (!isThrottled(before, now)) this.o.observer?.throttled?.(ep, next);
    this.o.observer?.changed(ep.key, true);
  }

  /**
   * Parks a key until a slot frees (on the endpoint or globally) or the probe reports back;
   * `wake` is how it is woken then: each transport parks its keys with its own (CR mode queues the
   * delivery again, a stream subscription steps its held message), so nothing routes a key by
   * its shape.
   */
  park(ep: Endpoint, deliveryKey: string, why: "endpoint" | "global" | "probe", wake: () => void): void {
    this.wokenForEndpoint.delete(deliveryKey);
    if (why === "global") this.slots.park(namespaceOf(ep.key), deliveryKey, wake);
    else ep.parked.set(deliveryKey, wake);
  }

  /** Calls `listener` once when the next global request slot is released (GlobalSlots.onFree). */
  onGlobalSlotFree(listener: () => void): void {
    this.slots.onFree(listener);
  }

  offGlobalSlotFree(listener: () => void): void {
    this.slots.offFree(listener);
  }

  /** Takes the slots an admitted attempt needs and commits the state plan() admitted it with. */
  acquire(ep: Endpoint, commit: EndpointCommit, deliveryKey?: string): void {
    ep.commit(commit);
    if (deliveryKey !== undefined) this.wokenForEndpoint.delete(deliveryKey);
    this.slots.take(namespaceOf(ep.key), deliveryKey);
    if (commit.breakerTransition) this.breakerMoved(ep, commit.breakerTransition);
  }

  /** Frees the slots of a finished attempt and wakes as many waiters as slots are free. */
  release(ep: Endpoint, maxInFlight: number): void {
    ep.inFlight = Math.max(0, ep.inFlight - 1);
    this.slots.release(namespaceOf(ep.key));
    this.kick(ep, maxInFlight);
  }

  /**
   * One attempt's result, reported on its endpoint: breaker and health move (with their Events
   * and gauges), and what waited on the endpoint looks again when it recovered or the probe
   * reported back.
   */
  report(ep: Endpoint, policy: Policy, result: Classification | "interrupted", opts: { probe: boolean; viaReplay: boolean }): void {
    const before = { breaker: ep.breaker.state, health: ep.health.state };
    const r = reportAttempt(ep, result, { now: this.now(), probe: opts.probe, explicit: opts.viaReplay, breaker: policy.breaker, health: this.healthConfig });
    ep.breaker = r.breaker;
    ep.health = r.health;
    const bt = r.breakerTransition;
    const ht = r.healthTransition;
    if (bt) this.breakerMoved(ep, bt);
    if (ht) {
      this.o.observer?.healthMoved(ep, ht);
      ep.urgent = true;
    }
    // The endpoint recovered: every delivery held by it looks again now, also those waiting on
    // a timer for the next probe (up to WEBHOOK_HEALTH_PROBE_INTERVAL_MS away).
    if (ht?.to === "Healthy" || bt?.to === "Closed") this.wakeSubscription(ep.key);
    // A probe reported back or the breaker moved: everyone parked on this endpoint looks again.
    if (opts.probe || bt || before.breaker !== ep.breaker.state || before.health !== ep.health.state) this.wakeEndpoint(ep);
    if (r.counted) {
      ep.dirty = true;
      this.o.observer?.changed(ep.key, !!(bt || ht));
    }
  }

  private breakerMoved(ep: Endpoint, t: breaker.BreakerTransition): void {
    this.o.observer?.breakerMoved(ep, t);
    ep.dirty = true;
    ep.urgent = true;
  }

  /**
   * A delivery's reconcile ended: if it was woken for a slot and neither took it nor parked
   * again, the slot held for it goes to the next waiter.
   */
  settle(deliveryKey: string): void {
    // Woken for a free endpoint slot but did not take it (its reconcile ended early: the
    // delivery was gone, waited for the cache, chose to wait): the next parked one gets it.
    const woken = this.wokenForEndpoint.get(deliveryKey);
    if (woken) {
      this.wokenForEndpoint.delete(deliveryKey);
      this.kick(woken.ep, woken.maxInFlight);
    }
    this.slots.settle(deliveryKey);
  }

  /**
   * Wakes parked deliveries while slots are free. Called after a release and after a woken
   * delivery decided not to use its slot, so a free slot never sits beside parked work.
   */
  kick(ep: Endpoint | undefined, maxInFlight: number): void {
    if (ep) {
      let n = maxInFlight - ep.inFlight;
      for (const [k, wake] of ep.parked) {
        if (n-- <= 0) break;
        ep.parked.delete(k);
        this.wokenForEndpoint.set(k, { ep, maxInFlight });
        wake();
      }
    }
    this.slots.wakeNext();
  }

  /** Wakes every delivery parked on `ep`: the probe reported back, or the endpoint changed. */
  wakeEndpoint(ep: Endpoint): void {
    if (ep.parked.size === 0) return;
    const wakes = [...ep.parked.values()];
    ep.parked.clear();
    for (const wake of wakes) wake();
  }

  /** Wakes every active delivery of a subscription (some may wait on a timer). */
  private wakeSubscription(subKey: string): void {
    for (const k of this.o.observer?.deliveriesOf(subKey) ?? []) this.o.wake(k);
  }

  get inFlight(): number {
    return this.slots.inFlight;
  }
}
