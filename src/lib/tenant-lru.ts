// A map shared by tenants (namespaces) with two bounds on the weight it holds: at most
// `maxPerNamespace` per namespace, where the namespace's least recently used entry goes first, and
// at most `max` in all, where the least recently used entry of the namespace holding the most
// goes first. So a namespace that floods the map only ever evicts its own entries while any other
// namespace holds less than it: one tenant cannot push out everyone else's. An entry weighs 1
// unless `weigh` says otherwise (bytes, for the kept payloads). Used by the OAuth2 token cache
// (delivery/engine/oauth2.ts), the kept payloads (delivery/kept-payloads.ts) and the Event
// recorder's dedupe (kube/events.ts). Pure; no timers; imports nothing.

export type EvictionReason = "namespace" | "total";

export interface TenantLruOptions<V> {
  max: number;
  maxPerNamespace: number;
  /** An entry's weight (at least 0); 1 when absent. */
  weigh?: (value: V) => number;
  onEvict?: (reason: EvictionReason, namespace: string) => void;
}

interface Tenant<V> {
  /** Its entries in the order of last use (a Map iterates in insertion order). */
  entries: Map<string, V>;
  weight: number;
  /** The sequence number of its weight's latest change (WeightHeap). */
  seq: number;
}

/** A namespace's weight at one change of it; `seq` tells it from the namespace's earlier changes. */
interface Weighed {
  weight: number;
  seq: number;
  namespace: string;
}

/** Heavier first; between equal weights, the one that reached its weight first. */
const above = (a: Weighed, b: Weighed): boolean => a.weight > b.weight || (a.weight === b.weight && a.seq < b.seq);

/**
 * The namespaces by weight, heaviest on top, for finding the fullest without a scan of them all
 * (which, with thousands of namespaces at the total bound, was one scan per entry set). An entry
 * is pushed at every change of a namespace's weight and is stale once it changes again: the top
 * is taken only when it is its namespace's latest, and the heap is rebuilt from the namespaces
 * when stale entries outnumber them. A tie goes to the namespace that reached the weight first,
 * so never to the one an entry was just set in while another weighs as much.
 */
class WeightHeap {
  private h: Weighed[] = [];

  get length(): number {
    return this.h.length;
  }

  push(e: Weighed): void {
    const h = this.h;
    h.push(e);
    for (let i = h.length - 1; i > 0; ) {
      const p = (i - 1) >> 1;
      if (!above(h[i]!, h[p]!)) break;
      [h[p], h[i]] = [h[i]!, h[p]!];
      i = p;
    }
  }

  /** The heaviest entry that `latest` confirms (it is its namespace's latest); stale ones above it are dropped. */
  top(latest: (e: Weighed) => boolean): Weighed | undefined {
    while (this.h.length > 0) {
      const e = this.h[0]!;
      if (latest(e)) return e;
      this.pop();
    }
    return undefined;
  }

  clear(): void {
    this.h = [];
  }

  private pop(): void {
    const h = this.h;
    const last = h.pop()!;
    if (h.length === 0) return;
    h[0] = last;
    for (let i = 0; ; ) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && above(h[l]!, h[m]!)) m = l;
      if (r < h.length && above(h[r]!, h[m]!)) m = r;
      if (m === i) return;
      [h[m], h[i]] = [h[i]!, h[m]!];
      i = m;
    }
  }
}

export class TenantLru<V> {
  private readonly byNamespace = new Map<string, Tenant<V>>();
  private readonly heaviest = new WeightHeap();
  private seq = 0;
  private count = 0;
  private total = 0;
  private readonly weigh: (value: V) => number;

  constructor(private readonly o: TenantLruOptions<V>) {
    if (!(o.max >= 1 && o.maxPerNamespace >= 1)) throw new RangeError("TenantLru: max and maxPerNamespace must be at least 1");
    this.weigh = o.weigh ?? (() => 1);
  }

  /** Entries held. */
  get size(): number {
    return this.count;
  }

  /** Their weight. */
  get weight(): number {
    return this.total;
  }

  get namespaces(): number {
    return this.byNamespace.size;
  }

  /** Each namespace holding something, with its weight. */
  weights(): Map<string, number> {
    return new Map([...this.byNamespace].map(([ns, t]) => [ns, t.weight]));
  }

  /** The entry, now the most recently used of its namespace. */
  get(namespace: string, key: string): V | undefined {
    const m = this.byNamespace.get(namespace)?.entries;
    if (!m?.has(key)) return undefined;
    const v = m.get(key)!;
    m.delete(key);
    m.set(key, v);
    return v;
  }

  /** The entry, removed. */
  take(namespace: string, key: string): V | undefined {
    const v = this.byNamespace.get(namespace)?.entries.get(key);
    if (v !== undefined) this.delete(namespace, key);
    return v;
  }

  /**
   * Sets the entry (the most recently used of its namespace) and evicts to keep both bounds. False,
   * and nothing held under the key, when the entry alone weighs more than a bound, or when keeping
   * it would take from a namespace holding less than its own (it was the oldest entry left of the
   * fullest namespace: never with weight 1).
   */
  set(namespace: string, key: string, value: V): boolean {
    this.delete(namespace, key);
    const w = this.weigh(value);
    if (w > this.o.maxPerNamespace || w > this.o.max) return false;
    let t = this.byNamespace.get(namespace);
    if (!t) this.byNamespace.set(namespace, (t = { entries: new Map<string, V>(), weight: 0, seq: 0 }));
    t.entries.set(key, value);
    t.weight += w;
    this.count++;
    this.total += w;
    this.weighed(namespace, t);
    while (t.weight > this.o.maxPerNamespace) this.evictOldest(namespace, t, "namespace");
    while (this.total > this.o.max) {
      const [fullest, ft] = this.fullest();
      this.evictOldest(fullest, ft, "total");
    }
    return this.byNamespace.get(namespace)?.entries.has(key) ?? false;
  }

  delete(namespace: string, key: string): void {
    const t = this.byNamespace.get(namespace);
    if (!t?.entries.has(key)) return;
    const w = this.weigh(t.entries.get(key)!);
    t.entries.delete(key);
    t.weight -= w;
    this.count--;
    this.total -= w;
    if (t.entries.size === 0) this.byNamespace.delete(namespace);
    else this.weighed(namespace, t);
  }

  /** Removes every entry `drop` says so of. */
  prune(drop: (value: V) => boolean): void {
    for (const [namespace, t] of this.byNamespace) {
      for (const [key, v] of t.entries) if (drop(v)) this.delete(namespace, key);
    }
  }

  private fullest(): [string, Tenant<V>] {
    const e = this.heaviest.top((w) => this.byNamespace.get(w.namespace)?.seq === w.seq)!;
    return [e.namespace, this.byNamespace.get(e.namespace)!];
  }

  /** Records a namespace's changed weight for `fullest`. */
  private weighed(namespace: string, t: Tenant<V>): void {
    t.seq = ++this.seq;
    if (this.heaviest.length > 4 * this.byNamespace.size + 64) {
      this.heaviest.clear();
      for (const [n, o] of this.byNamespace) if (o !== t) this.heaviest.push({ weight: o.weight, seq: o.seq, namespace: n });
    }
    this.heaviest.push({ weight: t.weight, seq: t.seq, namespace });
  }

  private evictOldest(namespace: string, t: Tenant<V>, reason: EvictionReason): void {
    const oldest = t.entries.keys().next().value as string;
    this.delete(namespace, oldest);
    this.o.onEvict?.(reason, namespace);
  }
}
