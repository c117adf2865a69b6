// A map shared by tenants (namespaces) with two bounds on the weight it holds: at most
// `maxPerNamespace` per namespace, where the namespace's least recently used entry goes first, and
// at most `max` in all, where the least recently used entry of the namespace holding the most
// goes first. So a namespace that floods the map only ever evicts its own entries while any other
// namespace holds less than it: one tenant cannot push out everyone else's. An entry weighs 1
// unless `weigh` says otherwise (bytes, for the kept payloads). Used by the OAuth2 token cache
// (oauth2.ts) and the kept payloads (kept-payloads.ts). Pure; no timers.

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
}

export class TenantLru<V> {
  private readonly byNamespace = new Map<string, Tenant<V>>();
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
    if (!t) this.byNamespace.set(namespace, (t = { entries: new Map<string, V>(), weight: 0 }));
    t.entries.set(key, value);
    t.weight += w;
    this.count++;
    this.total += w;
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
  }

  /** Removes every entry `drop` says so of. */
  prune(drop: (value: V) => boolean): void {
    for (const [namespace, t] of this.byNamespace) {
      for (const [key, v] of t.entries) if (drop(v)) this.delete(namespace, key);
    }
  }

  private fullest(): [string, Tenant<V>] {
    let best: [string, Tenant<V>] | undefined;
    for (const e of this.byNamespace) if (!best || e[1].weight > best[1].weight) best = e;
    return best!;
  }

  private evictOldest(namespace: string, t: Tenant<V>, reason: EvictionReason): void {
    const oldest = t.entries.keys().next().value as string;
    this.delete(namespace, oldest);
    this.o.onEvict?.(reason, namespace);
  }
}
