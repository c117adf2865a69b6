// What a publish answers: the deliveries it made or found, and the subscriptions it skipped.
// Its own module: the errors (which carry a partial result) and the fan-out both use it.
export interface DeliveryResult {
  subscription: string;
  /** Name of the WebhookDelivery (`kubectl get whdel NAME`). */
  name: string;
  /** `created` now, or `existing`: an earlier publish of this event id created it. */
  result: "created" | "existing";
}

/** A subscription that wants the event type but gets no delivery, and why. */
export interface SkippedSubscription {
  subscription: string;
  /**
   * Paused, Deleting; Filtered: its spec.filter is false for this event; FilterError: its filter
   * failed on this event (message says why: a missing field, over the cost budget); InvalidFilter:
   * its filter does not compile (the subscription is Ready=False, InvalidFilter).
   */
  reason: "Paused" | "Deleting" | "Filtered" | "FilterError" | "InvalidFilter";
  message?: string;
}

export interface PublishResult {
  /** The event id (generated when the input had none): publish again with it to retry safely. */
  id: string;
  namespace: string;
  type: string;
  /** One entry per matching subscription, sorted by subscription name. */
  deliveries: DeliveryResult[];
  skipped: SkippedSubscription[];
}
