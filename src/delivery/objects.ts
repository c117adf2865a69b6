// Hookline's three kinds as the operator holds them: their resource types, the object shapes in
// the caches, and the references Events and keys are made from. One place for "which
// subscription does this delivery belong to" and for the ObjectRef of either kind.
import type { DeliveryStatus } from "../api/delivery.js";
import { API_VERSION, DELIVERY, GROUP, REPLAY, SUBSCRIPTION, VERSION } from "../api/names.js";
import type { ReplayStatus } from "../api/replay.js";
import type { SubscriptionStatus } from "../api/subscription.js";
import { objectKey, splitKey, type KubeObject, type ObjectRef, type ResourceType } from "../kube/types.js";

export const SUBSCRIPTIONS: ResourceType = { group: GROUP, version: VERSION, plural: SUBSCRIPTION.plural };
export const DELIVERIES: ResourceType = { group: GROUP, version: VERSION, plural: DELIVERY.plural };
export const REPLAYS: ResourceType = { group: GROUP, version: VERSION, plural: REPLAY.plural };

/**
 * A delivery's spec as the cache holds it, before validation: the API server checked it
 * against the CRD it had, which may be older than this operator, so every field may be absent
 * (the cache also drops the payload: see payload.ts). caches.deliverySpec() validates it.
 */
export interface StoredDeliverySpec {
  subscriptionRef?: { name?: string };
  eventType?: string;
  eventId?: string;
  payload?: unknown;
  /** The producer's W3C trace context (src/api/trace-context.ts). */
  traceContext?: { traceparent?: string; tracestate?: string };
}

/** A subscription's spec is only ever read through caches.subscriptionSpec() (validated). */
export type SubscriptionObject = KubeObject<unknown, SubscriptionStatus>;
export type DeliveryObject = KubeObject<StoredDeliverySpec, DeliveryStatus>;
/** A WebhookReplay's spec is only ever read through replaySpecSchema (validated). */
export type ReplayObject = KubeObject<unknown, ReplayStatus>;

export function deliveryRef(obj: DeliveryObject): ObjectRef {
  return { apiVersion: API_VERSION, kind: DELIVERY.kind, namespace: obj.metadata.namespace!, name: obj.metadata.name, uid: obj.metadata.uid, resourceVersion: obj.metadata.resourceVersion };
}

export function replayRef(r: ReplayObject): ObjectRef {
  return { apiVersion: API_VERSION, kind: REPLAY.kind, namespace: r.metadata.namespace!, name: r.metadata.name, uid: r.metadata.uid };
}

export function subscriptionRef(sub: SubscriptionObject): ObjectRef {
  return { apiVersion: API_VERSION, kind: SUBSCRIPTION.kind, namespace: sub.metadata.namespace!, name: sub.metadata.name, uid: sub.metadata.uid, resourceVersion: sub.metadata.resourceVersion };
}

/** The key ("namespace/name") of the subscription a delivery names, if it names one. */
export function subscriptionKeyOf(d: DeliveryObject): string | undefined {
  const name = d.spec?.subscriptionRef?.name;
  return typeof name === "string" && name ? `${d.metadata.namespace}/${name}` : undefined;
}

/** The key of a delivery's subscription from the delivery's namespace and a subscription name. */
export function subscriptionKey(namespace: string, name: string): string {
  return objectKey({ namespace, name });
}

/** `{namespace, subscription}`: the label pair every per-subscription metric carries. */
export function subscriptionLabels(subKey: string): { namespace: string; subscription: string } {
  const { namespace, name } = splitKey(subKey);
  return { namespace, subscription: name };
}
