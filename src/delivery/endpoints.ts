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
    this.breaker = { ...breaker.closedBreaker };
    this.health = { ...health.healthyEndpoint, totalAttempts: this.health.totalAttempts, totalFailures: this.health.totalFailures };
    this.bucket = undefined;
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

export class EndpointRegistry {
  private readonly endpoints = new Map<string, Endpoint>();
  private globalInFlight = 0;
  private readonly globalParked = new Set<string>();

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

  remove(subKey: string): void {
    const ep = this.endpoints.get(subKey);
    this.endpoints.delete(subKey);
    if (ep) for (const k of ep.parked) this.wake(k);
  }

  all(): IterableIterator<Endpoint> {
    return this.endpoints.values();
  }

  view(ep: Endpoint): EndpointView {
    return {
      breaker: ep.breaker,
      health: ep.health,
      bucket: ep.bucket,
      inFlight: ep.inFlight,
      globalInFlight: this.globalInFlight,
      globalMax: this.globalMax,
      healthProbeIntervalMs: this.healthProbeIntervalMs,
    };
  }

  /** Whether an attempt outside plan() (a replay) may take a slot now, or which one it waits for. */
  slotFor(ep: Endpoint, maxInFlight: number): "free" | "global" | "endpoint" {
    if (this.globalInFlight >= this.globalMax) return "global";
    if (ep.inFlight >= maxInFlight) return "endpoint";
    return "free";
  }

  /** Wakes deliveries that may be waiting on a timer (the endpoint recovered). */
  wakeAll(deliveryKeys: Iterable<string>): void {
    for (const k of deliveryKeys) this.wake(k);
  }

  park(ep: Endpoint, deliveryKey: string, why: "endpoint" | "global" | "probe"): void {
    if (why === "global") this.globalParked.add(deliveryKey);
    else ep.parked.add(deliveryKey);
  }

  /** Takes the slots an admitted attempt needs. */
  acquire(ep: Endpoint, commit: EndpointCommit): void {
    ep.commit(commit);
    this.globalInFlight++;
    this.onInFlight?.(this.globalInFlight);
  }

  /** Frees the slots of a finished attempt and wakes as many waiters as slots are free. */
  release(ep: Endpoint, maxInFlight: number): void {
    ep.inFlight = Math.max(0, ep.inFlight - 1);
    this.globalInFlight = Math.max(0, this.globalInFlight - 1);
    this.onInFlight?.(this.globalInFlight);
    this.kick(ep, maxInFlight);
  }

  /**
   * Wakes parked deliveries while slots are free. Called after a release and after a woken
   * delivery decided not to use its slot, so a free slot never sits beside parked work.
   */
  kick(ep: Endpoint | undefined, maxInFlight: number): void {
    if (ep) this.wakeSome(ep.parked, maxInFlight - ep.inFlight);
    this.wakeSome(this.globalParked, this.globalMax - this.globalInFlight);
  }

  private wakeSome(set: Set<string>, n: number): void {
    for (const k of set) {
      if (n-- <= 0) break;
      set.delete(k);
      this.wake(k);
    }
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
