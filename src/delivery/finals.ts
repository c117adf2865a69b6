// What a delivery reaching a final phase (Succeeded, DeadLettered, Discarded) tells the world:
// the finished-deliveries counter and the create -> delivered latency, the dead-letter
// operations counter, an Event on the delivery, and the subscription's counts (rolled up).
import { ANNOTATIONS } from "../api/names.js";
import type { Final } from "../core/attempt/outcome.js";
import type { EventSink } from "../kube/events.js";
import type { Metrics } from "../observability/metrics.js";
import type { EndpointRegistry } from "./engine/endpoints.js";
import { Notifier } from "./notifier.js";
import { deliveryRef, subscriptionLabels, type DeliveryObject } from "./objects.js";

/** What an outcome kept for a later write needs to be reported when it is finally written. */
export interface OutcomeMeta {
  subKey: string;
  replay: boolean;
}

export interface FinalsDeps {
  endpoints: EndpointRegistry;
  events: EventSink;
  metrics: Metrics;
  /** The subscription's status should be rolled up (at the bounded rate). */
  rollUp: (subKey: string) => void;
  /** spec.notify: the owner is told of each new dead letter. */
  notifier?: Pick<Notifier, "notify">;
}

export class Finals {
  constructor(private readonly d: FinalsDeps) {}

  /** `subKey` undefined: the delivery names no usable subscription (its spec is invalid). */
  record(obj: DeliveryObject, final: Final, subKey: string | undefined, replay: boolean): void {
    if (!subKey) {
      this.d.events.record(deliveryRef(obj), "Warning", final.reason, final.message);
      return;
    }
    // A dead letter of stream mode counts its latency from the event's publish, like the stream did.
    this.count(final, subKey, replay, obj.metadata.annotations?.[ANNOTATIONS.eventTimestamp] ?? obj.metadata.creationTimestamp);
    if (final.phase === "Succeeded") {
      if (replay) this.d.events.record(deliveryRef(obj), "Normal", "Replayed", final.message);
    } else if (final.phase === "DeadLettered") {
      this.d.events.record(deliveryRef(obj), "Warning", replay ? "ReplayFailed" : "DeadLettered", final.message);
      // A new dead letter (not a failed replay of one), of an event that is not Hookline's own.
      const spec = obj.spec;
      if (!replay && Notifier.notifies(spec?.eventType)) {
        this.d.notifier?.notify(subKey, "delivery.dead_lettered", `dead-letter@${obj.metadata.uid ?? obj.metadata.name}`, {
          delivery: obj.metadata.name,
          eventId: spec?.eventId ?? obj.metadata.uid,
          eventType: spec?.eventType,
          reason: final.reason,
          message: final.message,
        });
      }
    } else if (final.reason === "Duplicate") {
      // A replay deduped a dead letter by its twin: nothing failed, the twin carries the event.
      this.d.events.record(deliveryRef(obj), "Normal", "ReplayDeduped", final.message);
    } else {
      this.d.events.record(deliveryRef(obj), "Warning", final.reason === "Poison" ? "ReplayFailed" : "Discarded", final.message);
    }
    this.d.rollUp(subKey);
  }

  /**
   * Stream mode: a message delivered. There is no object, so no Event (CR mode records none for
   * a delivery either); the latency runs from the event's publish (`publishedAt`, RFC 3339).
   */
  delivered(final: Final, subKey: string, publishedAt: string): void {
    this.count(final, subKey, false, publishedAt);
    this.d.rollUp(subKey);
  }

  /** The finished-deliveries counter, the latency of a success, the dead-letter operations, the subscription's counts. */
  private count(final: Final, subKey: string, replay: boolean, since: string | undefined): void {
    const { namespace, subscription } = subscriptionLabels(subKey);
    this.d.metrics.deliveriesFinished.inc({ namespace, subscription, phase: final.phase, reason: final.reason });
    const ep = this.d.endpoints.get(subKey);
    if (final.phase === "Succeeded") {
      this.d.metrics.delivered(namespace, subscription, since);
      if (ep) ep.succeededDelta++;
    } else if (final.phase === "DeadLettered") {
      if (!replay) this.d.metrics.dlqOperations.inc({ operation: "enqueue" });
    } else {
      if (ep) ep.discardedDelta++;
      if (final.reason === "Poison") this.d.metrics.dlqOperations.inc({ operation: "drop_poison" });
    }
  }
}
