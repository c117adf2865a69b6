// The index of finished deliveries (Succeeded, DeadLettered, Discarded), fed by a watch that
// asks the API server for Table rows with metadata-only objects (PartialObjectMetadata): per
// delivery we keep its name, subscription, phase, finish time and whether a replay was asked
// for, never its payload. It serves the dead-letter counts and oldest-first eviction at
// deadLetter.maxEntries, and notices a replay annotation on a finished delivery at once. What
// it sees it hands on: retention.ts (deletes after the TTL), sweep.ts (the periodic list of
// Succeeded and Discarded deliveries), storage-budget.ts (WEBHOOK_MAX_FINISHED_DELIVERIES).
// See docs/adr/0003-terminal-index-from-table-rows.md.
import type { Logger } from "pino";
import { INT_VARS } from "../config/config.js";
import { ANNOTATIONS } from "../api/names.js";
import { fromRfc3339 } from "../core/rfc3339.js";
import type { KubeClient } from "../kube/client.js";
import type { EventSink } from "../kube/events.js";
import { Reflector, type RawItem } from "../kube/reflector.js";
import { collectionPath, objectKey } from "../kube/types.js";
import { SHARED_LIMITS, type Metrics } from "../observability/metrics.js";
import { TERMINAL_DELIVERIES_SELECTOR, type Caches } from "../delivery/caches.js";
import { evictionPlan, fairShares } from "./fair-share.js";
import { byAge, firstN } from "./oldest.js";
import { FinishedDeletes, type DeleteReason } from "./finished-deletes.js";
import { DELIVERIES, subscriptionKey, subscriptionRef } from "../delivery/objects.js";
import { Retention } from "./retention.js";
import { StorageBudget } from "./storage-budget.js";
import { Sweeper } from "./sweep.js";
import type { TerminalPhase, TerminalRecord } from "./records.js";

/** Namespaces and subscription names repeat across thousands of records: keep one copy. */
const pool = new Map<string, string>();
function intern(s: string): string {
  const hit = pool.get(s);
  if (hit !== undefined) return hit;
  if (pool.size < 100_000) pool.set(s, s);
  return s;
}

/** A new leader sweeps the finished deliveries shortly after it starts, not in its first breath. */
const FIRST_SWEEP_DELAY_MS = 5_000;

/** Candidates taken beyond the number to evict: one that cannot be deleted (changed or gone) makes way for the next. */
const SPARE_CANDIDATES = 8;

export interface TerminalIndexDeps {
  client: KubeClient;
  caches: Caches;
  namespaces: string[];
  events: EventSink;
  metrics: Metrics;
  log: Logger;
  isLeader: () => boolean;
  /** A replay annotation appeared on a finished delivery. */
  onReplayRequested: (key: string) => void;
  /** Dead-letter counts of a subscription changed. */
  onDeadLettersChanged: (subKey: string) => void;
  /** A dead letter was indexed (or changed), or left the index (ordering lanes it blocks). */
  onDeadLetter?: (rec: TerminalRecord, present: boolean) => void;
  /** WEBHOOK_DLQ_MAX_ENTRIES (default: its documented default). */
  dlqMaxEntries?: number;
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
  /** The subscriptions holding dead letters, by namespace, and how many each namespace holds (the fair shares' input). */
  private readonly subsByNamespace = new Map<string, Set<string>>();
  private readonly deadLettersPerNamespace = new Map<string, number>();
  /** Succeeded/Discarded deliveries annotated for replay (to be refused). */
  private readonly replayAsked = new Set<string>();
  private readonly evicting = new Set<string>();
  /** Dead letters deleted to make room whose watch DELETED event has not come yet (epoch ms of the delete). */
  private readonly leaving = new Map<string, number>();
  /** The WEBHOOK_DLQ_MAX_ENTRIES pass running (enforceDlqCap), the next one chained after it. */
  private capPass: Promise<void> = Promise.resolve();
  /** Dead letters about to be stored (makeRoom made room for them), until the index sees them. */
  private readonly reserved = new Map<string, { subKey: string; at: number }>();
  private readonly now: () => number;
  private readonly deletes: FinishedDeletes;
  private readonly retention: Retention;
  private readonly sweeper: Sweeper;
  readonly budget: StorageBudget;

  constructor(private readonly d: TerminalIndexDeps) {
    this.now = d.now ?? Date.now;
    this.deletes = new FinishedDeletes({ client: d.client, log: d.log, retryAt: (key, at) => this.retention.retryAt(key, at), now: this.now });
    this.retention = new Retention({ caches: d.caches, deletes: this.deletes, isLeader: d.isLeader, deadLetter: (key) => this.get(key), now: this.now });
    this.budget = new StorageBudget({
      max: d.maxFinishedDeliveries ?? INT_VARS.maxFinishedDeliveries.default,
      caches: d.caches,
      events: d.events,
      metrics: d.metrics,
      log: d.log,
      isLeader: d.isLeader,
      deadLettersByNamespace: () => this.deadLettersPerNamespace,
      // Not those the dead-letter cap is deleting (leaving): the budget would only be refused them.
      oldestDeadLetters: (namespace, n, skip) => this.oldestDeadLetters(n, new Set([...skip, ...this.leaving.keys()]), namespace),
      deleteDelivery: (rec) => this.deletes.delete(rec, "budget"),
      requestSweep: () => this.sweeper.soon(),
      now: this.now,
    });
    this.sweeper = new Sweeper({
      client: d.client,
      namespaces: d.namespaces,
      fieldSelector: FINISHED_NOT_DEAD_LETTERED_SELECTOR,
      isLeader: d.isLeader,
      log: d.log,
      windowMs: () => this.retention.sweepWindowMs(),
      visit: () => {
        const tally = this.budget.sweepStarted();
        return {
          row: (item) => {
            const rec = this.toRecord(item);
            if (!rec) return false;
            this.passing(rec);
            tally.see(rec);
            return true;
          },
          // Counts only from a sweep that saw everything.
          done: (complete) => {
            if (complete) this.budget.sweepFinished(tally);
            return { dueSoon: this.retention.dueSoonCount };
          },
        };
      },
      now: this.now,
    });
    for (const ns of d.namespaces.length ? d.namespaces : [""]) {
      const scope = ns || "all-namespaces";
      const common = { client: d.client, path: collectionPath(DELIVERIES, ns || undefined), representation: "table" as const, transform: (item: RawItem) => this.toRecord(item), log: d.log };
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
    this.retention.stop();
    await Promise.all([...this.reflectors.map((r) => r.stop()), this.sweeper.stop()]);
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
    return this.deadLetterReflectors.reduce((n, r) => n + r.store.size, 0) + this.retention.dueSoonCount;
  }

  deadLetterCount(subKey: string): number {
    return this.deadLetters.get(subKey)?.size ?? 0;
  }

  /**
   * Makes room for one more dead letter before it is stored (the DLQ specification's eviction
   * order): when its subscription holds deadLetter.maxEntries, its oldest dead letters are
   * deleted first; when the watched namespaces hold WEBHOOK_DLQ_MAX_ENTRIES, the oldest dead
   * letters of the namespaces over their fair share of it (fair-share.ts: the new one counts in
   * its own namespace), so a namespace within its share never loses one for another's. Each
   * gets a DeadLetterDropped Event on its subscription. Leader only; a delivery already a dead
   * letter needs no room.
   */
  async makeRoom(deliveryKey: string, subKey: string): Promise<void> {
    if (!this.d.isLeader() || this.get(deliveryKey)) return;
    this.expireRoom();
    this.reserved.set(deliveryKey, { subKey, at: this.now() });
    const sub = this.d.caches.subscription(subKey);
    const perSub = this.d.caches.policy(sub)?.deadLetter.maxEntries;
    if (perSub !== undefined) {
      const own = (this.deadLetters.get(subKey)?.size ?? 0) + this.reservedFor(subKey) - this.leavingOf(subKey);
      const excess = own - perSub;
      if (excess > 0) await this.evictOldest(excess, this.oldestOf(subKey, excess + SPARE_CANDIDATES), (rec) => `the subscription holds deadLetter.maxEntries=${perSub} dead letters and ${rec.metadata.name} was the oldest`);
    }
    await this.enforceDlqCap();
  }

  /**
   * WEBHOOK_DLQ_MAX_ENTRIES: deletes the oldest dead letters of the namespaces over their fair
   * share until the watched namespaces hold no more. Before a CR-mode dead letter is stored
   * (makeRoom), and after any new one is indexed (stream mode's are created without makeRoom).
   * One pass at a time: two passes counting the same excess would delete twice as many.
   */
  private enforceDlqCap(): Promise<void> {
    const pass = this.capPass.then(() => this.enforceDlqCapNow());
    this.capPass = pass.catch(() => undefined);
    return pass;
  }

  private async enforceDlqCapNow(): Promise<void> {
    if (!this.d.isLeader()) return;
    this.expireRoom();
    const max = this.d.dlqMaxEntries ?? INT_VARS.dlqMaxEntries.default;
    const held = this.deadLettersHeld();
    let all = 0;
    for (const n of held.values()) all += n;
    if (all <= max) return;
    const shares = fairShares(held, max);
    for (const [ns, over] of evictionPlan(held, max)) {
      const oldest = this.oldestDeadLetters(over + 8, new Set(this.leaving.keys()), ns).map((r) => objectKey(r.metadata));
      const why = (rec: TerminalRecord) =>
        `the watched namespaces hold WEBHOOK_DLQ_MAX_ENTRIES=${max} dead letters; namespace ${ns} held ${held.get(ns)}, over its fair share of ${shares.get(ns)} (shared by ${shares.size} namespaces), and ${rec.metadata.name} was its oldest`;
      await this.evictOldest(over, oldest, why, "dlq_max_entries");
    }
  }

  /** Dead letters by namespace as makeRoom counts them: indexed, plus reserved, less those leaving. */
  private deadLettersHeld(): Map<string, number> {
    const held = new Map(this.deadLettersPerNamespace);
    const add = (key: string, n: number) => {
      const ns = key.slice(0, key.indexOf("/"));
      held.set(ns, (held.get(ns) ?? 0) + n);
    };
    for (const r of this.reserved.values()) add(r.subKey, 1);
    for (const key of this.leaving.keys()) add(key, -1);
    return held;
  }

  private reservedFor(subKey: string): number {
    let n = 0;
    for (const r of this.reserved.values()) if (r.subKey === subKey) n++;
    return n;
  }

  private leavingOf(subKey: string): number {
    let n = 0;
    for (const key of this.leaving.keys()) if (this.deadLetters.get(subKey)?.has(key)) n++;
    return n;
  }

  /** Reservations whose dead letter never came (the write failed or was dropped) and deletes the watch never reported. */
  private expireRoom(): void {
    const cutoff = this.now() - 60_000;
    for (const [k, r] of this.reserved) if (r.at < cutoff) this.reserved.delete(k);
    for (const [k, at] of this.leaving) if (at < cutoff || !this.get(k)) this.leaving.delete(k);
  }

  /** Deletes the first `n` of `keys` (oldest first) that can be deleted, skipping those already leaving. */
  private async evictOldest(n: number, keys: string[], why: (rec: TerminalRecord) => string, limit?: (typeof SHARED_LIMITS)[number]): Promise<void> {
    for (const key of keys) {
      if (n <= 0) return;
      const rec = this.get(key);
      if (!rec || this.leaving.has(key) || this.evicting.has(key)) continue;
      this.leaving.set(key, this.now());
      n--;
      if (!(await this.deletes.delete(rec, "overflow"))) {
        // Changed since indexed (or gone): the next oldest makes the room.
        this.leaving.delete(key);
        n++;
        continue;
      }
      this.dropped(rec, why(rec), limit);
    }
  }

  private dropped(rec: TerminalRecord, why: string, limit?: (typeof SHARED_LIMITS)[number]): void {
    this.d.metrics.dlqOperations.inc({ operation: "drop_overflow" });
    if (limit) this.d.metrics.storage.namespaceEvictions.inc({ namespace: rec.metadata.namespace ?? "", phase: "DeadLettered", limit });
    const sub = this.d.caches.subscription(subscriptionKey(rec.metadata.namespace ?? "", rec.subscription));
    if (!sub) return;
    this.d.events.record({ ...subscriptionRef(sub), resourceVersion: undefined }, "Warning", "DeadLetterDropped", `dead letter ${rec.metadata.name} deleted to make room for a new one: ${why}`);
  }

  /** The keys of a subscription's `n` oldest dead letters not being deleted already, oldest first. */
  private oldestOf(subKey: string, n: number): string[] {
    const m = this.deadLetters.get(subKey);
    if (!m) return [];
    const deletable = function* (evicting: ReadonlySet<string>, leaving: ReadonlyMap<string, number>) {
      for (const [key, rec] of m) if (!evicting.has(key) && !leaving.has(key)) yield rec;
    };
    return firstN(deletable(this.evicting, this.leaving), n, byAge).map((r) => objectKey(r.metadata));
  }

  /** Every finished delivery with a replay annotation (the new leader handles them). */
  replayRequests(): string[] {
    const out = new Set(this.replayAsked);
    for (const r of this.deadLetterReflectors) for (const [key, rec] of r.store) if (rec.metadata.annotations?.[ANNOTATIONS.replay] !== undefined) out.add(key);
    return [...out];
  }

  /** After gaining leadership: enforce capacity and retention for everything indexed, and sweep. */
  resync(): void {
    for (const r of this.deadLetterReflectors) for (const rec of r.store.values()) this.retention.schedule(rec);
    for (const subKey of this.deadLetters.keys()) void this.enforceCapacity(subKey);
    this.sweeper.schedule(FIRST_SWEEP_DELAY_MS);
    this.budget.changed();
  }

  /** The `n` oldest dead letters of a namespace, `skip` left out. */
  private oldestDeadLetters(n: number, skip: ReadonlySet<string>, namespace: string): TerminalRecord[] {
    const subs = this.subsByNamespace.get(namespace) ?? [];
    const deadLetters = this.deadLetters;
    const evicting = this.evicting;
    const candidates = function* () {
      for (const subKey of subs) for (const [key, rec] of deadLetters.get(subKey) ?? []) if (!skip.has(key) && !evicting.has(key)) yield rec;
    };
    return firstN(candidates(), n, byAge);
  }

  private upsert(old: TerminalRecord | undefined, rec: TerminalRecord): void {
    const key = objectKey(rec.metadata);
    if (old && old.subscription !== rec.subscription) this.unindex(key, old);
    const subKey = subscriptionKey(rec.metadata.namespace ?? "", rec.subscription);
    let m = this.deadLetters.get(subKey);
    if (!m) this.deadLetters.set(subKey, (m = new Map<string, TerminalRecord>()));
    const isNew = !m.has(key);
    m.set(key, rec);
    if (isNew) this.counted(rec.metadata.namespace ?? "", subKey, 1);
    this.reserved.delete(key);
    this.d.onDeadLetter?.(rec, true);
    if (isNew) {
      this.d.onDeadLettersChanged(subKey);
      void this.enforceCapacity(subKey);
      void this.enforceDlqCap();
      this.budget.changed();
    }
    this.retention.schedule(rec);
    if (rec.metadata.annotations?.[ANNOTATIONS.replay] !== undefined) this.d.onReplayRequested(key);
  }

  private remove(rec: TerminalRecord): void {
    const key = objectKey(rec.metadata);
    this.leaving.delete(key);
    this.d.onDeadLetter?.(rec, false);
    this.retention.unschedule(key);
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
    this.retention.passing(rec);
    this.sweeper.schedule();
  }

  private gone(rec: TerminalRecord): void {
    const key = objectKey(rec.metadata);
    this.replayAsked.delete(key);
    this.retention.gone(key);
  }

  private unindex(key: string, rec: TerminalRecord): void {
    const subKey = subscriptionKey(rec.metadata.namespace ?? "", rec.subscription);
    const m = this.deadLetters.get(subKey);
    if (m?.delete(key)) {
      if (m.size === 0) this.deadLetters.delete(subKey);
      this.counted(rec.metadata.namespace ?? "", subKey, -1);
      this.d.onDeadLettersChanged(subKey);
    }
  }

  /** Keeps the per-namespace counts and subscriptions in step with a dead letter indexed (+1) or gone (-1). */
  private counted(ns: string, subKey: string, delta: 1 | -1): void {
    const n = (this.deadLettersPerNamespace.get(ns) ?? 0) + delta;
    if (delta > 0) {
      let subs = this.subsByNamespace.get(ns);
      if (!subs) {
        this.subsByNamespace.set(ns, (subs = new Set()));
        // Born at 0, so an alert sees the first eviction as an increase.
        for (const limit of SHARED_LIMITS) this.d.metrics.storage.namespaceEvictions.inc({ namespace: ns, phase: "DeadLettered", limit }, 0);
      }
      subs.add(subKey);
    } else if (!this.deadLetters.has(subKey)) this.subsByNamespace.get(ns)?.delete(subKey);
    if (n > 0) this.deadLettersPerNamespace.set(ns, n);
    else {
      this.deadLettersPerNamespace.delete(ns);
      this.subsByNamespace.delete(ns);
    }
  }

  /** Deletes the oldest dead letters above the subscription's deadLetter.maxEntries. */
  private async enforceCapacity(subKey: string): Promise<void> {
    if (!this.d.isLeader()) return;
    const sub = this.d.caches.subscription(subKey);
    const max = this.d.caches.policy(sub)?.deadLetter.maxEntries;
    if (!sub || max === undefined) return;
    // Counted before anything is sorted: under its maxEntries (nearly always) a new dead letter costs nothing here.
    const m = this.deadLetters.get(subKey);
    if (!m || m.size <= max) return;
    let deleting = 0;
    for (const key of this.evicting) if (m.has(key)) deleting++;
    for (const key of this.leaving.keys()) if (m.has(key) && !this.evicting.has(key)) deleting++;
    const excess = m.size - deleting - max;
    if (excess <= 0) return;
    for (const key of this.oldestOf(subKey, excess)) {
      const rec = this.get(key);
      if (!rec) continue;
      this.evicting.add(key);
      try {
        if (await this.deletes.delete(rec, "overflow" satisfies DeleteReason)) {
          this.d.metrics.dlqOperations.inc({ operation: "drop_overflow" });
          this.d.events.record(
            { ...subscriptionRef(sub), resourceVersion: undefined },
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

  /** A Table row as a record; undefined when its phase is not final. */
  private toRecord(item: RawItem): TerminalRecord | undefined {
    return terminalRecord(item, this.now);
  }
}

const PHASES: Record<string, TerminalPhase> = { Succeeded: "Succeeded", DeadLettered: "DeadLettered", Discarded: "Discarded" };

/** A finished delivery's Table row as a record; undefined when its phase is not final. */
export function terminalRecord(item: RawItem, now: () => number): TerminalRecord | undefined {
  const cells = item.cells ?? {};
  const phase = PHASES[String(cells["Phase"])];
  if (!phase) return undefined;
  const m = item.metadata;
  const replay = m.annotations?.[ANNOTATIONS.replay];
  const text = (column: string): string | undefined => {
    const v = cells[column];
    return typeof v === "string" && v !== "" ? v : undefined;
  };
  const finished = text("Finished") !== undefined ? fromRfc3339(text("Finished")) : undefined;
  const metadata: TerminalRecord["metadata"] = { name: m.name, namespace: intern(m.namespace ?? ""), resourceVersion: m.resourceVersion };
  if (replay !== undefined) metadata.annotations = { [ANNOTATIONS.replay]: replay };
  const eventType = text("Event type");
  const reason = phase === "DeadLettered" ? text("Reason") : undefined;
  const orderingKey = text("Ordering key");
  const orderingValue = text("Ordering value");
  return {
    metadata,
    subscription: intern(text("Subscription") ?? ""),
    phase,
    finishedAt: finished ?? fromRfc3339(m.creationTimestamp) ?? now(),
    ...(eventType !== undefined ? { eventType: intern(eventType) } : {}),
    ...(reason !== undefined ? { reason: intern(reason) } : {}),
    ...(orderingKey !== undefined && orderingValue !== undefined ? { ordering: { key: intern(orderingKey), value: orderingValue } } : {}),
    ...(phase === "Succeeded" && text("Dead-lettered") !== undefined ? { wasDeadLetter: true as const } : {}),
  };
}
