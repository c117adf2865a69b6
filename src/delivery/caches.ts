// The operator's view of the cluster: reflectors for subscriptions, for non-terminal deliveries
// (field selector on status.phase: finished deliveries cost no memory here) and for
// WebhookReplays, one per watched namespace or one for all, plus an index of deliveries by
// subscription. Deliveries are listed once the subscriptions are, so the payload ordering keys
// of their subscriptions are known when their payloads are stripped. Parsed specs
// are memoised per object version. Cached deliveries carry no payload (see payload.ts): memory
// does not grow with payload bytes, and a large one is not even parsed again at each status
// write (the watch cuts it out unparsed); small ones are kept apart within a fixed budget
// (kept-payloads.ts), so that an attempt need not read them back.
import { cachedTransform } from "../core/transform.js";
import type { Logger } from "pino";
import type { ZodError } from "zod";
import { deliverySpecSchema, type DeliverySpec } from "../api/delivery.js";
import { subscriptionSpecSchema, type SubscriptionSpec } from "../api/subscription.js";
import type { SubscriptionView } from "../core/attempt/plan.js";
import { resolvePolicy, type Policy, type PolicyDefaults } from "../core/attempt/policy.js";
import type { KubeClient } from "../kube/client.js";
import { Reflector, type RawItem, type ReflectorHandler } from "../kube/reflector.js";
import { collectionPath, objectKey, splitKey, type KubeObject } from "../kube/types.js";
import { DELIVERIES, REPLAYS, SUBSCRIPTIONS, subscriptionKeyOf, type DeliveryObject, type ReplayObject, type SubscriptionObject } from "./objects.js";
import { KeptPayloads } from "./kept-payloads.js";
import { payloadSummary, stripPayload, type OrderingToExtract } from "./payload.js";

export const ACTIVE_DELIVERIES_SELECTOR = "status.phase!=Succeeded,status.phase!=DeadLettered,status.phase!=Discarded";
export const TERMINAL_DELIVERIES_SELECTOR = "status.phase!=,status.phase!=Pending,status.phase!=Retrying";

/**
 * Delivery list pages are sized by the bytes of their payloads: a (re)list holds one page at a
 * time, and a page of 256 KiB payloads costs several times its bytes while it is parsed
 * (measured: 400 pending 250 KiB deliveries peak at +147 MiB of RSS with pages of 50, +54 MiB
 * with 10; the default 500 held them all). Pages start at 4 deliveries and grow towards about
 * 1 MiB of payload (at most 500 deliveries), so small payloads still list 500 at a time.
 */
export const DELIVERY_PAGE = { initial: 4, targetBytes: 1024 * 1024, max: 500 } as const;

/**
 * A watch event of at least this many bytes has its payload cut out unparsed (Reflector's
 * `deferred`): parsed only on the delivery's first event, not again at each status write. Below
 * it, parsing the whole event costs less than looking for the payload first.
 */
export const DEFERRED_PAYLOAD_MIN_BYTES = 16 * 1024;

/** What a cached delivery weighed in its list page: its payload's serialized bytes. */
function payloadBytesOf(obj: DeliveryObject): number {
  const s = payloadSummary(obj);
  return s.ok ? s.bytes : 0;
}

export type Parsed<T> = { ok: true; spec: T } | { ok: false; message: string };

const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/**
 * What the caches keep of an object: not its managedFields, nor kubectl's last-applied
 * annotation (a second copy of the whole spec, payload included). Bounded memory per object.
 */
export function slim<T extends KubeObject>(item: RawItem): T {
  const obj = item as unknown as T;
  delete obj.metadata.managedFields;
  if (obj.metadata.annotations && LAST_APPLIED in obj.metadata.annotations) {
    const { [LAST_APPLIED]: _dropped, ...rest } = obj.metadata.annotations;
    obj.metadata.annotations = rest;
  }
  return obj;
}

export function formatZodError(err: ZodError): string {
  return err.issues
    .slice(0, 5)
    .map((i) => `spec${i.path.length ? "." + i.path.join(".") : ""}: ${i.message}`)
    .join("; ");
}

/** How often namespacesWithSubscriptions counts again. */
const NAMESPACES_RECOUNT_MS = 1_000;

export interface CacheEvents {
  subscription: ReflectorHandler<SubscriptionObject>;
  delivery: ReflectorHandler<DeliveryObject>;
  replay?: ReflectorHandler<ReplayObject>;
}

/** A namespace-sharded set of reflectors that reads like one store. */
class Sharded<T extends KubeObject> {
  readonly reflectors = new Map<string, Reflector<T>>(); // "" = all namespaces

  get(key: string): T | undefined {
    if (this.reflectors.size === 1 && this.reflectors.has("")) return this.reflectors.get("")!.store.get(key);
    return this.reflectors.get(splitKey(key).namespace)?.store.get(key);
  }

  *values(): IterableIterator<T> {
    for (const r of this.reflectors.values()) yield* r.store.values();
  }

  get size(): number {
    let n = 0;
    for (const r of this.reflectors.values()) n += r.store.size;
    return n;
  }
}

export class Caches {
  readonly subscriptions = new Sharded<SubscriptionObject>();
  readonly deliveries = new Sharded<DeliveryObject>();
  readonly replays = new Sharded<ReplayObject>();
  private stopped = false;
  /** Active delivery keys by subscription key (namespace/name). */
  private readonly bySubscription = new Map<string, Set<string>>();
  private readonly subSpecs = new WeakMap<object, Parsed<SubscriptionSpec>>();
  private readonly delSpecs = new WeakMap<object, Parsed<DeliverySpec>>();
  private readonly policies = new WeakMap<object, Policy>();
  private namespacesCounted = { at: -Infinity, count: 0 };

  constructor(
    client: KubeClient,
    namespaces: string[],
    log: Logger,
    events: CacheEvents,
    /** The operator-wide defaults a subscription's policy falls back on (WEBHOOK_*). */
    private readonly defaults: PolicyDefaults,
    onHealth?: (name: string, healthy: boolean) => void,
    /** Payloads kept from the watch for the attempts to come (none when not given). */
    readonly payloads: KeptPayloads = new KeptPayloads({ maxBytes: 0 }),
  ) {
    const scopes = namespaces.length ? namespaces : [""];
    for (const ns of scopes) {
      const suffix = ns || "all-namespaces";
      this.subscriptions.reflectors.set(
        ns,
        new Reflector<SubscriptionObject>({
          client,
          name: `subscriptions/${suffix}`,
          path: collectionPath(SUBSCRIPTIONS, ns || undefined),
          transform: (item: RawItem) => slim<SubscriptionObject>(item),
          handler: events.subscription,
          log,
          onHealth: (h) => onHealth?.(`subscriptions/${suffix}`, h),
        }),
      );
      this.deliveries.reflectors.set(
        ns,
        new Reflector<DeliveryObject>({
          client,
          name: `deliveries/${suffix}`,
          path: collectionPath(DELIVERIES, ns || undefined),
          fieldSelector: ACTIVE_DELIVERIES_SELECTOR,
          pageSize: DELIVERY_PAGE.max,
          pageBytes: { initial: DELIVERY_PAGE.initial, target: DELIVERY_PAGE.targetBytes, of: payloadBytesOf },
          deferred: { path: ["spec", "payload"], minBytes: DEFERRED_PAYLOAD_MIN_BYTES },
          transform: (item: RawItem) => {
            const { namespace = "", uid } = item.metadata;
            const previous = this.deliveries.get(objectKey(item.metadata));
            stripPayload(item, this.orderingsFor(item), uid ? (json, bytes) => this.payloads.keep(namespace, uid, json, bytes) : undefined, previous);
            return slim<DeliveryObject>(item);
          },
          handler: this.indexing(events.delivery),
          log,
          onHealth: (h) => onHealth?.(`deliveries/${suffix}`, h),
        }),
      );
      this.replays.reflectors.set(
        ns,
        new Reflector<ReplayObject>({
          client,
          name: `replays/${suffix}`,
          path: collectionPath(REPLAYS, ns || undefined),
          transform: (item: RawItem) => slim<ReplayObject>(item),
          handler: events.replay ?? { add: () => undefined, update: () => undefined, delete: () => undefined },
          log,
          onHealth: (h) => onHealth?.(`replays/${suffix}`, h),
        }),
      );
    }
  }

  /** The payload ordering key of the subscription a raw delivery names, to extract while the payload is at hand. */
  private orderingsFor(item: RawItem): OrderingToExtract[] {
    const subKey = subscriptionKeyOf(item);
    const ordering = subKey ? this.policy(this.subscription(subKey))?.ordering : undefined;
    return ordering && ordering.parsed.kind === "path" ? [ordering] : [];
  }

  private indexing(inner: ReflectorHandler<DeliveryObject>): ReflectorHandler<DeliveryObject> {
    const subKeyOf = subscriptionKeyOf;
    const add = (d: DeliveryObject) => {
      const sk = subKeyOf(d);
      if (!sk) return;
      let set = this.bySubscription.get(sk);
      if (!set) this.bySubscription.set(sk, (set = new Set()));
      set.add(objectKey(d.metadata));
    };
    const remove = (d: DeliveryObject) => {
      const sk = subKeyOf(d);
      if (!sk) return;
      const set = this.bySubscription.get(sk);
      set?.delete(objectKey(d.metadata));
      if (set && set.size === 0) this.bySubscription.delete(sk);
    };
    return {
      add: (d) => {
        add(d);
        inner.add(d);
      },
      update: (old, d) => {
        remove(old);
        add(d);
        if (old.metadata.uid !== d.metadata.uid) this.forgetPayload(old);
        inner.update(old, d);
      },
      delete: (d) => {
        remove(d);
        this.forgetPayload(d);
        inner.delete(d);
      },
      listed: (startedAt) => inner.listed?.(startedAt),
    };
  }

  private forgetPayload(d: DeliveryObject): void {
    if (d.metadata.uid) this.payloads.forget(d.metadata.namespace ?? "", d.metadata.uid);
  }

  private all(): Reflector<KubeObject>[] {
    return [...this.subscriptions.reflectors.values(), ...this.deliveries.reflectors.values(), ...this.replays.reflectors.values()];
  }

  start(): void {
    this.stopped = false;
    const subs = [...this.subscriptions.reflectors.values()];
    for (const r of subs) r.start();
    for (const r of this.replays.reflectors.values()) r.start();
    // Deliveries after the subscriptions, so the cache knows which payload keys to extract.
    void Promise.all(subs.map((r) => r.waitForSync())).then(() => {
      if (!this.stopped) for (const r of this.deliveries.reflectors.values()) r.start();
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.all().map((r) => r.stop()));
  }

  async waitForSync(signal?: AbortSignal): Promise<void> {
    await Promise.all(this.all().map((r) => r.waitForSync(signal)));
  }

  get synced(): boolean {
    return this.all().every((r) => r.hasSynced);
  }

  subscription(key: string): SubscriptionObject | undefined {
    return this.subscriptions.get(key);
  }

  /**
   * How many namespaces have at least one WebhookSubscription, counted at most once a second
   * (one pass over the cached subscriptions): asked at every take of a global request slot.
   */
  namespacesWithSubscriptions(now = Date.now()): number {
    if (now - this.namespacesCounted.at >= NAMESPACES_RECOUNT_MS || now < this.namespacesCounted.at) {
      const seen = new Set<string>();
      for (const s of this.subscriptions.values()) seen.add(s.metadata.namespace ?? "");
      this.namespacesCounted = { at: now, count: seen.size };
    }
    return this.namespacesCounted.count;
  }

  delivery(key: string): DeliveryObject | undefined {
    return this.deliveries.get(key);
  }

  replay(key: string): ReplayObject | undefined {
    return this.replays.get(key);
  }

  /** The WebhookReplays of a namespace. */
  *replaysIn(namespace: string): IterableIterator<ReplayObject> {
    for (const r of this.replays.values()) if (r.metadata.namespace === namespace) yield r;
  }

  /** Active deliveries of a subscription (keys). */
  deliveriesOf(subKey: string): ReadonlySet<string> {
    return this.bySubscription.get(subKey) ?? new Set();
  }

  subscriptionSpec(obj: SubscriptionObject): Parsed<SubscriptionSpec> {
    let parsed = this.subSpecs.get(obj);
    if (!parsed) {
      const r = subscriptionSpecSchema.safeParse(obj.spec);
      parsed = r.success ? { ok: true, spec: r.data } : { ok: false, message: formatZodError(r.error) };
      this.subSpecs.set(obj, parsed);
    }
    return parsed;
  }

  /** A subscription as the engine sees it: missing, invalid (why), or its resolved policy. */
  subscriptionView(sub: SubscriptionObject | undefined): SubscriptionView {
    if (!sub || sub.metadata.deletionTimestamp) return { kind: "missing" };
    const parsed = this.subscriptionSpec(sub);
    if (!parsed.ok) return { kind: "invalid", message: parsed.message };
    // A transform that does not compile: its deliveries wait, as for an invalid spec (nothing is sent untransformed).
    if (parsed.spec.transform !== undefined) {
      const t = cachedTransform(parsed.spec.transform);
      if (!t.ok) return { kind: "invalid", message: `spec.transform ${t.message}` };
    }
    return { kind: "ok", policy: this.policyOf(sub, parsed.spec) };
  }

  /** The resolved policy of a valid subscription, once per object version. */
  policy(sub: SubscriptionObject | undefined): Policy | undefined {
    const view = this.subscriptionView(sub);
    return view.kind === "ok" ? view.policy : undefined;
  }

  private policyOf(sub: SubscriptionObject, spec: SubscriptionSpec): Policy {
    let p = this.policies.get(sub);
    if (!p) this.policies.set(sub, (p = resolvePolicy(spec, this.defaults)));
    return p;
  }

  deliverySpec(obj: DeliveryObject): Parsed<DeliverySpec> {
    let parsed = this.delSpecs.get(obj);
    if (!parsed) {
      const r = deliverySpecSchema.safeParse(obj.spec);
      parsed = r.success ? { ok: true, spec: r.data } : { ok: false, message: formatZodError(r.error) };
      this.delSpecs.set(obj, parsed);
    }
    return parsed;
  }
}
