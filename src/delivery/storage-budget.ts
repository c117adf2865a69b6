// The storage budget (WEBHOOK_MAX_FINISHED_DELIVERIES): finished deliveries live in the
// cluster's etcd, shared with every Deployment and Pod, so their number is capped across the
// watched namespaces. Above the cap the leader deletes the oldest first, Succeeded before
// Discarded before DeadLettered (what nobody will read again goes before what someone may
// replay), with a Warning Event on each subscription concerned and a counter by phase.
//
// Counting without keeping every finished delivery in memory: dead letters are indexed (exact);
// Succeeded and Discarded are counted by the leader's periodic sweep (a paginated list, exact
// as of its snapshot) plus the watch's ADDED and DELETED events since. The sweep also keeps the
// oldest EVICTION_CANDIDATES of each phase: new finished deliveries are always newer, so these
// stay the oldest until deleted, and eviction needs no other list. See docs/capacity.md.
import type { Logger } from "pino";
import { API_VERSION, SUBSCRIPTION } from "../api/names.js";
import type { EventSink } from "../kube/events.js";
import { objectKey } from "../kube/types.js";
import type { Metrics, StoredPhase } from "../observability/metrics.js";
import type { Caches } from "./caches.js";
import type { TerminalPhase, TerminalRecord } from "./terminal-index.js";

/** Oldest Succeeded (and Discarded) deliveries a sweep remembers for eviction. */
export const EVICTION_CANDIDATES = 1_000;
/** Deletes started per round; the next round follows at once while the budget is exceeded. */
const ROUND = 500;
/** An eviction whose watch DELETED event never came (a watch gap) stops counting after this. */
const PENDING_TTL_MS = 60_000;
/** Sweeps asked for by the budget (candidates used up) are at least this far apart. */
const MIN_SWEEP_GAP_MS = 2_000;

type Listed = "Succeeded" | "Discarded";

export interface StorageBudgetDeps {
  max: number;
  caches: Caches;
  events: EventSink;
  metrics: Metrics;
  log: Logger;
  isLeader: () => boolean;
  /** Dead letters indexed now, and the oldest of them. */
  deadLetterCount: () => number;
  oldestDeadLetters: (n: number, skip: ReadonlySet<string>) => TerminalRecord[];
  /** Deletes one finished delivery (only the version seen); true when this call deleted it. */
  deleteDelivery: (rec: TerminalRecord) => Promise<boolean>;
  /** Asks the terminal index for a sweep as soon as possible. */
  requestSweep: () => void;
  now?: () => number;
}

/** What one sweep saw: exact counts as of its snapshot, and the oldest of each phase. */
export class SweepTally {
  readonly counts: Record<Listed, number> = { Succeeded: 0, Discarded: 0 };
  readonly oldest: Record<Listed, TerminalRecord[]> = { Succeeded: [], Discarded: [] };
  constructor(readonly countsAtStart: Record<Listed, number>) {}

  see(rec: TerminalRecord): void {
    if (rec.phase === "DeadLettered") return;
    this.counts[rec.phase]++;
    keepOldest(this.oldest[rec.phase], rec, EVICTION_CANDIDATES);
  }
}

/** Inserts `rec` into `list` (sorted oldest first) if it is among the `n` oldest. */
export function keepOldest(list: TerminalRecord[], rec: TerminalRecord, n: number): void {
  const older = (a: TerminalRecord, b: TerminalRecord) => a.finishedAt < b.finishedAt || (a.finishedAt === b.finishedAt && a.metadata.name < b.metadata.name);
  if (list.length >= n && !older(rec, list[list.length - 1]!)) return;
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (older(list[mid]!, rec)) lo = mid + 1;
    else hi = mid;
  }
  list.splice(lo, 0, rec);
  if (list.length > n) list.pop();
}

export class StorageBudget {
  /** Succeeded and Discarded stored: the last sweep's snapshot plus the watch since. */
  private readonly counts: Record<Listed, number> = { Succeeded: 0, Discarded: 0 };
  /** The oldest known of each phase, oldest first (Map order), from the last sweep. */
  private readonly candidates: Record<Listed, Map<string, TerminalRecord>> = { Succeeded: new Map(), Discarded: new Map() };
  /** Evictions started whose watch DELETED event has not arrived: still counted as stored. */
  private readonly pending = new Map<string, { phase: TerminalPhase; at: number }>();
  private running = false;
  private again = false;
  private lastSweepRequest = 0;
  private readonly now: () => number;

  constructor(private readonly d: StorageBudgetDeps) {
    this.now = d.now ?? Date.now;
    d.metrics.storage.budget.set(d.max);
    d.metrics.storage.setStoredSource(() => this.stored());
  }

  /** Deliveries stored by phase, as far as this process knows. */
  stored(): Record<StoredPhase, number> {
    let pendingCount = 0;
    let retrying = 0;
    for (const d of this.d.caches.deliveries.values()) {
      if (d.status?.phase === "Retrying") retrying++;
      else pendingCount++;
    }
    return { Pending: pendingCount, Retrying: retrying, Succeeded: this.counts.Succeeded, Discarded: this.counts.Discarded, DeadLettered: this.d.deadLetterCount() };
  }

  /** Finished deliveries stored (estimated for Succeeded and Discarded between sweeps). */
  finished(): number {
    return this.counts.Succeeded + this.counts.Discarded + this.d.deadLetterCount();
  }

  /** A Succeeded or Discarded delivery appeared (watch ADDED). */
  added(rec: TerminalRecord): void {
    if (rec.phase === "DeadLettered") return;
    this.counts[rec.phase]++;
    this.changed();
  }

  /** A finished delivery is gone (watch DELETED), whatever its phase. */
  removed(rec: TerminalRecord): void {
    const key = objectKey(rec.metadata);
    this.pending.delete(key);
    if (rec.phase === "DeadLettered") return;
    this.candidates[rec.phase].delete(key);
    this.counts[rec.phase] = Math.max(0, this.counts[rec.phase] - 1);
  }

  sweepStarted(): SweepTally {
    return new SweepTally({ ...this.counts });
  }

  /** A complete sweep: its snapshot plus what the watch reported since it began. */
  sweepFinished(t: SweepTally): void {
    for (const phase of ["Succeeded", "Discarded"] as const) {
      this.counts[phase] = Math.max(0, t.counts[phase] + this.counts[phase] - t.countsAtStart[phase]);
      this.candidates[phase] = new Map(t.oldest[phase].map((r) => [objectKey(r.metadata), r]));
    }
    this.changed();
  }

  /** Counts may have grown: evict if the budget is exceeded (leader only). */
  changed(): void {
    if (!this.d.isLeader() || this.excess() <= 0) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.evictWhileOver().finally(() => (this.running = false));
  }

  private excess(): number {
    const now = this.now();
    for (const [key, p] of this.pending) if (now - p.at > PENDING_TTL_MS) this.pending.delete(key);
    return this.finished() - this.pending.size - this.d.max;
  }

  private async evictWhileOver(): Promise<void> {
    do {
      this.again = false;
      const progressed = await this.round();
      if (progressed && this.excess() > 0) this.again = true;
    } while (this.again && this.d.isLeader());
  }

  /** Picks and deletes up to ROUND of the oldest; false when nothing could be picked. */
  private async round(): Promise<boolean> {
    const excess = Math.min(ROUND, this.excess());
    if (excess <= 0) return false;
    const picks = this.pick(excess);
    if (picks.length === 0) return false;
    for (const rec of picks) this.pending.set(objectKey(rec.metadata), { phase: rec.phase, at: this.now() });
    const done = await Promise.all(picks.map(async (rec) => ({ rec, ok: await this.d.deleteDelivery(rec).catch(() => false) })));
    const bySub = new Map<string, Record<TerminalPhase, number>>();
    for (const { rec, ok } of done) {
      const key = objectKey(rec.metadata);
      if (rec.phase !== "DeadLettered") this.candidates[rec.phase].delete(key);
      if (!ok) {
        this.pending.delete(key);
        continue;
      }
      this.d.metrics.storage.evicted.inc({ phase: rec.phase });
      if (rec.phase === "DeadLettered") this.d.metrics.dlqOperations.inc({ operation: "drop_overflow" });
      const subKey = `${rec.metadata.namespace}/${rec.subscription}`;
      const tally = bySub.get(subKey) ?? { Succeeded: 0, Discarded: 0, DeadLettered: 0 };
      tally[rec.phase]++;
      bySub.set(subKey, tally);
    }
    for (const [subKey, tally] of bySub) this.report(subKey, tally);
    return true;
  }

  /**
   * The oldest Succeeded first, then Discarded, then dead letters; dead letters only once no
   * Succeeded or Discarded is stored (when the remembered candidates run out while some still
   * are, a sweep finds the next oldest and calls back).
   */
  private pick(n: number): TerminalRecord[] {
    const picks: TerminalRecord[] = [];
    let listedLeft = this.counts.Succeeded + this.counts.Discarded;
    for (const p of this.pending.values()) if (p.phase !== "DeadLettered") listedLeft--;
    for (const phase of ["Succeeded", "Discarded"] as const) {
      for (const [key, rec] of this.candidates[phase]) {
        if (picks.length >= n) return picks;
        if (this.pending.has(key)) continue;
        picks.push(rec);
        listedLeft--;
      }
    }
    if (picks.length >= n) return picks;
    if (listedLeft > 0) {
      this.sweepSoon();
      return picks;
    }
    return picks.concat(this.d.oldestDeadLetters(n - picks.length, new Set(this.pending.keys())));
  }

  private sweepSoon(): void {
    const now = this.now();
    if (now - this.lastSweepRequest < MIN_SWEEP_GAP_MS) return;
    this.lastSweepRequest = now;
    this.d.requestSweep();
  }

  private report(subKey: string, t: Record<TerminalPhase, number>): void {
    const sub = this.d.caches.subscription(subKey);
    const total = t.Succeeded + t.Discarded + t.DeadLettered;
    const parts = (["Succeeded", "Discarded", "DeadLettered"] as const).filter((p) => t[p] > 0).map((p) => `${p} ${t[p]}`);
    this.d.log.info({ subscription: subKey, ...t, budget: this.d.max }, "finished deliveries deleted for the storage budget");
    if (!sub) return;
    this.d.events.record(
      { apiVersion: API_VERSION, kind: SUBSCRIPTION.kind, namespace: sub.metadata.namespace!, name: sub.metadata.name, uid: sub.metadata.uid },
      "Warning",
      "FinishedDeliveriesEvicted",
      `${total} finished deliveries of this subscription deleted (${parts.join(", ")}): more than WEBHOOK_MAX_FINISHED_DELIVERIES=${this.d.max} finished deliveries were stored; the oldest go first, Succeeded before Discarded before DeadLettered`,
    );
  }
}
