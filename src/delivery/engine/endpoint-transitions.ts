// What a breaker or health transition tells the world: a Kubernetes Event on the subscription,
// the per-subscription gauges and a log line; and an endpoint whose counters moved has its
// subscription's status rolled up (at once for a transition). The registry decides when a
// transition happens (endpoints.ts); this says it.
import type { Logger } from "pino";
import * as breaker from "../../core/endpoint/breaker.js";
import * as health from "../../core/endpoint/health.js";
import type { Throttle } from "../../core/endpoint/throttle.js";
import type { EventSink } from "../../kube/events.js";
import type { Metrics } from "../../observability/metrics.js";
import type { Caches } from "../caches.js";
import type { Endpoint, EndpointObserver } from "./endpoints.js";
import { subscriptionLabels, subscriptionRef } from "../objects.js";
import type { Notifier } from "../notifier.js";

const toIso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

export interface EndpointTransitionsDeps {
  caches: Caches;
  events: EventSink;
  metrics: Metrics;
  log: Logger;
  /** The subscription's status should be rolled up (`urgent`: now, else at the bounded rate). */
  rollUp: (subKey: string, urgent: boolean) => void;
  /** spec.notify: the owner is told of a breaker opening, an unhealthy endpoint, a throttle. */
  notifier?: Pick<Notifier, "notify">;
  now?: () => number;
}

export class EndpointTransitions implements EndpointObserver {
  private readonly now: () => number;

  constructor(private readonly d: EndpointTransitionsDeps) {
    this.now = d.now ?? Date.now;
  }

  breakerMoved(ep: Endpoint, t: breaker.BreakerTransition): void {
    const { namespace, subscription } = subscriptionLabels(ep.key);
    this.d.metrics.setSubscriptionGauges(namespace, subscription, { breaker: breaker.breakerGaugeValue(t.to) });
    const detail =
      t.to === "Open" ? `after ${ep.breaker.consecutiveFailures} consecutive failures; next probe at ${new Date(ep.breaker.nextProbeAt ?? this.now()).toISOString()}`
      : t.to === "HalfOpen" ? "cooldown over: one probe request goes through"
      : "the probe succeeded: deliveries flow again";
    this.event(ep.key, t.to === "Closed" ? "Normal" : "Warning", `Breaker${t.to}`, `circuit breaker ${t.from} -> ${t.to}: ${detail}`);
    this.d.log.info({ subscription: ep.key, from: t.from, to: t.to }, "breaker transition");
    if (t.to === "Open") {
      const openedAt = ep.breaker.openedAt ?? this.now();
      this.d.notifier?.notify(ep.key, "endpoint.breaker_opened", `breaker-opened@${openedAt}`, { from: t.from, to: t.to, consecutiveFailures: ep.breaker.consecutiveFailures, nextProbeAt: toIso(ep.breaker.nextProbeAt) });
    }
  }

  healthMoved(ep: Endpoint, t: health.HealthTransition): void {
    const { namespace, subscription } = subscriptionLabels(ep.key);
    this.d.metrics.setSubscriptionGauges(namespace, subscription, { health: health.healthGaugeValue(t.to) });
    const why =
      t.to === "Disabled" ?
        ep.health.disabledReason === "Gone" ?
          "the endpoint answered 410 Gone; deliveries wait and the endpoint is probed periodically"
        : `${ep.health.consecutiveFailures} consecutive failures; deliveries wait and the endpoint is probed periodically`
      : t.to === "Degraded" ? `${ep.health.consecutiveFailures} consecutive failures`
      : "an attempt succeeded";
    this.event(ep.key, t.to === "Healthy" ? "Normal" : "Warning", `Endpoint${t.to}`, `endpoint ${t.from} -> ${t.to}: ${why}`);
    if (t.to !== "Healthy") {
      const at = ep.health.lastFailureAt ?? this.now();
      this.d.notifier?.notify(ep.key, "endpoint.unhealthy", `health-${t.to}@${at}`, { from: t.from, to: t.to, reason: t.to === "Disabled" ? (ep.health.disabledReason ?? "Failures") : "Failures", consecutiveFailures: ep.health.consecutiveFailures, message: why });
    }
  }

  throttled(ep: Endpoint, t: Throttle): void {
    this.event(ep.key, "Warning", "EndpointThrottled", `the endpoint answered ${t.status} with Retry-After: ${t.retryAfter}: no new attempt to it before ${new Date(t.until).toISOString()} (deliveries wait; nothing is lost)`);
    this.d.log.info({ subscription: ep.key, status: t.status, retryAfter: t.retryAfter, until: new Date(t.until).toISOString() }, "endpoint throttled");
    this.d.notifier?.notify(ep.key, "endpoint.throttled", `throttled@${t.until}`, { status: t.status, retryAfter: t.retryAfter, until: new Date(t.until).toISOString() });
  }

  changed(subKey: string, urgent: boolean): void {
    this.d.rollUp(subKey, urgent);
  }

  deliveriesOf(subKey: string): Iterable<string> {
    return this.d.caches.deliveriesOf(subKey);
  }

  private event(subKey: string, type: "Normal" | "Warning", reason: string, message: string): void {
    const sub = this.d.caches.subscription(subKey);
    if (sub) this.d.events.record({ ...subscriptionRef(sub), resourceVersion: undefined }, type, reason, message);
  }
}
