// Per-endpoint (per-subscription) state that lives in memory: breaker, health, token bucket,
// requests in flight and the deliveries parked until a slot or the probe frees. It starts from
// the subscription's stored status, so a new leader resumes an Open breaker as Open.
import type { SubscriptionStatus } from "../api/subscription.js";
import * as breaker from "../core/breaker.js";
import * as health from "../core/health.js";
import type { EndpointCommit, EndpointView } from "../core/plan.js";
import type { Policy } from "../core/policy.js";
import type { TokenBucket } from "../core/token-bucket.js";

export class Endpoint {
  breaker: breaker.BreakerState;
  health: health.HealthState;
  bucket: TokenBucket | undefined;
  inFlight = 0;
  /** Delivery keys waiting for a slot here or for the probe in flight. */
  readonly parked = new Set<string>();
  /** Finished deliveries not yet added to status.deliveries (flushed by the subscription rollup). */
  succeededDelta = 0;
  discardedDelta = 0;
  /** Set when status.breaker/health should be written; `urgent` on transitions. */
  dirty = false;
  urgent = false;

  /** The URL the breaker and health describe; a new URL is a new endpoint. */
  url: string | undefined;

  constructor(
    readonly key: string,
    readonly uid: string | undefined,
    status: SubscriptionStatus | undefined,
    now: number,
    policy: Policy | undefined,
    healthProbeIntervalMs: number,
  ) {
    const cfg = policy?.breaker ?? { failureThreshold: 5, successThreshold: 1, cooldownMs: 60_000 };
    this.breaker = breaker.fromStatus(status?.breaker, now, cfg);
    this.health = health.fromStatus(status?.health as health.HealthStatus | undefined, now, health.healthConfig(healthProbeIntervalMs));
    this.url = policy?.url;
  }

  /** The subscription now points elsewhere: what we knew about the old endpoint does not apply. */
  resetFor(url: string): void {
    this.url = url;
    this.resetBreaker();
    this.bucket = undefined;
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

export interface Waker {
  (deliveryKey: string): void;
}

/**
 * One namespace's use of the global slots: requests in flight, deliveries parked for a slot,
 * and deliveries woken for a freed slot that have not yet taken it (each holds a claim on one).
 */
interface Tenant {
  inFlight: number;
  readonly parked: Set<string>;
  readonly woken: Set<string>;
}

const namespaceOf = (key: string): string => key.slice(0, key.indexOf("/"));

export class EndpointRegistry {
  private readonly endpoints = new Map<string, Endpoint>();
  private globalInFlight = 0;
  /** Namespaces with work (in flight, parked or woken), in the order they got it. */
  private readonly tenants = new Map<string, Tenant>();
  /** Woken deliveries across namespaces: free slots held for them until they decide. */
  private claims = 0;
  /** Deliveries woken for a free endpoint slot whose reconcile has not ended yet (see settle). */
  private readonly wokenForEndpoint = new Map<string, { ep: Endpoint; maxInFlight: number }>();
  /** The namespace woken last, for round-robin among namespaces equally far below their share. */
  private lastWoken: string | undefined;

  constructor(
    private readonly globalMax: number,
    private readonly healthProbeIntervalMs: number,
    private readonly wake: Waker,
    private readonly onInFlight?: (n: number) => void,
  ) {}

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
      ep = new Endpoint(subKey, uid, status, now, policy, this.healthProbeIntervalMs);
      this.endpoints.set(subKey, ep);
    } else if (policy && ep.url !== undefined && ep.url !== policy.url) {
      ep.resetFor(policy.url);
      this.wakeEndpoint(ep);
    } else if (policy && ep.url === undefined) ep.url = policy.url;
    return ep;
  }

  /**
   * Closes the breaker and re-enables the endpoint now, and wakes what waited for it: the
   * parked deliveries and `waiting` (the subscription's deliveries, some on a probe timer).
   */
  reset(ep: Endpoint, waiting: Iterable<string>): void {
    ep.resetBreaker();
    this.wakeEndpoint(ep);
    for (const k of waiting) this.wake(k);
  }

  remove(subKey: string): void {
    const ep = this.endpoints.get(subKey);
    this.endpoints.delete(subKey);
    if (ep) for (const k of ep.parked) this.wake(k);
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
      globalSlot: this.mayTakeGlobalSlot(namespaceOf(ep.key), deliveryKey),
      healthProbeIntervalMs: this.healthProbeIntervalMs,
    };
  }

  /** Whether an attempt outside plan() (a replay) may take a slot now, or which one it waits for. */
  slotFor(ep: Endpoint, maxInFlight: number, deliveryKey: string): "free" | "global" | "endpoint" {
    if (!this.mayTakeGlobalSlot(namespaceOf(ep.key), deliveryKey)) return "global";
    if (ep.inFlight >= maxInFlight) return "endpoint";
    return "free";
  }

  /** Wakes deliveries that may be waiting on a timer (the endpoint recovered). */
  wakeAll(deliveryKeys: Iterable<string>): void {
    for (const k of deliveryKeys) this.wake(k);
  }

  /** Each namespace with work gets globalMax / (namespaces with work), at least 1. */
  private share(extraTenants: number): number {
    return Math.max(1, Math.floor(this.globalMax / (this.tenants.size + extraTenants)));
  }

  /**
   * The fair-share rule: a delivery woken for a freed slot takes the slot held for it. Otherwise
   * a slot must be free and not held for a woken delivery; a namespace below its share may take
   * it; one at or above its share only when no namespace below its share has deliveries parked
   * (idle shares are lent).
   */
  private mayTakeGlobalSlot(namespace: string, deliveryKey: string | undefined): boolean {
    const t = this.tenants.get(namespace);
    if (t && deliveryKey !== undefined && t.woken.has(deliveryKey)) return true;
    if (this.globalInFlight + this.claims >= this.globalMax) return false;
    const share = this.share(t ? 0 : 1);
    if ((t?.inFlight ?? 0) < share) return true;
    for (const [name, o] of this.tenants) if (name !== namespace && o.parked.size > 0 && o.inFlight < share) return false;
    return true;
  }

  private tenant(namespace: string): Tenant {
    let t = this.tenants.get(namespace);
    if (!t) {
      t = { inFlight: 0, parked: new Set(), woken: new Set() };
      this.tenants.set(namespace, t);
    }
    return t;
  }

  /** A namespace with nothing in flight, parked or woken no longer counts for the shares. */
  private tidy(namespace: string, t: Tenant): void {
    if (t.inFlight === 0 && t.parked.size === 0 && t.woken.size === 0) this.tenants.delete(namespace);
  }

  /** Drops the claim of a woken delivery (it took its slot, parked again or decided otherwise). */
  private unclaim(t: Tenant | undefined, deliveryKey: string): boolean {
    if (!t?.woken.delete(deliveryKey)) return false;
    this.claims--;
    return true;
  }

  park(ep: Endpoint, deliveryKey: string, why: "endpoint" | "global" | "probe"): void {
    this.wokenForEndpoint.delete(deliveryKey);
    if (why !== "global") {
      ep.parked.add(deliveryKey);
      return;
    }
    const t = this.tenant(namespaceOf(ep.key));
    this.unclaim(t, deliveryKey);
    t.parked.add(deliveryKey);
    // Parked beside a free slot held back for a namespace below its share: wake that namespace.
    this.wakeGlobal();
  }

  /** Takes the slots an admitted attempt needs. */
  acquire(ep: Endpoint, commit: EndpointCommit, deliveryKey?: string): void {
    ep.commit(commit);
    if (deliveryKey !== undefined) this.wokenForEndpoint.delete(deliveryKey);
    const t = this.tenant(namespaceOf(ep.key));
    if (deliveryKey !== undefined) this.unclaim(t, deliveryKey);
    t.inFlight++;
    this.globalInFlight++;
    this.onInFlight?.(this.globalInFlight);
  }

  /** Frees the slots of a finished attempt and wakes as many waiters as slots are free. */
  release(ep: Endpoint, maxInFlight: number): void {
    ep.inFlight = Math.max(0, ep.inFlight - 1);
    const namespace = namespaceOf(ep.key);
    const t = this.tenants.get(namespace);
    if (t) {
      t.inFlight = Math.max(0, t.inFlight - 1);
      this.tidy(namespace, t);
    }
    this.globalInFlight = Math.max(0, this.globalInFlight - 1);
    this.onInFlight?.(this.globalInFlight);
    this.kick(ep, maxInFlight);
  }

  /**
   * A delivery's reconcile ended: if it was woken for a global slot and neither took it nor
   * parked again, the slot held for it goes to the next waiter.
   */
  settle(deliveryKey: string): void {
    // Woken for a free endpoint slot but did not take it (its reconcile ended early: the
    // delivery was gone, waited for the cache, chose to wait): the next parked one gets it.
    const woken = this.wokenForEndpoint.get(deliveryKey);
    if (woken) {
      this.wokenForEndpoint.delete(deliveryKey);
      this.kick(woken.ep, woken.maxInFlight);
    }
    const namespace = namespaceOf(deliveryKey);
    const t = this.tenants.get(namespace);
    if (!t || !this.unclaim(t, deliveryKey)) return;
    this.tidy(namespace, t);
    this.wakeGlobal();
  }

  /**
   * Wakes parked deliveries while slots are free. Called after a release and after a woken
   * delivery decided not to use its slot, so a free slot never sits beside parked work.
   */
  kick(ep: Endpoint | undefined, maxInFlight: number): void {
    if (ep) {
      let n = maxInFlight - ep.inFlight;
      for (const k of ep.parked) {
        if (n-- <= 0) break;
        ep.parked.delete(k);
        this.wokenForEndpoint.set(k, { ep, maxInFlight });
        this.wake(k);
      }
    }
    this.wakeGlobal();
  }

  /** One delivery per free (unheld) global slot, each from the namespace furthest below its share. */
  private wakeGlobal(): void {
    while (this.globalInFlight + this.claims < this.globalMax) {
      const name = this.furthestBelowShare();
      if (name === undefined) return;
      const t = this.tenants.get(name)!;
      const key = t.parked.values().next().value!;
      t.parked.delete(key);
      t.woken.add(key);
      this.claims++;
      this.lastWoken = name;
      this.wake(key);
    }
  }

  /**
   * The namespace with parked deliveries whose in-flight and woken deliveries fall furthest
   * below its share; among equals, the first after the one woken last (round-robin).
   */
  private furthestBelowShare(): string | undefined {
    const share = this.share(0);
    let best: string | undefined;
    let bestDeficit = -Infinity;
    let bestAfterLast = false;
    let afterLast = this.lastWoken === undefined || !this.tenants.has(this.lastWoken);
    for (const [name, t] of this.tenants) {
      if (t.parked.size > 0) {
        const deficit = share - t.inFlight - t.woken.size;
        if (deficit > bestDeficit || (deficit === bestDeficit && afterLast && !bestAfterLast)) {
          best = name;
          bestDeficit = deficit;
          bestAfterLast = afterLast;
        }
      }
      if (name === this.lastWoken) afterLast = true;
    }
    return best;
  }

  /** Wakes every delivery parked on `ep`: the probe reported back, or the endpoint changed. */
  wakeEndpoint(ep: Endpoint): void {
    if (ep.parked.size === 0) return;
    const keys = [...ep.parked];
    ep.parked.clear();
    for (const k of keys) this.wake(k);
  }

  get inFlight(): number {
    return this.globalInFlight;
  }
}
