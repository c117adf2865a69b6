// A map shared by tenants (namespaces) with two bounds: at most `maxPerNamespace` entries per
// namespace, where the namespace's least recently used entry goes first, and at most `max` in
// all, where the least recently used entry of the namespace holding the most goes first. So a
// namespace that floods the map only ever evicts its own entries while any other namespace holds
// fewer than it: one tenant cannot push out everyone else's. Used by the OAuth2 token cache
// (oauth2.ts). Pure; no timers.

export type EvictionReason = "namespace" | "total";

export interface TenantLruOptions {
  max: number;
  maxPerNamespace: number;
  onEvict?: (reason: EvictionReason, namespace: string) => void;
}

export class TenantLru<V> {
  /** Per namespace, its entries in the order of last use (a Map iterates in insertion order). */
  private readonly byNamespace = new Map<string, Map<string, V>>();
  private count = 0;

  constructor(private readonly o: TenantLruOptions) {
    if (!(o.max >= 1 && o.maxPerNamespace >= 1)) throw new RangeError("TenantLru: max and maxPerNamespace must be at least 1");
  }

  get size(): number {
    return this.count;
  }

  get namespaces(): number {
    return this.byNamespace.size;
  }

  /** The entry, now the most recently used of its namespace. */
  get(namespace: string, key: string): V | undefined {
    const m = this.byNamespace.get(namespace);
    if (!m?.has(key)) return undefined;
    const v = m.get(key)!;
    m.delete(key);
    m.set(key, v);
    return v;
  }

  set(namespace: string, key: string, value: V): void {
    let m = this.byNamespace.get(namespace);
    if (!m) this.byNamespace.set(namespace, (m = new Map<string, V>()));
    if (m.delete(key)) this.count--;
    m.set(key, value);
    this.count++;
    if (m.size > this.o.maxPerNamespace) this.evictOldest(namespace, m, "namespace");
    while (this.count > this.o.max) {
      const [fullest, entries] = this.fullest();
      this.evictOldest(fullest, entries, "total");
    }
  }

  delete(namespace: string, key: string): void {
    const m = this.byNamespace.get(namespace);
    if (!m?.delete(key)) return;
    this.count--;
    if (m.size === 0) this.byNamespace.delete(namespace);
  }

  /** Removes every entry `drop` says so of. */
  prune(drop: (value: V) => boolean): void {
    for (const [namespace, m] of this.byNamespace) {
      for (const [key, v] of m) if (drop(v)) this.delete(namespace, key);
    }
  }

  private fullest(): [string, Map<string, V>] {
    let best: [string, Map<string, V>] | undefined;
    for (const e of this.byNamespace) if (!best || e[1].size > best[1].size) best = e;
    return best!;
  }

  private evictOldest(namespace: string, m: Map<string, V>, reason: EvictionReason): void {
    const oldest = m.keys().next().value as string;
    this.delete(namespace, oldest);
    this.o.onEvict?.(reason, namespace);
  }
}
