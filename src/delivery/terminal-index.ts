// The index of finished deliveries (Succeeded, DeadLettered, Discarded), fed by a watch that
// asks the API server for Table rows with metadata-only objects (PartialObjectMetadata): per
// delivery we keep its name, subscription, phase, finish time and whether a replay was asked
// for, never its payload. It serves the dead-letter counts, oldest-first eviction at
// deadLetter.maxEntries, retention (deleting finished deliveries after their TTL) and notices a
// replay annotation on a finished delivery at once. See docs/adr/0003-terminal-index.md.
import type { Logger } from "pino";
import { ANNOTATIONS, API_VERSION, SUBSCRIPTION } from "../api/names.js";
import { fromRfc3339 } from "../core/rfc3339.js";
import { resolvePolicy, type PolicyDefaults } from "../core/policy.js";
import { ACCEPT, ApiError, type KubeClient } from "../kube/client.js";
import type { EventSink } from "../kube/events.js";
import { objectKey, Reflector, type RawItem } from "../kube/reflector.js";
import { collectionPath, objectPath, type ObjectMeta } from "../kube/types.js";
import type { Metrics } from "../observability/metrics.js";
import { TimerHeap } from "../runtime/timer-heap.js";
import { DELIVERIES, TERMINAL_DELIVERIES_SELECTOR, type Caches } from "./caches.js";

export type TerminalPhase = "Succeeded" | "DeadLettered" | "Discarded";

/** What the index keeps per finished delivery: a few small fields, strings shared where they repeat. */
export interface TerminalRecord {
  metadata: Pick<ObjectMeta, "name" | "namespace" | "resourceVersion"> & { annotations?: Record<string, string> };
  subscription: string;
  phase: TerminalPhase;
  /** Epoch ms: finishedAt, or creation when absent. */
  finishedAt: number;
}

/** Namespaces and subscription names repeat across thousands of records: keep one copy. */
const pool = new Map<string, string>();
function intern(s: string): string {
  const hit = pool.get(s);
  if (hit !== undefined) return hit;
  if (pool.size < 100_000) pool.set(s, s);
  return s;
}

/** Retention and eviction deletes run at most this many at once, beside the delivery writes. */
const MAX_CONCURRENT_DELETES = 8;

const DEFAULT_RETENTION = { succeededMs: 3_600_000, deadLetteredMs: 720 * 3_600_000 };

export interface TerminalIndexDeps {
  client: KubeClient;
  caches: Caches;
  namespaces: string[];
  events: EventSink;
  metrics: Metrics;
  log: Logger;
  defaults: PolicyDefaults;
  isLeader: () => boolean;
  /** A replay annotation appeared on a finished delivery. */
  onReplayRequested: (key: string) => void;
  /** Dead-letter counts of a subscription changed. */
  onDeadLettersChanged: (subKey: string) => void;
  now?: () => number;
}

export class TerminalIndex {
  private readonly reflectors: Reflector<TerminalRecord>[] = [];
  private readonly deadLetters = new Map<string, Map<string, TerminalRecord>>();
  private readonly retention: TimerHeap<string>;
  private readonly evicting = new Set<string>();
  private readonly now: () => number;

  constructor(private readonly d: TerminalIndexDeps) {
    this.now = d.now ?? Date.now;
    this.retention = new TimerHeap<string>((key) => void this.expire(key), this.now);
    for (const ns of d.namespaces.length ? d.namespaces : [""]) {
      this.reflectors.push(
        new Reflector<TerminalRecord>({
          client: d.client,
          name: `finished-deliveries/${ns || "all-namespaces"}`,
          path: collectionPath(DELIVERIES, ns || undefined),
          fieldSelector: TERMINAL_DELIVERIES_SELECTOR,
          representation: "table",
          transform: toRecord,
          handler: {
            add: (r) => this.upsert(undefined, r),
            update: (old, r) => this.upsert(old, r),
            delete: (r) => this.remove(r),
          },
          log: d.log,
        }),
      );
    }
  }

  start(): void {
    for (const r of this.reflectors) r.start();
  }

  async stop(): Promise<void> {
    this.retention.stop();
    await Promise.all(this.reflectors.map((r) => r.stop()));
  }

  waitForSync(signal?: AbortSignal): Promise<unknown> {
    return Promise.all(this.reflectors.map((r) => r.waitForSync(signal)));
  }

  get synced(): boolean {
    return this.reflectors.every((r) => r.hasSynced);
  }

  get(key: string): TerminalRecord | undefined {
    for (const r of this.reflectors) {
      const rec = r.store.get(key);
      if (rec) return rec;
    }
    return undefined;
  }

  get size(): number {
    return this.reflectors.reduce((n, r) => n + r.store.size, 0);
  }

  deadLetterCount(subKey: string): number {
    return this.deadLetters.get(subKey)?.size ?? 0;
  }

  /** Dead-letter keys of a subscription, oldest first. */
  deadLettersOf(subKey: string): string[] {
    const m = this.deadLetters.get(subKey);
    if (!m) return [];
    return [...m.entries()].sort((a, b) => a[1].finishedAt - b[1].finishedAt || a[0].localeCompare(b[0])).map(([k]) => k);
  }

  /** Every finished delivery with a replay annotation (the new leader handles them). */
  replayRequests(): string[] {
    const out: string[] = [];
    for (const r of this.reflectors) for (const [key, rec] of r.store) if (rec.metadata.annotations?.[ANNOTATIONS.replay] !== undefined) out.push(key);
    return out;
  }

  /** After gaining leadership: enforce capacity and retention for everything indexed. */
  resync(): void {
    for (const r of this.reflectors) for (const rec of r.store.values()) this.scheduleRetention(rec);
    for (const subKey of this.deadLetters.keys()) void this.enforceCapacity(subKey);
  }

  private upsert(old: TerminalRecord | undefined, rec: TerminalRecord): void {
    const key = objectKey(rec.metadata);
    if (old && old.phase === "DeadLettered" && (rec.phase !== "DeadLettered" || old.subscription !== rec.subscription)) this.unindex(key, old);
    if (rec.phase === "DeadLettered") {
      const subKey = `${rec.metadata.namespace}/${rec.subscription}`;
      let m = this.deadLetters.get(subKey);
      if (!m) this.deadLetters.set(subKey, (m = new Map<string, TerminalRecord>()));
      const isNew = !m.has(key);
      m.set(key, rec);
      if (isNew) {
        this.d.onDeadLettersChanged(subKey);
        void this.enforceCapacity(subKey);
      }
    }
    this.scheduleRetention(rec);
    if (rec.metadata.annotations?.[ANNOTATIONS.replay] !== undefined) this.d.onReplayRequested(key);
  }

  private remove(rec: TerminalRecord): void {
    const key = objectKey(rec.metadata);
    this.retention.cancel(key);
    if (rec.phase === "DeadLettered") this.unindex(key, rec);
  }

  private unindex(key: string, rec: TerminalRecord): void {
    const subKey = `${rec.metadata.namespace}/${rec.subscription}`;
    const m = this.deadLetters.get(subKey);
    if (m?.delete(key)) {
      if (m.size === 0) this.deadLetters.delete(subKey);
      this.d.onDeadLettersChanged(subKey);
    }
  }

  private retentionOf(rec: TerminalRecord): number {
    const sub = this.d.caches.subscription(`${rec.metadata.namespace}/${rec.subscription}`);
    let r = DEFAULT_RETENTION;
    if (sub) {
      const parsed = this.d.caches.subscriptionSpec(sub);
      if (parsed.ok) r = resolvePolicy(parsed.spec, this.d.defaults).retention;
    }
    return rec.phase === "Succeeded" ? r.succeededMs : r.deadLetteredMs;
  }

  private scheduleRetention(rec: TerminalRecord): void {
    const key = objectKey(rec.metadata);
    this.retention.cancel(key);
    this.retention.schedule(key, rec.finishedAt + this.retentionOf(rec));
  }

  private async expire(key: string): Promise<void> {
    const rec = this.get(key);
    if (!rec) return;
    const due = rec.finishedAt + this.retentionOf(rec);
    if (due > this.now()) return this.retention.schedule(key, due); // retention was raised meanwhile
    if (!this.d.isLeader()) return; // the leader deletes; resync() reschedules on takeover
    await this.deleteDelivery(rec, "retention");
  }

  /** Deletes the oldest dead letters above the subscription's deadLetter.maxEntries. */
  private async enforceCapacity(subKey: string): Promise<void> {
    if (!this.d.isLeader()) return;
    const sub = this.d.caches.subscription(subKey);
    if (!sub) return;
    const parsed = this.d.caches.subscriptionSpec(sub);
    if (!parsed.ok) return;
    const max = parsed.spec.deadLetter.maxEntries;
    const keys = this.deadLettersOf(subKey).filter((k) => !this.evicting.has(k));
    const excess = keys.length - max;
    if (excess <= 0) return;
    for (const key of keys.slice(0, excess)) {
      const rec = this.get(key);
      if (!rec) continue;
      this.evicting.add(key);
      try {
        if (await this.deleteDelivery(rec, "overflow")) {
          this.d.metrics.dlqOperations.inc({ operation: "drop_overflow" });
          this.d.events.record(
            { apiVersion: API_VERSION, kind: SUBSCRIPTION.kind, namespace: sub.metadata.namespace!, name: sub.metadata.name, uid: sub.metadata.uid },
            "Warning",
            "DeadLetterDropped",
            `dead letter ${rec.metadata.name} deleted: the subscription holds deadLetter.maxEntries=${max} dead letters and this was the oldest`,
          );
        }
      } finally {
        this.evicting.delete(key);
      }
    }
  }

  private deleting = 0;
  private readonly deleteWaiters: Array<() => void> = [];

  private async deleteDelivery(rec: TerminalRecord, why: "retention" | "overflow"): Promise<boolean> {
    if (this.deleting >= MAX_CONCURRENT_DELETES) await new Promise<void>((r) => this.deleteWaiters.push(r));
    this.deleting++;
    try {
      return await this.deleteNow(rec, why);
    } finally {
      this.deleting--;
      this.deleteWaiters.shift()?.();
    }
  }

  private async deleteNow(rec: TerminalRecord, why: "retention" | "overflow"): Promise<boolean> {
    try {
      await this.d.client.request({
        method: "DELETE",
        path: objectPath(DELIVERIES, rec.metadata.namespace, rec.metadata.name),
        accept: ACCEPT.objectMetadata,
        // Only the version we indexed: a delivery annotated for replay meanwhile is kept.
        body: { kind: "DeleteOptions", apiVersion: "v1", preconditions: { resourceVersion: rec.metadata.resourceVersion } },
      });
      this.d.log.debug({ delivery: objectKey(rec.metadata), why }, "deleted finished delivery");
      return true;
    } catch (err) {
      if (err instanceof ApiError && (err.isNotFound || err.status === 409)) return false;
      this.d.log.warn({ delivery: objectKey(rec.metadata), why, err: (err as Error).message }, "could not delete finished delivery");
      // Try again later.
      this.retention.schedule(objectKey(rec.metadata), this.now() + 30_000);
      return false;
    }
  }
}

const PHASES: Record<string, TerminalPhase> = { Succeeded: "Succeeded", DeadLettered: "DeadLettered", Discarded: "Discarded" };

function toRecord(item: RawItem): TerminalRecord | undefined {
  const cells = item.cells ?? {};
  const phase = PHASES[String(cells["Phase"])];
  if (!phase) return undefined;
  const m = item.metadata;
  const replay = m.annotations?.[ANNOTATIONS.replay];
  const finished = typeof cells["Finished"] === "string" ? fromRfc3339(cells["Finished"]) : undefined;
  const metadata: TerminalRecord["metadata"] = { name: m.name, namespace: intern(m.namespace ?? ""), resourceVersion: m.resourceVersion };
  if (replay !== undefined) metadata.annotations = { [ANNOTATIONS.replay]: replay };
  return {
    metadata,
    subscription: intern(typeof cells["Subscription"] === "string" ? cells["Subscription"] : ""),
    phase,
    finishedAt: finished ?? fromRfc3339(m.creationTimestamp) ?? Date.now(),
  };
}
