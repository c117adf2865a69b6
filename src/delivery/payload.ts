// A delivery's payload, kept out of memory: when a delivery enters the cache its payload is
// summarized once (serialized size, dedupe key, or why it cannot be sent) and removed from the
// cached object, so the operator's memory does not grow with payload bytes. The payload is
// immutable (the CRD's rule), so later versions of the same object (status writes, its deletion)
// take the summary of the version before them instead of serializing and hashing it again.
// An attempt takes the payload from the bounded kept payloads (kept-payloads.ts) or reads it from
// the API server, builds the body, sends it and drops it.
import { createHash } from "node:crypto";
import { ANNOTATIONS, MAX_PAYLOAD_DEPTH } from "../api/names.js";
import { jsonDepth } from "../core/request/json-depth.js";
import { orderingValue, type OrderingKey } from "../core/ordering-key.js";
import { ignoreNotFound, type KubeClient } from "../kube/client.js";
import { DEFERRED, type RawItem } from "../kube/reflector.js";
import { objectPath } from "../kube/types.js";
import { DELIVERIES, type DeliveryObject, type StoredDeliverySpec } from "./objects.js";
import type { RequestBody } from "./engine/request.js";
import type { KeptPayloads } from "./kept-payloads.js";

export type PayloadSummary =
  /**
   * `stripped`: the payload was removed from this (cached) object and must be read for an attempt.
   * `dedupe`: SHA-256 of the webhook id (as JSON) followed by the serialized payload, the DLQ
   * specification's dedupe key. `ordering`: the values at the ordering keys asked for when it was
   * stripped (payload keys only; undefined: no value there).
   */
  | { ok: true; bytes: number; dedupe: string; stripped: boolean; ordering?: Map<string, string | undefined> }
  /** The payload cannot be sent (nested too deep, not serializable): the delivery is Discarded. */
  | { ok: false; message: string; stripped: boolean };

type Spec = StoredDeliverySpec;

/** By spec object: copies of a cached object (status written, new metadata) share its spec. */
const summaries = new WeakMap<object, PayloadSummary>();

function specOf(obj: DeliveryObject | RawItem): Spec | undefined {
  const spec: unknown = obj.spec;
  return typeof spec === "object" && spec !== null && !Array.isArray(spec) ? spec : undefined;
}

/** An ordering key the cache should extract while it still has the payload. */
export interface OrderingToExtract {
  key: string;
  parsed: OrderingKey;
}

/**
 * Size and hashes of the payload as it is sent (`data` in the body; absent is `null`), and the
 * values at `orderings` (payload keys).
 */
export function summarize(payload: unknown, stripped = false, id = "", orderings: readonly OrderingToExtract[] = []): PayloadSummary {
  return summarizeWithJson(payload, stripped, id, orderings).summary;
}

/** summarize(), with the serialized payload when it can be sent. */
function summarizeWithJson(payload: unknown, stripped: boolean, id: string, orderings: readonly OrderingToExtract[]): { summary: PayloadSummary; json?: string } {
  // Measured first, without recursion: JSON.stringify throws a RangeError at ~4,000 levels.
  if (jsonDepth(payload, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH) {
    return { summary: { ok: false, message: `payload is nested deeper than ${MAX_PAYLOAD_DEPTH} levels of arrays and objects`, stripped } };
  }
  let text: string;
  try {
    text = JSON.stringify(payload ?? null);
  } catch (err) {
    return { summary: { ok: false, message: `payload cannot be serialized as JSON: ${(err as Error).message}`, stripped } };
  }
  const ordering = orderings.length ? new Map(orderings.map((o) => [o.key, orderingValue(o.parsed, { eventType: "", payload })])) : undefined;
  const summary: PayloadSummary = {
    ok: true,
    bytes: Buffer.byteLength(text),
    dedupe: createHash("sha256").update(JSON.stringify(id)).update(text).digest("hex"),
    stripped,
    ...(ordering ? { ordering } : {}),
  };
  return { summary, json: text };
}

/**
 * For the delivery cache: records the summary of the item's payload (with the values at the
 * payload ordering keys of its subscription) and removes the payload; `keep` may hold on to the
 * serialized payload (kept-payloads.ts; `json` is called only if it does), so that an attempt
 * need not read it back. `previous`: the cached version of the same key, whose summary is taken
 * when it is the same object (uid) and knows every ordering value asked for. The payload may
 * come as its JSON bytes, cut out by the watch (`DEFERRED`): it is parsed only when no earlier
 * summary serves, so a large payload is parsed once per delivery, not at each of its status
 * writes. Never throws on the payload's value.
 */
export function stripPayload(item: RawItem, orderings: readonly OrderingToExtract[] = [], keep?: (json: () => string, bytes: number) => void, previous?: DeliveryObject): void {
  const spec = specOf(item);
  if (!spec) return;
  const deferred = item[DEFERRED];
  const had = "payload" in spec || deferred !== undefined;
  const wanted = orderings.filter((o) => o.parsed.kind === "path");
  const earlier = had && previous ? earlierSummary(previous, item, wanted) : undefined;
  if (earlier) {
    summaries.set(spec, earlier);
    const payload = spec.payload;
    if (earlier.ok) keep?.(deferred ? () => JSON.stringify(JSON.parse(deferred.toString("utf8"))) : () => JSON.stringify(payload ?? null), earlier.bytes);
  } else {
    if (deferred) spec.payload = JSON.parse(deferred.toString("utf8"));
    const { summary, json } = summarizeWithJson(spec.payload, had, idOf(spec, item.metadata), wanted);
    summaries.set(spec, summary);
    if (had && summary.ok && json !== undefined) keep?.(() => json, summary.bytes);
  }
  delete spec.payload;
}

/** The summary of `previous` if it is an earlier version of `item` (same uid) with its payload stripped, and knows the ordering values `wanted`. */
function earlierSummary(previous: DeliveryObject, item: RawItem, wanted: readonly OrderingToExtract[]): PayloadSummary | undefined {
  if (!item.metadata.uid || previous.metadata.uid !== item.metadata.uid) return undefined;
  const spec = specOf(previous);
  const s = spec ? summaries.get(spec) : undefined;
  if (!s?.stripped) return undefined;
  if (s.ok && wanted.some((o) => !s.ordering?.has(o.key))) return undefined;
  return s;
}

const idOf = (spec: Spec | undefined, m: { uid?: string; name: string }): string => spec?.eventId ?? m.uid ?? m.name;

/** The summary of a delivery's payload: recorded by the cache, or computed once for an object read in full. */
export function payloadSummary(obj: DeliveryObject): PayloadSummary {
  const spec = specOf(obj);
  if (!spec) return summarize(undefined);
  let s = summaries.get(spec);
  if (!s) summaries.set(spec, (s = summarize(spec.payload, false, idOf(spec, obj.metadata))));
  return s;
}

/**
 * The delivery's value at an ordering key, when known without a read: eventType from the spec,
 * a payload key from the payload itself or what the cache extracted. `{known: false}`: the
 * payload must be read (readOrderingValue).
 */
export function orderingValueOf(obj: DeliveryObject, o: OrderingToExtract): { known: true; value: string | undefined } | { known: false } {
  const spec = specOf(obj);
  if (o.parsed.kind === "eventType") return { known: true, value: orderingValue(o.parsed, { eventType: spec?.eventType ?? "", payload: undefined }) };
  if (spec && "payload" in spec) return { known: true, value: orderingValue(o.parsed, { eventType: "", payload: spec.payload }) };
  const s = spec ? summaries.get(spec) : undefined;
  if (s?.ok && s.ordering?.has(o.key)) return { known: true, value: s.ordering.get(o.key) };
  // No payload at all, or one that cannot be sent (it is Discarded): not ordered.
  if (s && (!s.stripped || !s.ok)) return { known: true, value: undefined };
  return { known: false };
}

/**
 * Reads the payload of a cached delivery once to learn its value at a payload ordering key the
 * cache did not extract (the subscription's key changed, or arrived after the delivery), and
 * keeps just the value. "gone" when the delivery no longer exists (or was replaced).
 */
export async function readOrderingValue(client: KubeClient, obj: DeliveryObject, o: OrderingToExtract, signal?: AbortSignal): Promise<{ gone: true } | { gone: false; value: string | undefined }> {
  const known = orderingValueOf(obj, o);
  if (known.known) return { gone: false, value: known.value };
  const full = await readFull(client, obj, signal);
  if (!full) return { gone: true };
  const value = orderingValue(o.parsed, { eventType: "", payload: specOf(full)?.payload });
  const spec = specOf(obj);
  const s = spec ? summaries.get(spec) : undefined;
  if (s?.ok) (s.ordering ??= new Map()).set(o.key, value);
  return { gone: false, value };
}

/** What plan() needs to know of the payload. */
export function payloadView(obj: DeliveryObject): { payloadBytes: number; payloadInvalid?: string } {
  const s = payloadSummary(obj);
  return s.ok ? { payloadBytes: s.bytes } : { payloadBytes: 0, payloadInvalid: s.message };
}

/**
 * The replay dedupe key: SHA-256 of the webhook id (as JSON) followed by the serialized payload,
 * as the DLQ specification keys its entries. A payload that cannot be serialized has none.
 */
export function dedupeKey(obj: DeliveryObject): string | undefined {
  const s = payloadSummary(obj);
  return s.ok ? s.dedupe : undefined;
}

export function webhookId(obj: DeliveryObject): string {
  return idOf(specOf(obj), obj.metadata);
}

/**
 * The body of one attempt. For a cached delivery the payload is the one `kept` holds (taken: a
 * retry reads it again), else read from the API server (the watch cache answers
 * `resourceVersion=0`; the payload is immutable, so any version of the same object carries it).
 * Undefined when the delivery no longer exists, or was deleted and created again under its name
 * (another delivery: the watch brings it).
 */
export async function loadRequestBody(client: KubeClient, obj: DeliveryObject, signal?: AbortSignal, kept?: KeptPayloads): Promise<RequestBody | undefined> {
  const spec = specOf(obj) ?? {};
  let dataJson: string | undefined;
  if ("payload" in spec) dataJson = JSON.stringify(spec.payload ?? null);
  else if (summaries.get(spec)?.stripped) {
    dataJson = obj.metadata.uid ? kept?.take(obj.metadata.namespace ?? "", obj.metadata.uid) : undefined;
    if (dataJson === undefined) {
      const full = await readFull(client, obj, signal);
      if (!full) return undefined;
      dataJson = JSON.stringify(specOf(full)?.payload ?? null);
    }
  }
  const id = webhookId(obj);
  // A dead letter made by stream mode keeps its event's publish time (the delivery was created later).
  const timestamp = obj.metadata.annotations?.[ANNOTATIONS.eventTimestamp] ?? obj.metadata.creationTimestamp;
  return { id, type: spec.eventType, body: webhookBody(id, spec.eventType, timestamp, dataJson ?? "null") };
}

/**
 * The webhook body, `{"id","type","timestamp","created_at","data"}`, with `data` as the given
 * JSON text (inserted as it is: stream mode passes the published bytes). The one template both
 * modes send. `created_at` is `timestamp` again, under the specification's name: the event's
 * creation time (ISO 8601), the same on every attempt and replay.
 */
export function webhookBody(id: string, type: string | undefined, timestamp: string | undefined, dataJson: string): string {
  const at = JSON.stringify(timestamp ?? null);
  return `{"id":${JSON.stringify(id)},"type":${JSON.stringify(type ?? null)},"timestamp":${at},"created_at":${at},"data":${dataJson}}`;
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
