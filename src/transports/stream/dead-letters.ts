// Stream mode's final outcomes other than delivered become custom resources, as in CR mode: a
// WebhookDelivery for the subscription (spec: subscriptionRef, eventType, eventId, payload,
// traceContext), then one status write with the outcome core/attempt/outcome.ts computed (attempt
// history, deadLetter or discard reason), so replay, the field selector, retention, the
// dashboard and every dead-letter rule work on it unchanged.
//
// The name is deterministic, like the publish doors' (deliveryName(event id, subscription)),
// and the annotation hookline.dev/stream-message records the message it came from. A crash
// between the create and the acknowledgement redelivers the message, which finds its own
// delivery (AlreadyExists, same message) and only completes what is missing. A delivery of the
// same name that is not this message's (the same event id published in CR mode, or again after
// the duplicate window) leaves it alone: the dead letter takes a second name, with a hash of the
// message in it. Until its status is written, CR mode never attempts it (core/attempt/plan.ts).
//
// A message published before the doors refused event ids that cannot be a header value (a
// control character, non-ASCII, a blank at either end) carries one that spec.eventId refuses:
// its dead letter holds `sha256:<hex>` of the id instead (as its Nats-Msg-Id does), so it is
// recorded once rather than refused by the API server every time the message comes back.
//
// A failure to create it is reported loudly (dead-letter-failures.ts) before the caller keeps
// the message and tries again.
import { EVENT_ID_PATTERN } from "../../api/delivery.js";
import { ANNOTATIONS, API_VERSION, DELIVERY, FIELD_MANAGER, isTerminalPhase, LABELS } from "../../api/names.js";
import type { Final, OutcomeResult } from "../../core/attempt/outcome.js";
import type { TraceContext } from "../../core/request/trace-context.js";
import { ApiError, type KubeClient } from "../../kube/client.js";
import { collectionPath, objectKey } from "../../kube/types.js";
import { deliveryName, labelValue } from "../../publish/naming.js";
import { hashedId } from "../../jetstream/message.js";
import type { OutcomeMeta } from "../../delivery/finals.js";
import { DELIVERIES, type DeliveryObject } from "../../delivery/objects.js";
import type { OutcomeWriter } from "../../delivery/outcome-writer.js";
import { DeadLetterFailures, type DeadLetterFailuresDeps } from "./dead-letter-failures.js";

/** One message's final outcome, to be recorded as a WebhookDelivery. */
export interface StreamFinal {
  namespace: string;
  subscription: string;
  eventId: string;
  eventType: string;
  /** The event's publish time (RFC 3339): sent as `timestamp` by a replay. */
  timestamp: string;
  /** The event data as a JSON value; undefined when it cannot be kept (an invalid payload, discarded). */
  payload: unknown;
  /** `<stream>/<sequence>` of the message. */
  origin: string;
  /** [tracing] The message's trace context: kept as spec.traceContext, so a replay is in the producer's trace. */
  traceContext?: TraceContext | undefined;
  result: OutcomeResult;
}

export interface Recorded {
  obj: DeliveryObject;
  /** The final phase written now; undefined when an earlier delivery of this message had it already. */
  final?: Final;
}

export interface StreamDeadLettersDeps extends DeadLetterFailuresDeps {
  client: KubeClient;
  outcomes: OutcomeWriter<OutcomeMeta>;
}

/** The event id as spec.eventId can hold it: itself, or its hashed form when it cannot be a header value. */
export function storableEventId(id: string): string {
  return EVENT_ID.test(id) ? id : hashedId(id);
}

const EVENT_ID = new RegExp(EVENT_ID_PATTERN);

/** The names a message's dead letter may take, the readable one first. */
export function deadLetterNames(eventId: string, subscription: string, origin: string): [string, string] {
  return [deliveryName(eventId, subscription), deliveryName(`${eventId}\u0000${origin}`, subscription)];
}

export class StreamDeadLetters {
  private readonly failures: DeadLetterFailures;

  constructor(private readonly d: StreamDeadLettersDeps) {
    this.failures = new DeadLetterFailures(d);
  }

  /** Creates the delivery (or finds this message's own) and writes its final status; a failure is reported, then thrown. */
  async record(f: StreamFinal): Promise<Recorded> {
    try {
      return await this.recordOnce(f);
    } catch (err) {
      this.failures.report(f.namespace, f.subscription, err);
      throw err;
    }
  }

  private async recordOnce(f: StreamFinal): Promise<Recorded> {
    for (const name of deadLetterNames(f.eventId, f.subscription, f.origin)) {
      let obj: DeliveryObject | undefined;
      try {
        obj = await this.d.client.request<DeliveryObject>({ method: "POST", path: collectionPath(DELIVERIES, f.namespace), query: { fieldManager: FIELD_MANAGER }, body: this.body(f, name) });
      } catch (err) {
        if (!(err instanceof ApiError && err.isAlreadyExists)) throw err;
        obj = await this.d.outcomes.fetch(objectKey({ namespace: f.namespace, name }));
        if (!obj || !this.ours(obj, f)) continue;
        if (isTerminalPhase(obj.status?.phase)) return { obj };
      }
      const key = objectKey(obj.metadata);
      const written = await this.d.outcomes.write(key, obj, () => f.result);
      if (!written) throw new Error(`dead letter ${key} was deleted before its status was written`);
      return { obj: written.obj, ...(written.final ? { final: written.final } : {}) };
    }
    throw new Error(`both names of the dead letter of ${f.origin} for ${f.namespace}/${f.subscription} are taken by other deliveries`);
  }

  private ours(obj: DeliveryObject, f: StreamFinal): boolean {
    return obj.metadata.annotations?.[ANNOTATIONS.streamMessage] === f.origin && obj.spec?.subscriptionRef?.name === f.subscription;
  }

  private body(f: StreamFinal, name: string): Record<string, unknown> {
    return {
      apiVersion: API_VERSION,
      kind: DELIVERY.kind,
      metadata: {
        name,
        namespace: f.namespace,
        labels: { [LABELS.subscription]: labelValue(f.subscription), [LABELS.eventId]: labelValue(f.eventId) },
        annotations: { [ANNOTATIONS.streamMessage]: f.origin, [ANNOTATIONS.eventTimestamp]: f.timestamp },
      },
      spec: {
        subscriptionRef: { name: f.subscription },
        eventType: f.eventType,
        eventId: storableEventId(f.eventId),
        // A null payload is sent as `data: null`, as the publish doors do.
        ...(f.payload === undefined || f.payload === null ? {} : { payload: f.payload }),
        ...(f.traceContext ? { traceContext: f.traceContext } : {}),
      },
    };
  }
}
