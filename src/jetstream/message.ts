// What one stream message carries: one event, written once by a publish door and read by every
// subscription's consumer. Pure; the one place that knows the format (docs/adr/0007).
//
//   subject   hookline.<namespace>.<encoded type>              (subjects.ts)
//   headers   Nats-Msg-Id: <namespace>/<event id>               the duplicate window's key
//             traceparent, tracestate                           W3C trace context, when given
//   body      {"id":…,"type":…,"namespace":…,"timestamp":…,"data":<data>}
//
// The body is JSON, readable with any NATS tool, with `data` last and written exactly once:
// the bytes of JSON.stringify(data) at publish time. The decoder finds them without
// re-serializing anything (the first `,"data":` cannot be inside one of the four strings before
// it: JSON escapes every quote there), so a consumer signs and sends the very bytes that were
// published, whatever their characters. It accepts only what the encoder writes.
//
// The Nats-Msg-Id holds the namespace because the stream holds every namespace: one tenant's
// event id must never suppress another's as a duplicate. An id that is not visible ASCII (an
// inner space, which the doors take; control characters and non-ASCII, which they refuse since
// such an id cannot be the webhook-id header, but a message published before may hold) is not
// used as it is, so it is replaced by `sha256:` and the hex SHA-256 of its JSON form; an id that
// itself starts with `sha256:` is replaced too, so the two forms never meet.
import { createHash } from "node:crypto";
import { MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH } from "../api/names.js";
import { jsonDepth } from "../core/request/json-depth.js";
import { fromRfc3339 } from "../core/rfc3339.js";
import { normalizeTraceContext, type TraceContext } from "../core/request/trace-context.js";
import { eventSubject, parseEventSubject, SubjectError } from "./subjects.js";

export const MSG_ID_HEADER = "Nats-Msg-Id";
export const TRACEPARENT_HEADER = "traceparent";
export const TRACESTATE_HEADER = "tracestate";

/** Room for everything but `data`: the envelope's keys, an id of 256 escaped characters, type, namespace, timestamp, headers. */
export const ENVELOPE_BYTES = 16 * 1024;
/** The stream's max_msg_size: the largest data plus the envelope. */
export const MAX_MESSAGE_BYTES = MAX_PAYLOAD_BYTES + ENVELOPE_BYTES;
export const MAX_ID_LENGTH = 256;

/** One event as the publish doors hand it to the stream (already validated by publish/input.ts). */
export interface StreamEvent {
  id: string;
  type: string;
  namespace: string;
  /** RFC 3339: when the event was published (the webhook body's `timestamp`). */
  timestamp: string;
  /** Any JSON value. */
  data: unknown;
}

/** W3C trace context (https://www.w3.org/TR/trace-context/), carried as headers of the same names. */
export type { TraceContext } from "../core/request/trace-context.js";

export interface OutgoingMessage {
  subject: string;
  /** The Nats-Msg-Id header (also in `headers`). */
  msgId: string;
  headers: Array<[name: string, value: string]>;
  body: Uint8Array;
  /** Bytes of `data` in the body. */
  dataBytes: number;
}

/** A decoded stream message: the envelope, and `data` as the exact bytes that were published. */
export interface StreamMessage {
  id: string;
  type: string;
  namespace: string;
  timestamp: string;
  /** The JSON of the event's data, byte for byte as published (a view into the message body). */
  data: Uint8Array;
  traceContext?: TraceContext;
  subject: string;
  msgId: string;
}

/** A message Hookline cannot write or read; `field` names the part at fault. */
export class StreamMessageError extends Error {
  override readonly name = "StreamMessageError";
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const ENCODER = new TextEncoder();
const DATA_KEY = ENCODER.encode(',"data":');
const CLOSE = 0x7d; // "}"
const HASHED = "sha256:";
const VISIBLE_ASCII = /^[\x21-\x7e]+$/;

/** The Nats-Msg-Id of event `id` in `namespace`: `<namespace>/<id>`, or `<namespace>/sha256:<hex>` for an id that cannot be a header value. */
export function messageId(namespace: string, id: string): string {
  if (VISIBLE_ASCII.test(id) && !id.startsWith(HASHED)) return `${namespace}/${id}`;
  return `${namespace}/${hashedId(id)}`;
}

/** `sha256:` and the hex SHA-256 of the id's JSON form: an id any header (and spec.eventId) can carry. */
export function hashedId(id: string): string {
  return `${HASHED}${createHash("sha256").update(JSON.stringify(id)).digest("hex")}`;
}

/**
 * Why a trace context cannot be carried, or undefined when it is valid: the one rule of every
 * door (src/core/request/trace-context.ts), which also says what is carried (the stored form).
 */
export function traceContextProblem(trace: TraceContext): { field: string; message: string } | undefined {
  const r = normalizeTraceContext(trace);
  return r.ok ? undefined : { field: `traceContext.${r.field}`, message: r.message };
}

function head(id: string, type: string, namespace: string, timestamp: string): string {
  return `{"id":${JSON.stringify(id)},"type":${JSON.stringify(type)},"namespace":${JSON.stringify(namespace)},"timestamp":${JSON.stringify(timestamp)}`;
}

function checkEnvelope(id: unknown, timestamp: unknown): void {
  if (typeof id !== "string" || id.length === 0 || id.length > MAX_ID_LENGTH) throw new StreamMessageError("id", `id must be a string of 1 to ${MAX_ID_LENGTH} characters`);
  if (typeof timestamp !== "string" || fromRfc3339(timestamp) === undefined) throw new StreamMessageError("timestamp", `timestamp ${JSON.stringify(timestamp)} is not an RFC 3339 time`);
}

function subjectOf(namespace: string, type: string): string {
  try {
    return eventSubject(namespace, type);
  } catch (err) {
    if (err instanceof SubjectError) throw new StreamMessageError(err.field, err.message);
    throw err;
  }
}

/** The message of one event. Throws StreamMessageError naming the field (the doors validate first, so this is a last guard). */
export function encodeMessage(event: StreamEvent, trace?: TraceContext): OutgoingMessage {
  checkEnvelope(event.id, event.timestamp);
  const subject = subjectOf(event.namespace, event.type);
  // Before serializing: deeper data would overflow JSON.stringify's stack.
  if (jsonDepth(event.data, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH) throw new StreamMessageError("data", `data is nested deeper than ${MAX_PAYLOAD_DEPTH} levels of arrays and objects`);
  let dataText: string | undefined;
  try {
    dataText = JSON.stringify(event.data);
  } catch (err) {
    throw new StreamMessageError("data", `data is not serializable as JSON: ${(err as Error).message}`);
  }
  if (dataText === undefined) throw new StreamMessageError("data", "data is not a JSON value");
  const data = ENCODER.encode(dataText);
  if (data.length > MAX_PAYLOAD_BYTES) throw new StreamMessageError("data", `data is ${data.length} bytes serialized as JSON; the limit is ${MAX_PAYLOAD_BYTES} bytes`);
  const prefix = ENCODER.encode(`${head(event.id, event.type, event.namespace, event.timestamp)},"data":`);
  const body = new Uint8Array(prefix.length + data.length + 1);
  body.set(prefix, 0);
  body.set(data, prefix.length);
  body[body.length - 1] = CLOSE;

  const msgId = messageId(event.namespace, event.id);
  const headers: Array<[string, string]> = [[MSG_ID_HEADER, msgId]];
  if (trace) {
    const r = normalizeTraceContext(trace);
    if (!r.ok) throw new StreamMessageError(`traceContext.${r.field}`, r.message);
    headers.push([TRACEPARENT_HEADER, r.value.traceparent]);
    if (r.value.tracestate !== undefined) headers.push([TRACESTATE_HEADER, r.value.tracestate]);
  }
  return { subject, msgId, headers, body, dataBytes: data.length };
}

function indexOf(haystack: Uint8Array, needle: Uint8Array): number {
  return Buffer.from(haystack.buffer, haystack.byteOffset, haystack.byteLength).indexOf(needle);
}

function utf8(bytes: Uint8Array, field: string): string {
  try {
    return UTF8.decode(bytes);
  } catch {
    throw new StreamMessageError(field, `the message ${field} is not valid UTF-8`);
  }
}

/** Reads the headers a consumer needs; `get` answers "" or undefined for a missing header (nats.js MsgHdrs does). */
export interface HeaderReader {
  get(name: string): string | undefined;
}

/**
 * Decodes a stream message: the envelope, and `data` as a view of the exact published bytes
 * (valid JSON, at most MAX_PAYLOAD_BYTES, at most MAX_PAYLOAD_DEPTH deep). Throws
 * StreamMessageError naming what is wrong: such a message is poison, not retryable.
 */
export function decodeMessage(msg: { subject: string; headers?: HeaderReader | undefined; data: Uint8Array }): StreamMessage {
  const body = msg.data;
  if (body.length > MAX_MESSAGE_BYTES) throw new StreamMessageError("body", `the message is ${body.length} bytes; the limit is ${MAX_MESSAGE_BYTES}`);
  const { at, id, type, namespace, timestamp } = readEnvelope(body);
  const subject = subjectOf(namespace, type);
  if (msg.subject !== subject || !parseEventSubject(msg.subject)) throw new StreamMessageError("subject", `the message's subject ${JSON.stringify(msg.subject)} is not the subject of its event (${subject})`);
  const msgId = messageId(namespace, id);
  const header = msg.headers?.get(MSG_ID_HEADER) || undefined;
  if (header !== msgId) throw new StreamMessageError(MSG_ID_HEADER, `the ${MSG_ID_HEADER} header ${JSON.stringify(header ?? null)} is not the one of event ${JSON.stringify(id)} (${msgId})`);
  const data = readData(body.subarray(at + DATA_KEY.length, body.length - 1));
  const out: StreamMessage = { id, type, namespace, timestamp, data, subject, msgId };
  const traceContext = readTraceContext(msg.headers);
  if (traceContext) out.traceContext = traceContext;
  return out;
}

/**
 * The envelope (id, type, namespace, timestamp) of a message decodeMessage refused, when it can
 * be read: such a message is one event whose data cannot be sent (it is discarded by its
 * name, as CR mode discards an invalid payload). Undefined when not even that can be read.
 */
export function readEventHead(msg: { data: Uint8Array }): { id: string; type: string; namespace: string; timestamp: string } | undefined {
  try {
    const { id, type, namespace, timestamp } = readEnvelope(msg.data);
    return { id, type, namespace, timestamp };
  } catch {
    return undefined;
  }
}

const NOT_AN_EVENT = 'the message body is not a Hookline event ({"id","type","namespace","timestamp","data"})';

/** The envelope before `data`, in the encoder's exact form; `at` is where `,"data":` starts. */
function readEnvelope(body: Uint8Array): { at: number; id: string; type: string; namespace: string; timestamp: string } {
  const at = indexOf(body, DATA_KEY);
  if (at < 0 || body[body.length - 1] !== CLOSE) throw new StreamMessageError("body", NOT_AN_EVENT);
  const text = utf8(body.subarray(0, at), "body");
  let envelope: unknown;
  try {
    envelope = JSON.parse(`${text}}`);
  } catch (err) {
    if (err instanceof StreamMessageError) throw err;
    throw new StreamMessageError("body", `the message envelope is not valid JSON: ${(err as Error).message}`);
  }
  const e = envelope as Record<string, unknown>;
  if (typeof envelope !== "object" || envelope === null || Object.keys(e).join() !== "id,type,namespace,timestamp") throw new StreamMessageError("body", NOT_AN_EVENT);
  checkEnvelope(e.id, e.timestamp);
  if (typeof e.type !== "string") throw new StreamMessageError("type", "type must be a string");
  if (typeof e.namespace !== "string") throw new StreamMessageError("namespace", "namespace must be a string");
  const out = { at, id: e.id as string, type: e.type, namespace: e.namespace, timestamp: e.timestamp as string };
  // Only the encoder's exact form: then the data starts right after the key. The text is the
  // envelope's bytes decoded strictly (invalid UTF-8 refused, a BOM kept), so the same text and
  // byte length is the same bytes.
  const expected = head(out.id, out.type, out.namespace, out.timestamp);
  if (text !== expected || Buffer.byteLength(expected) !== at) throw new StreamMessageError("body", "the message envelope is not in the form Hookline writes");
  return out;
}

/** `data`'s bytes, checked: valid UTF-8 and JSON, within the size and depth limits. */
function readData(data: Uint8Array): Uint8Array {
  if (data.length > MAX_PAYLOAD_BYTES) throw new StreamMessageError("data", `data is ${data.length} bytes; the limit is ${MAX_PAYLOAD_BYTES} bytes`);
  let value: unknown;
  try {
    value = JSON.parse(utf8(data, "data"));
  } catch (err) {
    if (err instanceof StreamMessageError) throw err;
    throw new StreamMessageError("data", `data is not valid JSON: ${(err as Error).message}`);
  }
  if (jsonDepth(value, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH) throw new StreamMessageError("data", `data is nested deeper than ${MAX_PAYLOAD_DEPTH} levels of arrays and objects`);
  return data;
}

/** The trace context headers in the stored form; an invalid one is dropped, as W3C asks of receivers (the event itself is fine). */
function readTraceContext(headers: HeaderReader | undefined): TraceContext | undefined {
  const traceparent = headers?.get(TRACEPARENT_HEADER) || undefined;
  if (traceparent === undefined) return undefined;
  const tracestate = headers?.get(TRACESTATE_HEADER) || undefined;
  const r = normalizeTraceContext({ traceparent, tracestate });
  if (r.ok) return r.value;
  if (r.field !== "tracestate") return undefined;
  // A bad tracestate does not cost the traceparent (W3C: failing to parse tracestate MUST NOT affect traceparent).
  const parentOnly = normalizeTraceContext({ traceparent });
  return parentOnly.ok ? parentOnly.value : undefined;
}

/** `data` as text (for the webhook body), decoded whole and strictly. */
export function dataText(message: StreamMessage): string {
  return utf8(message.data, "data");
}
