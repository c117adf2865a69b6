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

export class EventRecorder implements EventSink {
  private recent = new Map<string, number>();
  private inFlight = new Set<Promise<void>>();
  /** Per namespace: the Events it may still write. */
  private buckets = new Map<string, TokenBucket>();

  constructor(
    private readonly client: KubeClient,
    private readonly log: Logger,
    private readonly opts: EventRecorderOptions = { component: "hookline" },
  ) {}

  record(ref: ObjectRef, type: EventType, reason: string, message: string): void {
    const now = (this.opts.now ?? Date.now)();
    const window = this.opts.dedupeWindowMs ?? 10 * 60_000;
    const key = `${ref.namespace}/${ref.kind}/${ref.name}/${ref.uid ?? ""}/${reason}/${message}`;
    const last = this.recent.get(key);
    if (last !== undefined && now - last < window) return;
    if (!this.take(ref.namespace ?? "", now)) {
      this.opts.onDropped?.(ref.namespace ?? "");
      return;
    }
    this.recent.set(key, now);
    if (this.recent.size > 10_000) this.prune(now, window);
    const p = this.create(ref, type, reason, message, now).finally(() => this.inFlight.delete(p));
    this.inFlight.add(p);
  }

  /** Waits for Events being written (shutdown). */
  async flush(): Promise<void> {
    await Promise.allSettled([...this.inFlight]);
  }

  private prune(now: number, window: number) {
    for (const [k, t] of this.recent) if (now - t >= window) this.recent.delete(k);
  }

  /** Spends one of the namespace's Events if it has one left. */
  private take(namespace: string, now: number): boolean {
    const budget = this.opts.budget ?? EVENT_BUDGET;
    if (this.buckets.size >= 10_000) {
      // A full bucket is what a namespace not seen has: forgetting it changes nothing.
      for (const [ns, b] of this.buckets) if (b.tokens + ((now - b.updatedAt) / 1000) * budget.perSecond >= budget.burst) this.buckets.delete(ns);
    }
    const r = take(this.buckets.get(namespace), now, budget);
    this.buckets.set(namespace, r.bucket);
    return r.ok;
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
