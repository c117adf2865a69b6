// Fan-out: one event becomes one WebhookDelivery per matching, non-paused subscription of its
// namespace. Each delivery is named from (event id, subscription) (see naming.ts), so the API
// server itself makes a publish idempotent: AlreadyExists means an earlier publish of the same
// event created it. Shared by the three doors: the library (src/index.ts), `hookline publish`
// and the operator's HTTP endpoint (server.ts).
import { API_VERSION, DELIVERY, GROUP, LABELS, SUBSCRIPTION, VERSION } from "../api/names.js";
import { matchesEventType } from "../core/attempt/policy.js";
import { applyFilter, dataShape, type DataShape, type FilterOutcome } from "../core/filter.js";
import { ACCEPT, ApiError, type KubeClient } from "../kube/client.js";
import { collectionPath, objectPath, type ResourceType } from "../kube/types.js";
import { BacklogFullError, IdempotencyConflictError, PublishFailedError, type FullSubscription, type PublishFailure } from "./errors.js";
import type { TraceContext } from "../core/request/trace-context.js";
import { validateEvent, validateTraceContext, type ValidEvent } from "./input.js";
import { deliveryName, labelValue } from "./naming.js";
import type { DeliveryResult, PublishResult, SkippedSubscription } from "./result.js";

const SUBSCRIPTIONS: ResourceType = { group: GROUP, version: VERSION, plural: SUBSCRIPTION.plural };
const DELIVERIES: ResourceType = { group: GROUP, version: VERSION, plural: DELIVERY.plural };

/** The field manager of deliveries created by a publish (visible in managedFields). */
export const PUBLISH_FIELD_MANAGER = "hookline-publish";

/** What the fan-out reads of a subscription: a WebhookSubscription object, from a list or a cache. */
export interface SubscriptionLike {
  metadata: { name: string; namespace?: string; deletionTimestamp?: string };
  spec?: unknown;
}

export interface FanoutOptions {
  /**
   * Subscriptions to match against (all namespaces may be mixed in; others are ignored). The
   * operator passes its watch cache; when absent, the namespace's subscriptions are listed.
   */
  subscriptions?: () => Iterable<SubscriptionLike>;
  /** Deliveries created at once; default 8. */
  concurrency?: number;
  signal?: AbortSignal;
  /** Id generator for events without one; default crypto.randomUUID. */
  newId?: () => string;
  /**
   * Pending (Pending or Retrying) deliveries of a subscription, for spec.maxPending. The
   * operator passes its cache's count; when absent, they are listed (metadata only, at most
   * maxPending of them).
   */
  pendingCount?: (namespace: string, subscription: string, maxPending: number) => number | Promise<number>;
  /**
   * The producer's W3C trace context, stored on every delivery as spec.traceContext (validated
   * and normalized: validateTraceContext). Not part of the event's identity: publishing the
   * same event again with another trace context finds the deliveries `existing`.
   */
  traceContext?: TraceContext;
  /**
   * Whether the caller may read deliveries of the namespace (the HTTP door asks a
   * SubjectAccessReview for `get`: `client` is the operator's, not the caller's). When it says
   * no, an existing delivery of the event's name is not compared and counts as the same event,
   * as it does for a caller whose own `get` is refused: the answer tells the caller nothing it
   * could not read itself. Asked once per publish, only when a delivery already exists.
   */
  mayReadExisting?: () => Promise<boolean>;
  /** Each subscription filter's result for this event (the operator counts webhook_events_filtered_total). */
  onFilter?: (subscription: string, result: FilterOutcome) => void;
}

/** The pending deliveries of one subscription, by the CRD's selectable fields. */
const pendingSelector = (subscription: string) => `spec.subscriptionRef.name=${subscription},status.phase!=Succeeded,status.phase!=DeadLettered,status.phase!=Discarded`;

/**
 * At least how many deliveries of `subscription` are pending, counting no further than `max`:
 * one metadata-only page of `max` items. A caller that may not list deliveries cannot count:
 * the cap is then left to the operator's HTTP door (Infinity would refuse everything; 0 lets it through).
 */
async function listPending(client: KubeClient, namespace: string, subscription: string, max: number, signal?: AbortSignal): Promise<number> {
  try {
    const page = await client.request<{ items?: unknown[]; metadata?: { continue?: string } }>({
      method: "GET",
      path: collectionPath(DELIVERIES, namespace),
      accept: ACCEPT.metadata,
      query: { fieldSelector: pendingSelector(subscription), limit: max },
      ...(signal ? { signal } : {}),
    });
    return (page.items?.length ?? 0) + (page.metadata?.continue ? 1 : 0);
  } catch (err) {
    if (err instanceof ApiError && err.status === 403) return 0;
    throw err;
  }
}

function maxPendingOf(sub: SubscriptionLike | undefined): number | undefined {
  const v = (sub?.spec as { maxPending?: unknown } | undefined)?.maxPending;
  return typeof v === "number" && Number.isInteger(v) && v > 0 ? v : undefined;
}

/** The namespace's ResourceQuota refused the create (used up, or not yet computed). */
const quotaExceeded = (err: unknown): err is ApiError => err instanceof ApiError && err.status === 403 && /exceeded quota|status unknown for quota/i.test(err.message);

/**
 * Which subscriptions of `namespace` get an event of `type`, sorted by name. With `event` (its
 * id and data), each subscription's spec.filter decides too (core/filter.ts): one that says no,
 * fails on this event or does not compile is skipped with its reason, and `onFilter` hears each
 * filter's result; a bad filter concerns its own subscription only. Pure but for `onFilter`.
 */
export function selectSubscriptions(
  subscriptions: Iterable<SubscriptionLike>,
  namespace: string,
  type: string,
  event?: { id: string; data: unknown },
  onFilter?: (subscription: string, result: FilterOutcome) => void,
): { matched: string[]; skipped: SkippedSubscription[] } {
  const matched: string[] = [];
  const skipped: SkippedSubscription[] = [];
  let shape: DataShape | undefined;
  const shapeOf = () => (shape ??= dataShape(event?.data));
  for (const sub of subscriptions) {
    if (sub.metadata.namespace !== undefined && sub.metadata.namespace !== namespace) continue;
    const spec = (sub.spec ?? {}) as { eventTypes?: unknown; paused?: unknown; filter?: unknown };
    const eventTypes = Array.isArray(spec.eventTypes) ? spec.eventTypes.filter((t): t is string => typeof t === "string") : undefined;
    if (!matchesEventType(eventTypes, type)) continue;
    const name = sub.metadata.name;
    if (sub.metadata.deletionTimestamp) skipped.push({ subscription: name, reason: "Deleting" });
    else if (spec.paused === true) skipped.push({ subscription: name, reason: "Paused" });
    else if (event && typeof spec.filter === "string") {
      const r = applyFilter(spec.filter, { id: event.id, type, namespace, data: event.data }, shapeOf);
      onFilter?.(name, r.kind);
      if (r.kind === "matched") matched.push(name);
      else if (r.kind === "filtered") skipped.push({ subscription: name, reason: "Filtered" });
      else skipped.push({ subscription: name, reason: r.kind === "invalid" ? "InvalidFilter" : "FilterError", message: r.message });
    } else matched.push(name);
  }
  const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  matched.sort(byName);
  skipped.sort((a, b) => byName(a.subscription, b.subscription));
  return { matched, skipped };
}

/** The WebhookDelivery a publish creates for one subscription. */
export function deliveryFor(event: ValidEvent, subscription: string, traceContext?: TraceContext): { apiVersion: string; kind: string; metadata: { name: string; namespace: string; labels: Record<string, string> }; spec: Record<string, unknown> } {
  return {
    apiVersion: API_VERSION,
    kind: DELIVERY.kind,
    metadata: {
      name: deliveryName(event.id, subscription),
      namespace: event.namespace,
      labels: { [LABELS.subscription]: labelValue(subscription), [LABELS.eventId]: labelValue(event.id) },
    },
    spec: {
      subscriptionRef: { name: subscription },
      eventType: event.type,
      eventId: event.id,
      // A null payload is sent as `data: null`; the API server would prune a null field anyway.
      ...(event.data === null ? {} : { payload: event.data }),
      ...(traceContext ? { traceContext } : {}),
    },
  };
}

/** Deep equality of JSON values; a null property equals a missing one (the API server may drop either). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || a === undefined || b === undefined) return (a ?? null) === (b ?? null);
  if (typeof a !== "object" || typeof b !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bs = b as unknown[];
    return a.length === bs.length && a.every((v, i) => sameJson(v, bs[i]));
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const keys = new Set([...Object.keys(ao), ...Object.keys(bo)]);
  for (const k of keys) if (!sameJson(ao[k], bo[k])) return false;
  return true;
}

async function listSubscriptions(client: KubeClient, namespace: string, signal?: AbortSignal): Promise<SubscriptionLike[]> {
  const items: SubscriptionLike[] = [];
  let cont: string | undefined;
  do {
    const page = await client.request<{ items?: SubscriptionLike[]; metadata?: { continue?: string } }>({
      method: "GET",
      path: collectionPath(SUBSCRIPTIONS, namespace),
      query: { limit: 500, continue: cont },
      ...(signal ? { signal } : {}),
    });
    items.push(...(page.items ?? []));
    cont = page.metadata?.continue || undefined;
  } while (cont);
  return items;
}

/**
 * On AlreadyExists: the delivery is ours only if it carries the same event. A caller allowed to
 * create but not to get deliveries cannot tell (here, or by FanoutOptions.mayReadExisting); its
 * publish counts as the same event.
 */
async function checkExisting(client: KubeClient, event: ValidEvent, subscription: string, name: string, signal?: AbortSignal): Promise<void> {
  type Existing = { spec?: { subscriptionRef?: { name?: string }; eventType?: string; eventId?: string; payload?: unknown } };
  let got: Existing;
  try {
    got = await client.request<Existing>({ method: "GET", path: objectPath(DELIVERIES, event.namespace, name), ...(signal ? { signal } : {}) });
  } catch (err) {
    if (err instanceof ApiError && err.status === 403) return;
    throw err;
  }
  const spec = got.spec ?? {};
  const difference =
    spec.subscriptionRef?.name !== subscription ? "subscription"
    : spec.eventType !== event.type ? "eventType"
    : spec.eventId !== event.id ? "eventId"
    : !sameJson(spec.payload, event.data) ? "payload"
    : undefined;
  if (difference) throw new IdempotencyConflictError(event.id, name, subscription, difference);
}

/**
 * Publishes one event: validates it (PublishInputError / PayloadTooLargeError), creates one
 * delivery per matching, non-paused subscription, and reports each as created or existing.
 * Throws IdempotencyConflictError when the id was used for another event, and
 * PublishFailedError (with what was done) when the API server refused some creates.
 */
export async function publish(client: KubeClient, input: { namespace: string; type: string; id?: string; data: unknown }, opts: FanoutOptions = {}): Promise<PublishResult> {
  const event = validateEvent(input, opts.newId);
  const traceContext = validateTraceContext(opts.traceContext);
  const subscriptions = opts.subscriptions ? opts.subscriptions() : await listSubscriptions(client, event.namespace, opts.signal);
  const subs = [...subscriptions];
  const { matched, skipped } = selectSubscriptions(subs, event.namespace, event.type, { id: event.id, data: event.data }, opts.onFilter);
  const byName = new Map(subs.filter((s) => (s.metadata.namespace ?? event.namespace) === event.namespace).map((s) => [s.metadata.name, s]));
  const deliveries: DeliveryResult[] = [];
  const failures: PublishFailure[] = [];
  const full: FullSubscription[] = [];
  let conflict: IdempotencyConflictError | undefined;
  let readable: Promise<boolean> | undefined;
  const mayRead = () => (opts.mayReadExisting ? (readable ??= opts.mayReadExisting()) : Promise.resolve(true));

  /** spec.maxPending: whether the subscription's backlog is full (then it is recorded in `full`). */
  const backlogFull = async (subscription: string, name: string): Promise<boolean> => {
    const maxPending = maxPendingOf(byName.get(subscription));
    if (maxPending === undefined) return false;
    const pending = await (opts.pendingCount ? opts.pendingCount(event.namespace, subscription, maxPending) : listPending(client, event.namespace, subscription, maxPending, opts.signal));
    if (pending < maxPending) return false;
    full.push({ subscription, name, reason: "MaxPending", pending, maxPending, message: `${pending} pending deliveries, spec.maxPending=${maxPending}` });
    return true;
  };

  const createOne = async (subscription: string): Promise<void> => {
    const body = deliveryFor(event, subscription, traceContext);
    const name = body.metadata.name;
    try {
      if (await backlogFull(subscription, name)) return;
      await client.request({
        method: "POST",
        path: collectionPath(DELIVERIES, event.namespace),
        query: { fieldManager: PUBLISH_FIELD_MANAGER },
        body,
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
      deliveries.push({ subscription, name, result: "created" });
    } catch (err) {
      if (quotaExceeded(err)) {
        full.push({ subscription, name, reason: "ResourceQuota", message: `the namespace's ResourceQuota: ${err.message}` });
        return;
      }
      if (err instanceof ApiError && err.isAlreadyExists) {
        try {
          if (await mayRead()) await checkExisting(client, event, subscription, name, opts.signal);
          deliveries.push({ subscription, name, result: "existing" });
        } catch (checkErr) {
          if (checkErr instanceof IdempotencyConflictError) conflict ??= checkErr;
          else failures.push({ subscription, name, status: checkErr instanceof ApiError ? checkErr.status : undefined, message: (checkErr as Error).message });
        }
        return;
      }
      failures.push({ subscription, name, status: err instanceof ApiError ? err.status : undefined, message: (err as Error).message });
    }
  };

  const queue = [...matched];
  const workers = Array.from({ length: Math.min(queue.length, Math.max(1, opts.concurrency ?? 8)) }, async () => {
    for (let sub = queue.shift(); sub !== undefined; sub = queue.shift()) await createOne(sub);
  });
  await Promise.all(workers);

  if (conflict) throw conflict;
  deliveries.sort((a, b) => (a.subscription < b.subscription ? -1 : a.subscription > b.subscription ? 1 : 0));
  const result: PublishResult = { id: event.id, namespace: event.namespace, type: event.type, deliveries, skipped };
  if (failures.length) throw new PublishFailedError(result, [...failures, ...full.map(({ subscription, name, message }) => ({ subscription, name, status: 429, message }))]);
  if (full.length) throw new BacklogFullError(result, full.sort((a, b) => (a.subscription < b.subscription ? -1 : 1)));
  return result;
}
