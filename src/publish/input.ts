// What a publish accepts, validated once for every door: the event type and id follow the
// WebhookDelivery CRD's own rules (so the API server never refuses what passed here), the data
// is any JSON value up to MAX_PAYLOAD_BYTES serialized and MAX_PAYLOAD_DEPTH levels deep.
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { deliverySpecSchema } from "../api/delivery.js";
import { MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH } from "../api/names.js";
import { jsonDepth } from "../core/request/json-depth.js";
import { normalizeTraceContext, type TraceContext } from "../core/request/trace-context.js";
import { PayloadTooLargeError, PublishInputError } from "./errors.js";

/** One event, as a producer hands it over. */
export interface PublishInput {
  /** Namespace of the subscriptions (and of the deliveries created). */
  namespace: string;
  /** Event type, e.g. `order.paid`: matched against each subscription's `eventTypes`. */
  type: string;
  /** Event id, the idempotency key; a random UUID when absent. Publish again with the same id to retry safely. */
  id?: string;
  /** The event data: any JSON value (null for none). */
  data: unknown;
}

/** A validated event with its id settled. */
export interface ValidEvent {
  namespace: string;
  type: string;
  id: string;
  data: unknown;
  /** Bytes of `data` serialized as JSON. */
  size: number;
}

const NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export const eventTypeSchema = deliverySpecSchema.shape.eventType;
export const eventIdSchema = deliverySpecSchema.shape.eventId.unwrap();

const inputSchema = z.object({
  namespace: z.string({ error: "must be a string" }).max(63, { message: "must be at most 63 characters" }).regex(NAMESPACE, { message: "must be a namespace name (lowercase RFC 1123 label)" }),
  type: z.string({ error: (iss) => (iss.input === undefined ? "is required, e.g. order.paid" : "must be a string such as order.paid") }).pipe(eventTypeSchema),
  id: z.string({ error: "must be a string" }).pipe(eventIdSchema).optional(),
  data: z.unknown().optional(),
});

/** The first problem of a zod error, as the field it is about and a sentence naming it. */
function firstIssue(err: z.ZodError): PublishInputError {
  const issue = err.issues[0]!;
  const field = issue.path.map(String).join(".") || "event";
  let message = issue.message;
  if (issue.code === "too_big" && field !== "namespace") message = `must be at most ${String(issue.maximum)} characters`;
  if (issue.code === "too_small") message = "must not be empty";
  return new PublishInputError(field, `${field} ${message}`);
}

/** Serialized size of `data` in bytes; throws PublishInputError when it is not JSON. */
export function jsonSize(data: unknown): number {
  let text: string | undefined;
  try {
    text = JSON.stringify(data);
  } catch (err) {
    throw new PublishInputError("data", `data is not serializable as JSON: ${(err as Error).message}`);
  }
  if (text === undefined) throw new PublishInputError("data", "data is not a JSON value");
  return Buffer.byteLength(text, "utf8");
}

/** Validates an event; throws PublishInputError (or PayloadTooLargeError) naming the field. */
export function validateEvent(input: unknown, newId: () => string = randomUUID): ValidEvent {
  if (typeof input !== "object" || input === null || Array.isArray(input)) throw new PublishInputError("event", "the event must be an object with namespace, type, id and data");
  const parsed = inputSchema.safeParse(input);
  if (!parsed.success) throw firstIssue(parsed.error);
  const { namespace, type, id, data } = parsed.data;
  if (data === undefined) throw new PublishInputError("data", "data is required: the event's JSON payload (null for none)");
  // Before serializing: deeper data would overflow JSON.stringify's stack (and the operator's).
  if (jsonDepth(data, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH) throw new PublishInputError("data", `data is nested deeper than ${MAX_PAYLOAD_DEPTH} levels of arrays and objects`);
  const size = jsonSize(data);
  if (size > MAX_PAYLOAD_BYTES) throw new PayloadTooLargeError(size, MAX_PAYLOAD_BYTES);
  return { namespace, type, id: id ?? newId(), data, size };
}

/**
 * A producer's W3C trace context in the stored form (spec.traceContext: higher versions
 * downgraded, whitespace dropped, a tracestate above 512 characters truncated by whole
 * entries), or a PublishInputError naming `traceContext.traceparent` or
 * `traceContext.tracestate`. Undefined stays undefined.
 */
export function validateTraceContext(trace: unknown): TraceContext | undefined {
  if (trace === undefined) return undefined;
  if (typeof trace !== "object" || trace === null || Array.isArray(trace)) throw new PublishInputError("traceContext", "traceContext must be an object {traceparent, tracestate?}");
  const { traceparent, tracestate } = trace as Record<string, unknown>;
  if (typeof traceparent !== "string") throw new PublishInputError("traceContext.traceparent", "traceContext.traceparent is required: a W3C traceparent such as 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  if (tracestate !== undefined && typeof tracestate !== "string") throw new PublishInputError("traceContext.tracestate", "traceContext.tracestate must be a string");
  const r = normalizeTraceContext({ traceparent, tracestate });
  if (!r.ok) throw new PublishInputError(`traceContext.${r.field}`, r.message);
  return r.value;
}
