// A JetStream message made a WebhookDelivery: the object stream mode creates for a message's dead
// letter (dead-letters.ts) and for each event of an ordered subscription (ordered-handoff.ts).
// spec: subscriptionRef, eventType, eventId, payload, traceContext; an annotation naming the
// message (`<stream>/<sequence>`), which says which of the two it is, and the publish time.
//
// The name is deterministic, like the publish doors' (deliveryName(event id, subscription)). A
// crash between the create and the acknowledgement redelivers the message, which finds its own
// delivery (AlreadyExists, same message, same annotation). A delivery of the same name that is
// not this message's (the same event id published in CR mode, or again after the duplicate
// window) is left alone: the message's delivery takes a second name, with a hash of the message
// in it.
//
// A message published before the doors refused event ids that cannot be a header value (a
// control character, non-ASCII, a blank at either end) carries one that spec.eventId refuses:
// its delivery holds `sha256:<hex>` of the id instead (as its Nats-Msg-Id does), so it is
// recorded once rather than refused by the API server every time the message comes back.
import { EVENT_ID_PATTERN } from "../../api/delivery.js";
import { ANNOTATIONS, API_VERSION, DELIVERY, FIELD_MANAGER, LABELS } from "../../api/names.js";
import type { TraceContext } from "../../core/request/trace-context.js";
import { ApiError, type KubeClient } from "../../kube/client.js";
import { collectionPath, objectKey } from "../../kube/types.js";
import { deliveryName, labelValue } from "../../publish/naming.js";
import { hashedId } from "../../jetstream/message.js";
import type { OutcomeMeta } from "../../delivery/finals.js";
import { DELIVERIES, type DeliveryObject } from "../../delivery/objects.js";
import type { OutcomeWriter } from "../../delivery/outcome-writer.js";

/** One message's event, as a WebhookDelivery holds it. */
export interface MessageEvent {
  namespace: string;
  subscription: string;
  eventId: string;
  eventType: string;
  /** The event's publish time (RFC 3339): sent as `timestamp`, by a replay too. */
  timestamp: string;
  /** The event data as a JSON value; undefined when it cannot be kept (an invalid payload, discarded). */
  payload: unknown;
  /** `<stream>/<sequence>` of the message. */
  origin: string;
  /** [tracing] The message's trace context: kept as spec.traceContext, so a replay is in the producer's trace. */
  traceContext?: TraceContext | undefined;
}

/** Which delivery of a message: its dead letter, or an ordered subscription's delivery. */
export type MessageMark = typeof ANNOTATIONS.streamMessage | typeof ANNOTATIONS.streamOrdered;

/** The event id as spec.eventId can hold it: itself, or its hashed form when it cannot be a header value. */
export function storableEventId(id: string): string {
  return EVENT_ID.test(id) ? id : hashedId(id);
}

const EVENT_ID = new RegExp(EVENT_ID_PATTERN);

/** The names a message's delivery may take, the readable one first. */
export function messageDeliveryNames(eventId: string, subscription: string, origin: string): [string, string] {
  return [deliveryName(eventId, subscription), deliveryName(`${eventId}\u0000${origin}`, subscription)];
}

export interface MadeDelivery {
  obj: DeliveryObject;
  /** False when it existed already: this message's own, made before a crash or a hand-back. */
  created: boolean;
}

/** Creates the message's delivery, or finds its own; throws what the API server answered otherwise. */
export async function createMessageDelivery(client: KubeClient, outcomes: OutcomeWriter<OutcomeMeta>, e: MessageEvent, mark: MessageMark): Promise<MadeDelivery> {
  for (const name of messageDeliveryNames(e.eventId, e.subscription, e.origin)) {
    try {
      const obj = await client.request<DeliveryObject>({ method: "POST", path: collectionPath(DELIVERIES, e.namespace), query: { fieldManager: FIELD_MANAGER }, body: messageDeliveryBody(e, name, mark) });
      return { obj, created: true };
    } catch (err) {
      if (!(err instanceof ApiError && err.isAlreadyExists)) throw err;
      const obj = await outcomes.fetch(objectKey({ namespace: e.namespace, name }));
      if (obj && madeFrom(obj, e, mark)) return { obj, created: false };
    }
  }
  throw new Error(`both names of the delivery of ${e.origin} for ${e.namespace}/${e.subscription} are taken by other deliveries`);
}

function madeFrom(obj: DeliveryObject, e: MessageEvent, mark: MessageMark): boolean {
  return obj.metadata.annotations?.[mark] === e.origin && obj.spec?.subscriptionRef?.name === e.subscription;
}

export function messageDeliveryBody(e: MessageEvent, name: string, mark: MessageMark): Record<string, unknown> {
  return {
    apiVersion: API_VERSION,
    kind: DELIVERY.kind,
    metadata: {
      name,
      namespace: e.namespace,
      labels: { [LABELS.subscription]: labelValue(e.subscription), [LABELS.eventId]: labelValue(e.eventId) },
      annotations: { [mark]: e.origin, [ANNOTATIONS.eventTimestamp]: e.timestamp },
    },
    spec: {
      subscriptionRef: { name: e.subscription },
      eventType: e.eventType,
      eventId: storableEventId(e.eventId),
      // A null payload is sent as `data: null`, as the publish doors do.
      ...(e.payload === undefined || e.payload === null ? {} : { payload: e.payload }),
      ...(e.traceContext ? { traceContext: e.traceContext } : {}),
    },
  };
}
