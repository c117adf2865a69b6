// The storage budget (WEBHOOK_MAX_FINISHED_DELIVERIES): finished deliveries live in the
// cluster's etcd, shared with every Deployment and Pod, so their number is capped across the
// watched namespaces. The cap is shared fairly between the namespaces holding finished
// deliveries (max-min fair shares, fair-share.ts): above it the leader deletes only in the
// namespaces over their share, the furthest over first, so one tenant's flood never deletes
// another tenant's deliveries. Within a namespace the oldest go first, Succeeded before
// Discarded before a former dead letter delivered by a replay before DeadLettered (what nobody
// will read again goes before what someone may read or replay), with a Warning Event on each
// subscription concerned and counters by phase and by namespace.
//
// Counting without keeping every finished delivery in memory: dead letters are indexed (exact);
// Succeeded and Discarded are counted per namespace by the leader's periodic sweep (a paginated
// list, exact as of its snapshot) plus the watch's ADDED and DELETED events since. The sweep also
// keeps the oldest few of each phase in each namespace (EVICTION_CANDIDATES shared between the
// namespaces): new finished deliveries are always newer, so these stay the oldest until deleted,
// and eviction needs no other list. See docs/capacity.md.
import type { Logger } from "pino";
import { API_VERSION, SUBSCRIPTION } from "../api/names.js";
import type { EventSink } from "../kube/events.js";
import { objectKey } from "../kube/types.js";
import type { Metrics, StoredPhase } from "../observability/metrics.js";
import type { Caches } from "../delivery/caches.js";
import { evictionPlan, fairShares } from "./fair-share.js";
import { byAge, keepFirst } from "./oldest.js";
import type { TerminalPhase, TerminalRecord } from "./records.js";

/** Oldest Succeeded (and Discarded) deliveries a sweep remembers for eviction, all namespaces together. */
export const EVICTION_CANDIDATES = 1_000;
/** ... but at least this many per namespace and phase, however many namespaces there are. */
export const MIN_CANDIDATES_PER_NAMESPACE = 20;
/** Deletes started per round; the next round follows at once while the budget is exceeded. */
const ROUND = 500;
/** An eviction whose watch DELETED event never came (a watch gap) stops counting after this. */
const PENDING_TTL_MS = 60_000;
/** Sweeps asked for by the budget (candidates used up) are at least this far apart. */
const MIN_SWEEP_GAP_MS = 2_000;

/**
 * What the sweep lists and counts, in eviction order: Succeeded (a plain delivery), Discarded,
 * Replayed (Succeeded, and was a dead letter: its record says why and what was replayed).
 */
type Listed = "Succeeded" | "Discarded" | "Replayed";
const LISTED: readonly Listed[] = ["Succeeded", "Discarded", "Replayed"];
/** The class a finished delivery other than a dead letter is counted and evicted in. */
export function listedClass(rec: TerminalRecord): Listed {
  return rec.phase === "Succeeded" && rec.wasDeadLetter ? "Replayed" : (rec.phase as Exclude<TerminalPhase, "DeadLettered">);
}
type ListedCounts = Record<Listed, number>;
export type FinishedCounts = Record<TerminalPhase, number>;

export interface StorageBudgetDeps {
  max: number;
  caches: Caches;
  events: EventSink;
  metrics: Metrics;
  log: Logger;
  isLeader: () => boolean;
  /** Dead letters indexed now, by namespace. */
  deadLettersByNamespace: () => ReadonlyMap<string, number>;
  /** The `n` oldest dead letters of a namespace, `skip` left out. */
  oldestDeadLetters: (namespace: string, n: number, skip: ReadonlySet<string>) => TerminalRecord[];
  /** Deletes one finished delivery (only the version seen); true when this call deleted it. */
  deleteDelivery: (rec: TerminalRecord) => Promise<boolean>;
  /** Asks the terminal index for a sweep as soon as possible. */
  requestSweep: () => void;
  now?: () => number;
}

/** How many of the oldest of each phase a sweep keeps per namespace, with `namespaces` seen. */
export function candidatesPerNamespace(namespaces: number): number {
  return Math.max(MIN_CANDIDATES_PER_NAMESPACE, Math.floor(EVICTION_CANDIDATES / Math.max(1, namespaces)));
}

const zero = (): ListedCounts => ({ Succeeded: 0, Discarded: 0, Replayed: 0 });
const emptyLists = (): Record<Listed, TerminalRecord[]> => ({ Succeeded: [], Discarded: [], Replayed: [] });
const isZero = (c: ListedCounts) => LISTED.every((l) => c[l] === 0);

/** What one sweep saw: exact counts per namespace as of its snapshot, and the oldest of each phase there. */
export class SweepTally {
  readonly counts = new Map<string, ListedCounts>();
  readonly oldest = new Map<string, Record<Listed, TerminalRecord[]>>();
  /** Candidates kept per namespace and phase; halved (and every list trimmed) as namespaces appear. */
  private cap = EVICTION_CANDIDATES;
  constructor(readonly countsAtStart: ReadonlyMap<string, Readonly<ListedCounts>>) {}

  see(rec: TerminalRecord): void {
    if (rec.phase === "DeadLettered") return;
    const ns = rec.metadata.namespace ?? "";
    let c = this.counts.get(ns);
    if (!c) {
      this.counts.set(ns, (c = zero()));
      this.oldest.set(ns, emptyLists());
      this.namespaceAdded();
    }
    const cls = listedClass(rec);
    c[cls]++;
    keepOldest(this.oldest.get(ns)![cls], rec, this.cap);
  }

  /** The candidates stay within about twice EVICTION_CANDIDATES whatever the number of namespaces. */
  private namespaceAdded(): void {
    const want = candidatesPerNamespace(this.counts.size);
    if (want * 2 > this.cap) return;
    this.cap = want;
    for (const lists of this.oldest.values()) for (const l of Object.values(lists)) if (l.length > want) l.length = want;
  }
}

/** Inserts `rec` into `list` (sorted oldest first) if it is among the `n` oldest. */
export function keepOldest(list: TerminalRecord[], rec: TerminalRecord, n: number): void {
  keepFirst(list, rec, n, byAge);
}

export class StorageBudget {
  /** Succeeded and Discarded stored, by namespace: the last sweep's snapshot plus the watch since. */
  private readonly counts = new Map<string, ListedCounts>();
  /** The oldest known of each phase, by namespace, oldest first (Map order), from the last sweep. */
  private candidates = new Map<string, Record<Listed, Map<string, TerminalRecord>>>();
  /** Evictions started whose watch DELETED event has not arrived: still counted as stored. */
  private readonly pending = new Map<string, { phase: TerminalPhase; cls: Listed | undefined; namespace: string; at: number }>();
  private running = false;
  private again = false;
  private lastSweepRequest = 0;
  private readonly now: () => number;

  constructor(private readonly d: StorageBudgetDeps) {
    this.now = d.now ?? Date.now;
    d.metrics.storage.budget.set(d.max);
    d.metrics.storage.setStoredSource(() => this.stored());
    d.metrics.storage.setNamespaceSource(() => this.byNamespace());
  }

  /** Deliveries stored by phase, as far as this process knows. */
  stored(): Record<StoredPhase, number> {
    let pendingCount = 0;
    let retrying = 0;
    for (const d of this.d.caches.deliveries.values()) {
      if (d.status?.phase === "Retrying") retrying++;
      else pendingCount++;
    }
    const listed = this.listedTotal();
    return { Pending: pendingCount, Retrying: retrying, Succeeded: listed.Succeeded + listed.Replayed, Discarded: listed.Discarded, DeadLettered: sum(this.d.deadLettersByNamespace().values()) };
  }

  /** Finished deliveries stored by namespace and phase (estimated for Succeeded and Discarded between sweeps). */
  byNamespace(): Map<string, FinishedCounts> {
    const out = new Map<string, FinishedCounts>();
    for (const [ns, c] of this.counts) out.set(ns, { Succeeded: c.Succeeded + c.Replayed, Discarded: c.Discarded, DeadLettered: 0 });
    for (const [ns, n] of this.d.deadLettersByNamespace()) {
      if (n <= 0) continue;
      const c = out.get(ns) ?? { Succeeded: 0, Discarded: 0, DeadLettered: 0 };
      c.DeadLettered = n;
      out.set(ns, c);
    }
    return out;
  }

  /** Finished deliveries stored (estimated for Succeeded and Discarded between sweeps). */
  finished(): number {
    const listed = this.listedTotal();
    return listed.Succeeded + listed.Discarded + listed.Replayed + sum(this.d.deadLettersByNamespace().values());
  }

  private listedTotal(): ListedCounts {
    const t = zero();
    for (const c of this.counts.values()) {
      for (const l of LISTED) t[l] += c[l];
    }
    return t;
  }

  /** A Succeeded or Discarded delivery appeared (watch ADDED). */
  added(rec: TerminalRecord): void {
    if (rec.phase === "DeadLettered") return;
    const ns = rec.metadata.namespace ?? "";
    const c = this.counts.get(ns) ?? zero();
    c[listedClass(rec)]++;
    this.counts.set(ns, c);
    this.changed();
  }

  /** A finished delivery is gone (watch DELETED), whatever its phase. */
  removed(rec: TerminalRecord): void {
    const key = objectKey(rec.metadata);
    this.pending.delete(key);
    if (rec.phase === "DeadLettered") return;
    const ns = rec.metadata.namespace ?? "";
    const cls = listedClass(rec);
    this.candidates.get(ns)?.[cls].delete(key);
    const c = this.counts.get(ns);
    if (!c) return;
    c[cls] = Math.max(0, c[cls] - 1);
    if (isZero(c)) this.counts.delete(ns);
  }

  sweepStarted(): SweepTally {
    return new SweepTally(new Map([...this.counts].map(([ns, c]) => [ns, { ...c }])));
  }

  /** A complete sweep: its snapshot plus what the watch reported since it began. */
  sweepFinished(t: SweepTally): void {
    const namespaces = new Set([...this.counts.keys(), ...t.counts.keys(), ...t.countsAtStart.keys()]);
    for (const ns of namespaces) {
      const seen = t.counts.get(ns) ?? zero();
      const now = this.counts.get(ns) ?? zero();
      const atStart = t.countsAtStart.get(ns) ?? zero();
      const c = zero();
      for (const l of LISTED) c[l] = Math.max(0, seen[l] + now[l] - atStart[l]);
      if (isZero(c)) this.counts.delete(ns);
      else this.counts.set(ns, c);
    }
    const keep = candidatesPerNamespace(t.oldest.size);
    this.candidates = new Map(
      [...t.oldest].map(([ns, lists]) => [ns, { Succeeded: toMap(lists.Succeeded.slice(0, keep)), Discarded: toMap(lists.Discarded.slice(0, keep)), Replayed: toMap(lists.Replayed.slice(0, keep)) }]),
    );
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

  private expirePending(): void {
    const now = this.now();
    for (const [key, p] of this.pending) if (now - p.at > PENDING_TTL_MS) this.pending.delete(key);
  }

  private excess(): number {
    this.expirePending();
    return this.finished() - this.pending.size - this.d.max;
  }

  /** Finished deliveries by namespace, less those being deleted. */
  private held(): Map<string, number> {
    this.expirePending();
    const held = new Map<string, number>();
    for (const [ns, c] of this.byNamespace()) held.set(ns, c.Succeeded + c.Discarded + c.DeadLettered);
    for (const p of this.pending.values()) held.set(p.namespace, (held.get(p.namespace) ?? 0) - 1);
    return held;
  }

  private async evictWhileOver(): Promise<void> {
    do {
      this.again = false;
      const progressed = await this.round();
      if (progressed && this.excess() > 0) this.again = true;
      // Between rounds, let I/O in: a round whose deletes all answer at once (no request made)
      // must not become a loop of microtasks that starves the process (the deletes it waits for
      // included).
      if (this.again) await new Promise((r) => setImmediate(r));
    } while (this.again && this.d.isLeader());
  }

  /**
   * Picks and deletes up to ROUND, from the namespaces over their fair share (the furthest over
   * first), each only down to its share; false when nothing could be picked.
   */
  private async round(): Promise<boolean> {
    const excess = Math.min(ROUND, this.excess());
    if (excess <= 0) return false;
    const held = this.held();
    const shares = fairShares(held, this.d.max);
    const picks: TerminalRecord[] = [];
    for (const [ns, over] of evictionPlan(held, this.d.max)) {
      if (picks.length >= excess) break;
      picks.push(...this.pick(ns, Math.min(over, excess - picks.length)));
    }
    if (picks.length === 0) return false;
    for (const rec of picks) this.pending.set(objectKey(rec.metadata), { phase: rec.phase, cls: rec.phase === "DeadLettered" ? undefined : listedClass(rec), namespace: rec.metadata.namespace ?? "", at: this.now() });
    const done = await Promise.all(picks.map(async (rec) => ({ rec, ok: await this.d.deleteDelivery(rec).catch(() => false) })));
    const bySub = new Map<string, Record<TerminalPhase, number>>();
    for (const { rec, ok } of done) {
      const key = objectKey(rec.metadata);
      const ns = rec.metadata.namespace ?? "";
      if (rec.phase !== "DeadLettered") this.candidates.get(ns)?.[listedClass(rec)].delete(key);
      if (!ok) {
        this.pending.delete(key);
        continue;
      }
      this.d.metrics.storage.evicted.inc({ phase: rec.phase });
      this.d.metrics.storage.namespaceEvictions.inc({ namespace: ns, phase: rec.phase, limit: "max_finished_deliveries" });
      if (rec.phase === "DeadLettered") this.d.metrics.dlqOperations.inc({ operation: "drop_overflow" });
      const subKey = `${ns}/${rec.subscription}`;
      const tally = bySub.get(subKey) ?? { Succeeded: 0, Discarded: 0, DeadLettered: 0 };
      tally[rec.phase]++;
      bySub.set(subKey, tally);
    }
    for (const [subKey, tally] of bySub) {
      const ns = subKey.slice(0, subKey.indexOf("/"));
      this.report(subKey, tally, { held: held.get(ns) ?? 0, share: shares.get(ns) ?? 0, namespaces: shares.size });
    }
    // Progress is a delete made. One that answered false (gone, changed, failed, or being deleted
    // by another path: the dead-letter cap, retention) made none, and eviction goes on at the next
    // call of changed(): a delivery finishing (added), a new dead letter (the index's upsert) or a
    // sweep's end. A watch DELETED (removed) does not call it. (Answering true here once made the
    // operator spin on a dead letter the cap was deleting: the same pick, refused at once, round
    // after round.)
    return done.some(({ ok }) => ok);
  }

  /**
   * The oldest of a namespace: Succeeded first, then Discarded, then former dead letters a
   * replay delivered, then its dead letters; each class only once the namespace has none of the
   * one before stored (when the remembered candidates of a class run out while some of it still
   * are, a sweep finds the next oldest and calls back).
   */
  private pick(ns: string, n: number): TerminalRecord[] {
    const picks: TerminalRecord[] = [];
    const c = this.counts.get(ns) ?? zero();
    const left = { ...c };
    for (const p of this.pending.values()) if (p.namespace === ns && p.cls) left[p.cls]--;
    const candidates = this.candidates.get(ns);
    for (const cls of LISTED) {
      for (const [key, rec] of candidates?.[cls] ?? []) {
        if (picks.length >= n) return picks;
        if (this.pending.has(key)) continue;
        picks.push(rec);
        left[cls]--;
      }
      // Some of this class are stored but not remembered: find them before the next class.
      if (left[cls] > 0) {
        this.sweepSoon();
        return picks;
      }
    }
    if (picks.length >= n) return picks;
    return picks.concat(this.d.oldestDeadLetters(ns, n - picks.length, new Set(this.pending.keys())));
  }

  private sweepSoon(): void {
    const now = this.now();
    if (now - this.lastSweepRequest < MIN_SWEEP_GAP_MS) return;
    this.lastSweepRequest = now;
    this.d.requestSweep();
  }

  private report(subKey: string, t: Record<TerminalPhase, number>, fair: { held: number; share: number; namespaces: number }): void {
    const sub = this.d.caches.subscription(subKey);
    const total = t.Succeeded + t.Discarded + t.DeadLettered;
    const parts = (["Succeeded", "Discarded", "DeadLettered"] as const).filter((p) => t[p] > 0).map((p) => `${p} ${t[p]}`);
    this.d.log.info({ subscription: subKey, ...t, budget: this.d.max, namespaceHeld: fair.held, fairShare: fair.share, namespaces: fair.namespaces }, "finished deliveries deleted for the storage budget");
    if (!sub) return;
    this.d.events.record(
      { apiVersion: API_VERSION, kind: SUBSCRIPTION.kind, namespace: sub.metadata.namespace!, name: sub.metadata.name, uid: sub.metadata.uid },
      "Warning",
      "FinishedDeliveriesEvicted",
      `${total} finished deliveries of this subscription deleted (${parts.join(", ")}): the namespace held ${fair.held} finished deliveries, over its fair share of ${fair.share} of WEBHOOK_MAX_FINISHED_DELIVERIES=${this.d.max} (shared by ${fair.namespaces} namespaces); the namespace's oldest go first, Succeeded before Discarded before former dead letters delivered by a replay before DeadLettered`,
    );
  }
}

function sum(xs: Iterable<number>): number {
  let n = 0;
  for (const x of xs) n += x;
  return n;
}

function toMap(recs: TerminalRecord[]): Map<string, TerminalRecord> {
  return new Map(recs.map((r) => [objectKey(r.metadata), r]));
}
