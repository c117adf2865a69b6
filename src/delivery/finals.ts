// What a delivery reaching a final phase (Succeeded, DeadLettered, Discarded) tells the world:
// the finished-deliveries counter and the create -> delivered latency, the dead-letter
// operations counter, an Event on the delivery, and the subscription's counts (rolled up).
import type { Final } from "../core/outcome.js";
import type { EventSink } from "../kube/events.js";
import type { Metrics } from "../observability/metrics.js";
import type { EndpointRegistry } from "./endpoints.js";
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
}

export class Finals {
  constructor(private readonly d: FinalsDeps) {}

  /** `subKey` undefined: the delivery names no usable subscription (its spec is invalid). */
  record(obj: DeliveryObject, final: Final, subKey: string | undefined, replay: boolean): void {
    if (!subKey) {
      this.d.events.record(deliveryRef(obj), "Warning", final.reason, final.message);
      return;
    }
    const { namespace, subscription } = subscriptionLabels(subKey);
    this.d.metrics.deliveriesFinished.inc({ namespace, subscription, phase: final.phase, reason: final.reason });
    const ep = this.d.endpoints.get(subKey);
    if (final.phase === "Succeeded") {
      this.d.metrics.delivered(namespace, subscription, obj.metadata.creationTimestamp);
      if (ep) ep.succeededDelta++;
      if (replay) this.d.events.record(deliveryRef(obj), "Normal", "Replayed", final.message);
    } else if (final.phase === "DeadLettered") {
      if (!replay) this.d.metrics.dlqOperations.inc({ operation: "enqueue" });
      this.d.events.record(deliveryRef(obj), "Warning", replay ? "ReplayFailed" : "DeadLettered", final.message);
    } else {
      if (ep) ep.discardedDelta++;
      if (final.reason === "Poison") this.d.metrics.dlqOperations.inc({ operation: "drop_poison" });
      this.d.events.record(deliveryRef(obj), "Warning", final.reason === "Poison" ? "ReplayFailed" : "Discarded", final.message);
    }
    this.d.rollUp(subKey);
  }
}
