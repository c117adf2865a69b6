// A delivery's payload, kept out of memory: when a delivery enters the cache its payload is
// summarized once per object version (serialized size, SHA-256, or why it cannot be sent) and
// removed from the cached object, so the operator's memory does not grow with payload bytes.
// An attempt reads the payload from the API server, builds the body, sends it and drops it.
import { createHash } from "node:crypto";
import { ANNOTATIONS, MAX_PAYLOAD_DEPTH } from "../api/names.js";
import { jsonDepth } from "../core/json-depth.js";
import { ignoreNotFound, type KubeClient } from "../kube/client.js";
import type { RawItem } from "../kube/reflector.js";
import { objectPath } from "../kube/types.js";
import { DELIVERIES, type DeliveryObject, type StoredDeliverySpec } from "./objects.js";
import type { RequestBody } from "./request.js";

export type PayloadSummary =
  /** `stripped`: the payload was removed from this (cached) object and must be read for an attempt. */
  | { ok: true; bytes: number; sha256: string; stripped: boolean }
  /** The payload cannot be sent (nested too deep, not serializable): the delivery is Discarded. */
  | { ok: false; message: string; stripped: boolean };

type Spec = StoredDeliverySpec;

/** By spec object: copies of a cached object (status written, new metadata) share its spec. */
const summaries = new WeakMap<object, PayloadSummary>();

function specOf(obj: DeliveryObject | RawItem): Spec | undefined {
  const spec: unknown = obj.spec;
  return typeof spec === "object" && spec !== null && !Array.isArray(spec) ? spec : undefined;
}

/** Size and hash of the payload as it is sent (`data` in the body; absent is `null`). */
export function summarize(payload: unknown, stripped = false): PayloadSummary {
  // Measured first, without recursion: JSON.stringify throws a RangeError at ~4,000 levels.
  if (jsonDepth(payload, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH) {
    return { ok: false, message: `payload is nested deeper than ${MAX_PAYLOAD_DEPTH} levels of arrays and objects`, stripped };
  }
  let text: string;
  try {
    text = JSON.stringify(payload ?? null);
  } catch (err) {
    return { ok: false, message: `payload cannot be serialized as JSON: ${(err as Error).message}`, stripped };
  }
  return { ok: true, bytes: Buffer.byteLength(text), sha256: createHash("sha256").update(text).digest("hex"), stripped };
}

/** For the delivery cache: records the summary of the item's payload and removes the payload. Never throws. */
export function stripPayload(item: RawItem): void {
  const spec = specOf(item);
  if (!spec) return;
  const had = "payload" in spec;
  summaries.set(spec, summarize(spec.payload, had));
  delete spec.payload;
}

/** The summary of a delivery's payload: recorded by the cache, or computed once for an object read in full. */
export function payloadSummary(obj: DeliveryObject): PayloadSummary {
  const spec = specOf(obj);
  if (!spec) return summarize(undefined);
  let s = summaries.get(spec);
  if (!s) summaries.set(spec, (s = summarize(spec.payload)));
  return s;
}

/** What plan() needs to know of the payload. */
export function payloadView(obj: DeliveryObject): { payloadBytes: number; payloadInvalid?: string } {
  const s = payloadSummary(obj);
  return s.ok ? { payloadBytes: s.bytes } : { payloadBytes: 0, payloadInvalid: s.message };
}

/** Bulk replay's dedupe key: (event id, payload hash). */
export function payloadKey(obj: DeliveryObject): string {
  const s = payloadSummary(obj);
  return `${webhookId(obj)}\u0000${s.ok ? s.sha256 : "invalid"}`;
}

export function webhookId(obj: DeliveryObject): string {
  return specOf(obj)?.eventId ?? obj.metadata.uid ?? obj.metadata.name;
}

/**
 * The body of one attempt. For a cached delivery the payload is read from the API server (the
 * watch cache answers `resourceVersion=0`; the payload is immutable, so any version of the same
 * object carries it). Undefined when the delivery no longer exists, or was deleted and created
 * again under its name (another delivery: the watch brings it).
 */
export async function loadRequestBody(client: KubeClient, obj: DeliveryObject, signal?: AbortSignal): Promise<RequestBody | undefined> {
  const spec = specOf(obj) ?? {};
  let payload: unknown;
  if ("payload" in spec) payload = spec.payload;
  else if (summaries.get(spec)?.stripped) {
    const full = await readFull(client, obj, signal);
    if (!full) return undefined;
    payload = specOf(full)?.payload;
  }
  const id = webhookId(obj);
  // A dead letter made by stream mode keeps its event's publish time (the delivery was created later).
  const timestamp = obj.metadata.annotations?.[ANNOTATIONS.eventTimestamp] ?? obj.metadata.creationTimestamp;
  return { id, body: webhookBody(id, spec.eventType, timestamp, JSON.stringify(payload ?? null)) };
}

/**
 * The webhook body, `{"id","type","timestamp","data"}`, with `data` as the given JSON text
 * (inserted as it is: stream mode passes the published bytes). The one template both modes send.
 */
export function webhookBody(id: string, type: string | undefined, timestamp: string | undefined, dataJson: string): string {
  return `{"id":${JSON.stringify(id)},"type":${JSON.stringify(type)},"timestamp":${JSON.stringify(timestamp ?? null)},"data":${dataJson}}`;
}

/** The delivery with its payload, from the watch cache, else from etcd; undefined when gone or replaced. */
async function readFull(client: KubeClient, obj: DeliveryObject, signal?: AbortSignal): Promise<DeliveryObject | undefined> {
  const path = objectPath(DELIVERIES, obj.metadata.namespace, obj.metadata.name);
  for (const resourceVersion of ["0", undefined]) {
    const full = await ignoreNotFound(client.request<DeliveryObject>({ method: "GET", path, query: { resourceVersion }, ...(signal ? { signal } : {}) }));
    if (full?.metadata.uid === obj.metadata.uid) return full;
  }
  return undefined;
}
