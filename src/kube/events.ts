// Records Kubernetes Events (core/v1, what `kubectl describe` and `kubectl events` show). Repeats
// of the same reason and message for the same object within a window are folded into nothing,
// so a stuck delivery cannot spend the API write budget on Events; and each namespace has a
// budget of Events (EVENT_BUDGET), so a tenant whose deliveries fail by the thousand cannot
// spend it either (each outcome is still in its delivery's status; what is dropped is counted).
// Messages are built by the caller from safe parts only: never a secret, a header value or a
// payload.
import type { Logger } from "pino";
import { clipBytes } from "../api/fit.js";
import { take, type RateLimit, type TokenBucket } from "../core/endpoint/token-bucket.js";
import { TenantLru } from "../lib/tenant-lru.js";
import type { KubeClient } from "./client.js";
import { collectionPath, CORE, type ObjectRef } from "./types.js";

/** The API server's limit on an Event's note (events.k8s.io/v1), honoured on core/v1 too. */
export const EVENT_MESSAGE_MAX_BYTES = 1024;

export type EventType = "Normal" | "Warning";

/**
 * Events about one namespace's objects: at most `burst` at once, then `perSecond` on average
 * (a token bucket per namespace). One tenant's flood of dead letters writes 100 Events and then
 * 5 a second, however many it makes, and another namespace's Events are written as before.
 */
export const EVENT_BUDGET = { burst: 100, perSecond: 5 } as const;

export interface EventSink {
  record(ref: ObjectRef, type: EventType, reason: string, message: string): void;
}

export interface EventRecorderOptions {
  component: string;
  host?: string;
  dedupeWindowMs?: number;
  /** Per namespace; default EVENT_BUDGET. */
  budget?: RateLimit;
  /** An Event not written because its namespace had spent its budget. */
  onDropped?: (namespace: string) => void;
  now?: () => number;
}

/** Dedupe keys held in all; one namespace holds at most DEDUPE_PER_NAMESPACE of them (it forgets its own first). */
const DEDUPE_MAX = 10_000;
const DEDUPE_PER_NAMESPACE = 1_000;
/** Namespaces with nothing to remember (a full bucket, no drops to log) are forgotten when this many are held; the mark then doubles. */
const NAMESPACES_PRUNE_FROM = 10_000;
/** A namespace's dropped Events are logged at most once a minute, in one line with their count. */
const DROPPED_LOG_EVERY_MS = 60_000;

/** What the recorder keeps per namespace. */
interface NamespaceBudget {
  bucket: TokenBucket;
  /** Events dropped since the last `events_dropped` line. */
  dropped: number;
  /** When that line was written (-Infinity: never). */
  loggedAt: number;
}

export class EventRecorder implements EventSink {
  /** Dedupe: when each (object, reason, message) was last written, by namespace. */
  private recent = new TenantLru<number>({ max: DEDUPE_MAX, maxPerNamespace: DEDUPE_PER_NAMESPACE });
  private inFlight = new Set<Promise<void>>();
  private namespaces = new Map<string, NamespaceBudget>();
  private pruneAt = NAMESPACES_PRUNE_FROM;

  constructor(
    private readonly client: KubeClient,
    private readonly log: Logger,
    private readonly opts: EventRecorderOptions = { component: "hookline" },
  ) {}

  record(ref: ObjectRef, type: EventType, reason: string, message: string): void {
    const now = (this.opts.now ?? Date.now)();
    const window = this.opts.dedupeWindowMs ?? 10 * 60_000;
    const namespace = ref.namespace ?? "";
    const key = `${ref.kind}/${ref.name}/${ref.uid ?? ""}/${reason}/${message}`;
    const last = this.recent.get(namespace, key);
    if (last !== undefined && now - last < window) return;
    if (!this.take(namespace, now)) return;
    this.recent.set(namespace, key, now);
    const p = this.create(ref, type, reason, message, now).finally(() => this.inFlight.delete(p));
    this.inFlight.add(p);
  }

  /** Waits for Events being written (shutdown). */
  async flush(): Promise<void> {
    await Promise.allSettled([...this.inFlight]);
  }

  /** Spends one of the namespace's Events if it has one left; counts and logs it when not. */
  private take(namespace: string, now: number): boolean {
    const budget = this.opts.budget ?? EVENT_BUDGET;
    if (this.namespaces.size >= this.pruneAt) this.prune(now, budget);
    const kept = this.namespaces.get(namespace);
    const r = take(kept?.bucket, now, budget);
    const ns = kept ?? { bucket: r.bucket, dropped: 0, loggedAt: -Infinity };
    ns.bucket = r.bucket;
    if (!kept) this.namespaces.set(namespace, ns);
    if (r.ok) return true;
    this.opts.onDropped?.(namespace);
    ns.dropped++;
    if (now - ns.loggedAt >= DROPPED_LOG_EVERY_MS) {
      this.log.warn({ namespace, dropped: ns.dropped, burst: budget.burst, perSecond: budget.perSecond }, "events_dropped");
      ns.dropped = 0;
      ns.loggedAt = now;
    }
    return false;
  }

  /**
   * Forgets the namespaces whose bucket is full again, as a namespace not seen has it, and that
   * have no dropped Events left to log. The mark doubles with what is left, so a cluster with more
   * namespaces writing Events than the mark is scanned once per doubling, not once per Event.
   */
  private prune(now: number, budget: RateLimit): void {
    for (const [name, ns] of this.namespaces) {
      const full = ns.bucket.tokens + ((now - ns.bucket.updatedAt) / 1000) * budget.perSecond >= budget.burst;
      if (full && ns.dropped === 0) this.namespaces.delete(name);
    }
    this.pruneAt = Math.max(NAMESPACES_PRUNE_FROM, 2 * this.namespaces.size);
  }

  private async create(ref: ObjectRef, type: EventType, reason: string, message: string, now: number): Promise<void> {
    const ts = new Date(now).toISOString();
    try {
      await this.client.request({
        method: "POST",
        path: collectionPath(CORE.events, ref.namespace),
        body: {
          apiVersion: "v1",
          kind: "Event",
          metadata: { generateName: `${ref.name}.`, namespace: ref.namespace },
          involvedObject: { apiVersion: ref.apiVersion, kind: ref.kind, name: ref.name, namespace: ref.namespace, uid: ref.uid, resourceVersion: ref.resourceVersion },
          reason,
          message: clipBytes(message, EVENT_MESSAGE_MAX_BYTES),
          type,
          source: { component: this.opts.component, ...(this.opts.host ? { host: this.opts.host } : {}) },
          reportingComponent: this.opts.component,
          reportingInstance: this.opts.host ?? this.opts.component,
          firstTimestamp: ts,
          lastTimestamp: ts,
          count: 1,
        },
      });
    } catch (err) {
      this.log.warn({ err: (err as Error).message, reason, object: `${ref.namespace}/${ref.name}` }, "could not record Event");
    }
  }
}
