// The index of finished deliveries (Succeeded, DeadLettered, Discarded), fed by a watch that
// asks the API server for Table rows with metadata-only objects (PartialObjectMetadata): per
// delivery we keep its name, subscription, phase, finish time and whether a replay was asked
// for, never its payload. It serves the dead-letter counts, oldest-first eviction at
// deadLetter.maxEntries, retention (deleting finished deliveries after their TTL) and notices a
// replay annotation on a finished delivery at once. See docs/adr/0003-terminal-index.md.
// The storage budget across all finished deliveries (WEBHOOK_MAX_FINISHED_DELIVERIES) is counted
// and enforced from here, by storage-budget.ts.
import type { Logger } from "pino";
import { INT_VARS } from "../config/config.js";
import { ANNOTATIONS, API_VERSION, SUBSCRIPTION } from "../api/names.js";
import { fromRfc3339 } from "../core/rfc3339.js";
import { resolvePolicy, type PolicyDefaults } from "../core/policy.js";
import { ACCEPT, ApiError, type KubeClient } from "../kube/client.js";
import type { EventSink } from "../kube/events.js";
import { objectKey, Reflector, type RawItem } from "../kube/reflector.js";
import { collectionPath, objectPath, type ObjectMeta } from "../kube/types.js";
import type { Metrics } from "../observability/metrics.js";
import { TimerHeap } from "../runtime/timer-heap.js";
import { DELIVERIES, TERMINAL_DELIVERIES_SELECTOR, type Caches, type SubscriptionObject } from "./caches.js";
import { StorageBudget, type SweepTally } from "./storage-budget.js";

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
/** A new leader sweeps the finished deliveries shortly after it starts, not in its first breath. */
const FIRST_SWEEP_DELAY_MS = 5_000;
const SWEEP_PAGE_SIZE = 200;

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
  /** WEBHOOK_MAX_FINISHED_DELIVERIES (default: its documented default). */
  maxFinishedDeliveries?: number;
  now?: () => number;
}

/** Finished deliveries other than dead letters: watched, but never kept in memory. */
const FINISHED_NOT_DEAD_LETTERED_SELECTOR = `${TERMINAL_DELIVERIES_SELECTOR},status.phase!=DeadLettered`;
const DEAD_LETTERED_SELECTOR = "status.phase=DeadLettered";

export class TerminalIndex {
  /** Dead letters: kept (name, subscription, finish time): the dead-letter index. */
  private readonly deadLetterReflectors: Reflector<TerminalRecord>[] = [];
  /** Succeeded and Discarded: seen as they pass, kept only while their retention is near. */
  private readonly finishedReflectors: Reflector<TerminalRecord>[] = [];
  private readonly deadLetters = new Map<string, Map<string, TerminalRecord>>();
  private readonly retention: TimerHeap<string>;
  /** Succeeded/Discarded deliveries whose retention ends within the sweep window. */
  private readonly dueSoon = new Map<string, TerminalRecord>();
  /** Succeeded/Discarded deliveries annotated for replay (to be refused). */
  private readonly replayAsked = new Set<string>();
  private readonly evicting = new Set<string>();
  private readonly now: () => number;
  private sweepTimer: NodeJS.Timeout | undefined;
  /** Deliveries being deleted (or waiting for a delete slot): never deleted twice. */
  private readonly deletingKeys = new Set<string>();
  private sweeping: Promise<void> | undefined;
  /** A sweep was asked for while one ran: the next starts at once. */
  private sweepAgain = false;
  readonly budget: StorageBudget;

  constructor(private readonly d: TerminalIndexDeps) {
    this.now = d.now ?? Date.now;
    this.budget = new StorageBudget({
      max: d.maxFinishedDeliveries ?? INT_VARS.maxFinishedDeliveries.default,
      caches: d.caches,
      events: d.events,
      metrics: d.metrics,
      log: d.log,
      isLeader: d.isLeader,
      deadLetterCount: () => this.deadLetterReflectors.reduce((n, r) => n + r.store.size, 0),
      oldestDeadLetters: (n, skip) => this.oldestDeadLetters(n, skip),
      deleteDelivery: (rec) => this.deleteDelivery(rec, "budget"),
      requestSweep: () => this.sweepSoon(),
      now: this.now,
    });
    this.retention = new TimerHeap<string>((key) => void this.expire(key), this.now);
    for (const ns of d.namespaces.length ? d.namespaces : [""]) {
      const scope = ns || "all-namespaces";
      const common = { client: d.client, path: collectionPath(DELIVERIES, ns || undefined), representation: "table" as const, transform: toRecord, log: d.log };
      this.deadLetterReflectors.push(
        new Reflector<TerminalRecord>({
          ...common,
          name: `dead-letters/${scope}`,
          fieldSelector: DEAD_LETTERED_SELECTOR,
          handler: {
            add: (r) => this.upsert(undefined, r),
            update: (old, r) => this.upsert(old, r),
            delete: (r) => this.remove(r),
          },
        }),
      );
      this.finishedReflectors.push(
        new Reflector<TerminalRecord>({
          ...common,
          name: `finished-deliveries/${scope}`,
          fieldSelector: FINISHED_NOT_DEAD_LETTERED_SELECTOR,
          keep: false,
          handler: {
            add: (r) => {
              this.passing(r);
              this.budget.added(r);
            },
            update: (_old, r) => this.passing(r),
            delete: (r) => {
              this.gone(r);
              this.budget.removed(r);
            },
          },
        }),
      );
    }
  }

  private get reflectors(): Reflector<TerminalRecord>[] {
    return [...this.deadLetterReflectors, ...this.finishedReflectors];
  }

  start(): void {
    for (const r of this.reflectors) r.start();
  }

  async stop(): Promise<void> {
    clearTimeout(this.sweepTimer);
    this.sweepTimer = undefined;
    this.retention.stop();
    await Promise.all(this.reflectors.map((r) => r.stop()));
    await this.sweeping;
  }

  waitForSync(signal?: AbortSignal): Promise<unknown> {
    return Promise.all(this.reflectors.map((r) => r.waitForSync(signal)));
  }

  get synced(): boolean {
    return this.reflectors.every((r) => r.hasSynced);
  }

  /** A dead letter's record. */
  get(key: string): TerminalRecord | undefined {
    for (const r of this.deadLetterReflectors) {
      const rec = r.store.get(key);
      if (rec) return rec;
    }
    return undefined;
  }

  /** Whether a finished delivery carries a replay annotation not yet handled. */
  replayRequested(key: string): boolean {
    return this.replayAsked.has(key) || this.get(key)?.metadata.annotations?.[ANNOTATIONS.replay] !== undefined;
  }

  /** Records held in memory: the dead letters, and what is due for deletion soon. */
  get size(): number {
    return this.deadLetterReflectors.reduce((n, r) => n + r.store.size, 0) + this.dueSoon.size;
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
    const out = new Set(this.replayAsked);
    for (const r of this.deadLetterReflectors) for (const [key, rec] of r.store) if (rec.metadata.annotations?.[ANNOTATIONS.replay] !== undefined) out.add(key);
    return [...out];
  }

  /** After gaining leadership: enforce capacity and retention for everything indexed, and sweep. */
  resync(): void {
    for (const r of this.deadLetterReflectors) for (const rec of r.store.values()) this.scheduleRetention(rec);
    for (const subKey of this.deadLetters.keys()) void this.enforceCapacity(subKey);
    this.scheduleSweep(FIRST_SWEEP_DELAY_MS);
    this.budget.changed();
  }

  /** The `n` oldest dead letters across subscriptions, `skip` left out. */
  private oldestDeadLetters(n: number, skip: ReadonlySet<string>): TerminalRecord[] {
    const all: TerminalRecord[] = [];
    for (const r of this.deadLetterReflectors) for (const [key, rec] of r.store) if (!skip.has(key) && !this.evicting.has(key)) all.push(rec);
    all.sort((a, b) => a.finishedAt - b.finishedAt || a.metadata.name.localeCompare(b.metadata.name));
    return all.slice(0, n);
  }

  private upsert(old: TerminalRecord | undefined, rec: TerminalRecord): void {
    const key = objectKey(rec.metadata);
    if (old && old.subscription !== rec.subscription) this.unindex(key, old);
    const subKey = `${rec.metadata.namespace}/${rec.subscription}`;
    let m = this.deadLetters.get(subKey);
    if (!m) this.deadLetters.set(subKey, (m = new Map<string, TerminalRecord>()));
    const isNew = !m.has(key);
    m.set(key, rec);
    if (isNew) {
      this.d.onDeadLettersChanged(subKey);
      void this.enforceCapacity(subKey);
      this.budget.changed();
    }
    this.scheduleRetention(rec);
    if (rec.metadata.annotations?.[ANNOTATIONS.replay] !== undefined) this.d.onReplayRequested(key);
  }

  private remove(rec: TerminalRecord): void {
    const key = objectKey(rec.metadata);
    if (!this.dueSoon.has(key)) this.retention.cancel(key);
    this.unindex(key, rec);
    this.budget.removed(rec);
  }

  /** A Succeeded or Discarded delivery seen in a list, a watch event or a sweep. */
  private passing(rec: TerminalRecord): void {
    const key = objectKey(rec.metadata);
    if (rec.metadata.annotations?.[ANNOTATIONS.replay] !== undefined) {
      this.replayAsked.add(key);
      this.d.onReplayRequested(key);
    } else this.replayAsked.delete(key);
    const due = rec.finishedAt + this.retentionOf(rec);
    if (due - this.now() <= this.sweepWindowMs()) {
      this.dueSoon.set(key, rec);
      this.retention.cancel(key);
      this.retention.schedule(key, due);
    } else if (this.dueSoon.delete(key)) this.retention.cancel(key);
    this.scheduleSweep();
  }

  private gone(rec: TerminalRecord): void {
    const key = objectKey(rec.metadata);
    this.replayAsked.delete(key);
    if (this.dueSoon.delete(key)) this.retention.cancel(key);
  }

  private unindex(key: string, rec: TerminalRecord): void {
    const subKey = `${rec.metadata.namespace}/${rec.subscription}`;
    const m = this.deadLetters.get(subKey);
    if (m?.delete(key)) {
      if (m.size === 0) this.deadLetters.delete(subKey);
      this.d.onDeadLettersChanged(subKey);
    }
  }

  /** Retention per subscription object version (durations parsed once, not per record). */
  private readonly retentions = new WeakMap<object, { succeededMs: number; deadLetteredMs: number }>();

  private retentionsOf(sub: SubscriptionObject | undefined): { succeededMs: number; deadLetteredMs: number } {
    if (!sub) return DEFAULT_RETENTION;
    let r = this.retentions.get(sub);
    if (!r) {
      const parsed = this.d.caches.subscriptionSpec(sub);
      r = parsed.ok ? resolvePolicy(parsed.spec, this.d.defaults).retention : DEFAULT_RETENTION;
      this.retentions.set(sub, r);
    }
    return r;
  }

  private retentionOf(rec: TerminalRecord): number {
    const r = this.retentionsOf(this.d.caches.subscription(`${rec.metadata.namespace}/${rec.subscription}`));
    return rec.phase === "Succeeded" ? r.succeededMs : r.deadLetteredMs;
  }

  /**
   * How far ahead Succeeded and Discarded deliveries are remembered: a quarter of the shortest
   * retention in use, between 10 s and 10 min. The periodic sweep (a paginated list) finds the
   * others when their time comes, so memory does not grow with the number of finished ones.
   */
  private sweepWindowMs(): number {
    const now = this.now();
    if (this.window && now - this.window.at < 1_000) return this.window.ms;
    const ms = this.computeSweepWindowMs();
    this.window = { at: now, ms };
    return ms;
  }
  private window: { at: number; ms: number } | undefined;

  private computeSweepWindowMs(): number {
    let shortest = Math.min(DEFAULT_RETENTION.succeededMs, DEFAULT_RETENTION.deadLetteredMs);
    for (const sub of this.d.caches.subscriptions.values()) {
      const r = this.retentionsOf(sub);
      shortest = Math.min(shortest, r.succeededMs, r.deadLetteredMs);
    }
    return Math.min(600_000, Math.max(10_000, Math.floor(shortest / 4)));
  }

  /** A sweep as soon as possible (the storage budget needs the next oldest). */
  private sweepSoon(): void {
    if (this.sweeping) this.sweepAgain = true;
    else this.scheduleSweep(0);
  }

  /** Arms the next sweep (leader only; the first one soon after taking over). */
  private scheduleSweep(inMs?: number): void {
    if (!this.d.isLeader()) return;
    if (this.sweepTimer && inMs === undefined) return;
    clearTimeout(this.sweepTimer);
    this.sweepTimer = setTimeout(() => {
      this.sweepTimer = undefined;
      this.sweeping = this.sweep().finally(() => {
        this.sweeping = undefined;
        const again = this.sweepAgain;
        this.sweepAgain = false;
        this.scheduleSweep(again ? 0 : this.sweepWindowMs());
      });
    }, inMs ?? this.sweepWindowMs());
    this.sweepTimer.unref();
  }

  /** Lists Succeeded and Discarded deliveries page by page (Table rows), handling each. */
  private async sweep(): Promise<void> {
    if (!this.d.isLeader()) return;
    const started = this.now();
    let seen = 0;
    const tally: SweepTally = this.budget.sweepStarted();
    let complete = true;
    for (const ns of this.d.namespaces.length ? this.d.namespaces : [""]) {
      let continueToken: string | undefined;
      try {
        do {
          const page = await this.d.client.request<{ metadata?: { continue?: string }; rows?: Array<{ cells?: unknown[]; object?: { metadata?: ObjectMeta } }>; columnDefinitions?: Array<{ name: string }> }>({
            method: "GET",
            path: collectionPath(DELIVERIES, ns || undefined),
            accept: ACCEPT.table,
            query: { limit: SWEEP_PAGE_SIZE, continue: continueToken, fieldSelector: FINISHED_NOT_DEAD_LETTERED_SELECTOR, includeObject: "Metadata" },
            timeoutMs: 60_000,
          });
          const columns = (page.columnDefinitions ?? []).map((c) => c.name);
          for (const row of page.rows ?? []) {
            const cells: Record<string, unknown> = {};
            columns.forEach((name, i) => (cells[name] = row.cells?.[i]));
            const rec = toRecord({ metadata: row.object?.metadata ?? ({} as ObjectMeta), cells });
            if (rec) {
              seen++;
              this.passing(rec);
              tally.see(rec);
            }
          }
          continueToken = page.metadata?.continue || undefined;
        } while (continueToken && this.d.isLeader());
        if (continueToken) complete = false;
      } catch (err) {
        complete = false;
        this.d.log.warn({ err: (err as Error).message }, "sweep of finished deliveries failed; the next one retries");
      }
    }
    // Counts only from a sweep that saw everything.
    if (complete) this.budget.sweepFinished(tally);
    this.d.log.info({ seen, dueSoon: this.dueSoon.size, durationMs: this.now() - started, nextInMs: this.sweepWindowMs() }, "swept finished deliveries");
  }

  private scheduleRetention(rec: TerminalRecord): void {
    const key = objectKey(rec.metadata);
    this.retention.cancel(key);
    this.retention.schedule(key, rec.finishedAt + this.retentionOf(rec));
  }

  private async expire(key: string): Promise<void> {
    const rec = this.get(key) ?? this.dueSoon.get(key);
    if (!rec) return;
    const due = rec.finishedAt + this.retentionOf(rec);
    if (due > this.now()) return this.retention.schedule(key, due); // retention was raised meanwhile
    if (!this.d.isLeader()) return; // the leader deletes; resync() reschedules on takeover
    if (await this.deleteDelivery(rec, "retention")) this.dueSoon.delete(key);
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

  private async deleteDelivery(rec: TerminalRecord, why: "retention" | "overflow" | "budget"): Promise<boolean> {
    const key = objectKey(rec.metadata);
    if (this.deletingKeys.has(key)) return false;
    this.deletingKeys.add(key);
    try {
      if (this.deleting >= MAX_CONCURRENT_DELETES) await new Promise<void>((r) => this.deleteWaiters.push(r));
      this.deleting++;
      try {
        return await this.deleteNow(rec, why);
      } finally {
        this.deleting--;
        this.deleteWaiters.shift()?.();
      }
    } finally {
      this.deletingKeys.delete(key);
    }
  }

  private async deleteNow(rec: TerminalRecord, why: "retention" | "overflow" | "budget"): Promise<boolean> {
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
