// Retention: a finished delivery is deleted spec.retention after it finished (succeeded, or
// deadLettered for DeadLettered, Discarded and a dead letter a replay delivered), by the leader. Dead letters are indexed, so
// each has its timer; Succeeded and Discarded deliveries are remembered only while their time
// is near (the sweep window), and the periodic sweep finds the others when their time comes, so
// memory does not grow with the number of finished deliveries.
import { DEFAULT_RETENTION, type Policy } from "../core/attempt/policy.js";
import { objectKey } from "../kube/types.js";
import { TimerHeap } from "../runtime/timer-heap.js";
import type { Caches } from "../delivery/caches.js";
import type { FinishedDeletes } from "./finished-deletes.js";
import type { TerminalRecord } from "./records.js";

export interface RetentionDeps {
  caches: Caches;
  deletes: FinishedDeletes;
  isLeader: () => boolean;
  /** The dead letter indexed under `key`, if any. */
  deadLetter: (key: string) => TerminalRecord | undefined;
  now: () => number;
}

export class Retention {
  private readonly timers: TimerHeap<string>;
  /** Succeeded/Discarded deliveries whose retention ends within the sweep window. */
  private readonly dueSoon = new Map<string, TerminalRecord>();
  private window: { at: number; ms: number } | undefined;

  constructor(private readonly d: RetentionDeps) {
    this.timers = new TimerHeap<string>((key) => void this.expire(key), d.now);
  }

  stop(): void {
    this.timers.stop();
  }

  /** Succeeded and Discarded deliveries remembered now (their retention ends soon). */
  get dueSoonCount(): number {
    return this.dueSoon.size;
  }

  /** A dead letter indexed (or changed): its timer runs to the end of its retention. */
  schedule(rec: TerminalRecord): void {
    const key = objectKey(rec.metadata);
    this.timers.cancel(key);
    this.timers.schedule(key, rec.finishedAt + this.retentionOf(rec));
  }

  /** A dead letter left the index. */
  unschedule(key: string): void {
    if (!this.dueSoon.has(key)) this.timers.cancel(key);
  }

  /** A Succeeded or Discarded delivery seen in a list, a watch event or a sweep. */
  passing(rec: TerminalRecord): void {
    const key = objectKey(rec.metadata);
    const due = rec.finishedAt + this.retentionOf(rec);
    if (due - this.d.now() <= this.sweepWindowMs()) {
      this.dueSoon.set(key, rec);
      this.timers.cancel(key);
      this.timers.schedule(key, due);
    } else if (this.dueSoon.delete(key)) this.timers.cancel(key);
  }

  /** A Succeeded or Discarded delivery was deleted. */
  gone(key: string): void {
    if (this.dueSoon.delete(key)) this.timers.cancel(key);
  }

  /** Try again at `at` (a delete failed). */
  retryAt(key: string, at: number): void {
    this.timers.schedule(key, at);
  }

  /**
   * How far ahead Succeeded and Discarded deliveries are remembered: a quarter of the shortest
   * retention in use, between 10 s and 10 min (recomputed at most once a second).
   */
  sweepWindowMs(): number {
    const now = this.d.now();
    if (this.window && now - this.window.at < 1_000) return this.window.ms;
    let shortest = Math.min(DEFAULT_RETENTION.succeededMs, DEFAULT_RETENTION.deadLetteredMs);
    for (const sub of this.d.caches.subscriptions.values()) {
      const r = this.d.caches.policy(sub)?.retention ?? DEFAULT_RETENTION;
      shortest = Math.min(shortest, r.succeededMs, r.deadLetteredMs);
    }
    const ms = Math.min(600_000, Math.max(10_000, Math.floor(shortest / 4)));
    this.window = { at: now, ms };
    return ms;
  }

  private retentionOf(rec: TerminalRecord): number {
    const r: Policy["retention"] = this.d.caches.policy(this.d.caches.subscription(`${rec.metadata.namespace}/${rec.subscription}`))?.retention ?? DEFAULT_RETENTION;
    // A dead letter delivered by a replay keeps its record as long as a dead letter would.
    return rec.phase === "Succeeded" && !rec.wasDeadLetter ? r.succeededMs : r.deadLetteredMs;
  }

  private async expire(key: string): Promise<void> {
    const rec = this.d.deadLetter(key) ?? this.dueSoon.get(key);
    if (!rec) return;
    const due = rec.finishedAt + this.retentionOf(rec);
    if (due > this.d.now()) return this.timers.schedule(key, due); // retention was raised meanwhile
    if (!this.d.isLeader()) return; // the leader deletes; resync() reschedules on takeover
    if (await this.d.deletes.delete(rec, "retention")) this.dueSoon.delete(key);
  }
}
