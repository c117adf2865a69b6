// Publishing in stream mode (HOOKLINE_NATS_URL / --nats / the `nats` option): the same event
// validation as the CR path (input.ts), then ONE JetStream message per event, whatever the
// number of subscriptions (JetStream fans it out to their consumers), and the publish returns
// once JetStream acknowledged the write: stored, not delivered. The event id is the
// idempotency key through the stream's duplicate window (Nats-Msg-Id). Shared by the three
// doors: the library (src/index.ts), `hookline publish --nats` and the HTTP door (server.ts).
import { toRfc3339 } from "../core/rfc3339.js";
import type { StreamAck } from "../jetstream/jetstream.js";
import { encodeMessage, StreamMessageError, type OutgoingMessage, type TraceContext } from "../jetstream/message.js";
import { PublishInputError } from "./errors.js";
import { validateEvent, validateTraceContext, type PublishInput } from "./input.js";

/** Where stream-mode events go: a StreamConnection (src/jetstream/jetstream.ts) is one. */
export interface StreamPublisher {
  publish(message: OutgoingMessage, opts?: { timeoutMs?: number }): Promise<StreamAck>;
}

export interface StreamPublishResult {
  /** The event id (generated when the input had none): publish again with it to retry safely. */
  id: string;
  namespace: string;
  type: string;
  mode: "stream";
  /** The JetStream stream that stored the event, and its sequence there. */
  stream: string;
  seq: number;
  /**
   * `published`: stored now. `duplicate`: an event with this id was published in this
   * namespace within the stream's duplicate window; it is stored once, and this publish is not.
   */
  result: "published" | "duplicate";
}

export interface StreamPublishOptions {
  /** Id generator for events without one; default crypto.randomUUID. */
  newId?: () => string;
  /** Epoch ms of the publish, the event's `timestamp`; default Date.now. */
  now?: () => number;
  /** W3C trace context to carry with the event (headers traceparent, tracestate), validated and normalized as in CR mode. */
  traceContext?: TraceContext;
  /** How long to wait for JetStream's acknowledgement. */
  timeoutMs?: number;
}

/**
 * Publishes one event to the stream. Throws PublishInputError / PayloadTooLargeError (as the CR
 * path does) for a bad event, and StreamUnavailableError when JetStream cannot take it now
 * (not reachable, no acknowledgement in time, refused): publishing the same id again is safe.
 */
export async function publishToStream(publisher: StreamPublisher, input: PublishInput, opts: StreamPublishOptions = {}): Promise<StreamPublishResult> {
  const event = validateEvent(input, opts.newId);
  const traceContext = validateTraceContext(opts.traceContext);
  let message: OutgoingMessage;
  try {
    message = encodeMessage({ id: event.id, type: event.type, namespace: event.namespace, timestamp: toRfc3339((opts.now ?? Date.now)()), data: event.data }, traceContext);
  } catch (err) {
    if (err instanceof StreamMessageError) throw new PublishInputError(err.field, err.message);
    throw err;
  }
  const ack = await publisher.publish(message, opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {});
  return { id: event.id, namespace: event.namespace, type: event.type, mode: "stream", stream: ack.stream, seq: ack.seq, result: ack.duplicate ? "duplicate" : "published" };
}
