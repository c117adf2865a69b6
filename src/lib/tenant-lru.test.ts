// TenantLru: its two bounds always hold, the entry just set is always kept, eviction is least
// recently used within a namespace, and the total bound only ever takes from a namespace holding
// at least as many entries as any other (so a namespace below the others is never evicted for a
// flooder's sake).
import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { TenantLru, type EvictionReason } from "./tenant-lru.js";

describe("TenantLru", () => {
  it("evicts the least recently used entry of the namespace above its cap", () => {
    const lru = new TenantLru<number>({ max: 100, maxPerNamespace: 2 });
    lru.set("a", "1", 1);
    lru.set("a", "2", 2);
    expect(lru.get("a", "1")).toBe(1); // "2" is now the oldest
    lru.set("a", "3", 3);
    expect([lru.get("a", "1"), lru.get("a", "2"), lru.get("a", "3")]).toEqual([1, undefined, 3]);
    expect(lru.size).toBe(2);
  });

  it("setting a key again replaces it without counting twice; delete and prune forget", () => {
    const lru = new TenantLru<number>({ max: 10, maxPerNamespace: 10 });
    lru.set("a", "k", 1);
    lru.set("a", "k", 2);
    expect([lru.size, lru.get("a", "k")]).toEqual([1, 2]);
    lru.set("b", "k", 3);
    lru.delete("a", "k");
    expect([lru.size, lru.namespaces, lru.get("b", "k")]).toEqual([1, 1, 3]);
    lru.prune((v) => v === 3);
    expect([lru.size, lru.namespaces]).toEqual([0, 0]);
  });

  it("refuses bounds below 1", () => {
    expect(() => new TenantLru({ max: 0, maxPerNamespace: 1 })).toThrow(RangeError);
  });

  it("properties: bounds hold, the entry set is kept, and the total bound takes only from a fullest namespace", () => {
    const op = fc.record({ ns: fc.constantFrom("a", "b", "c", "d", "e"), key: fc.integer({ min: 0, max: 30 }).map(String), get: fc.boolean() });
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 6 }), fc.array(op, { maxLength: 200 }), (max, perNs, ops) => {
        // A model: per namespace, keys in order of last use.
        const model = new Map<string, string[]>();
        const evictions: Array<{ reason: EvictionReason; ns: string }> = [];
        const lru = new TenantLru<string>({ max, maxPerNamespace: perNs, onEvict: (reason, ns) => evictions.push({ reason, ns }) });
        for (const o of ops) {
          const ks = model.get(o.ns) ?? [];
          if (o.get) {
            const got = lru.get(o.ns, o.key);
            expect(got !== undefined).toBe(ks.includes(o.key));
            if (got !== undefined) model.set(o.ns, [...ks.filter((k) => k !== o.key), o.key]);
            continue;
          }
          model.set(o.ns, [...ks.filter((k) => k !== o.key), o.key]);
          evictions.length = 0;
          lru.set(o.ns, o.key, `${o.ns}/${o.key}`);
          for (const e of evictions) {
            const list = model.get(e.ns)!;
            if (e.reason === "total") {
              // Taken from a namespace as full as any, counted with the entry just set.
              const fullestNow = Math.max(...[...model.values()].map((l) => l.length));
              expect(list.length).toBe(fullestNow);
            }
            list.shift();
            if (list.length === 0) model.delete(e.ns);
          }
          expect(lru.get(o.ns, o.key)).toBe(`${o.ns}/${o.key}`);
          const total = [...model.values()].reduce((s, l) => s + l.length, 0);
          expect(lru.size).toBe(total);
          expect(total).toBeLessThanOrEqual(max);
          for (const l of model.values()) expect(l.length).toBeLessThanOrEqual(perNs);
        }
      }),
      { numRuns: 300 },
    );
  });
  it("weighted: an entry heavier than a bound is refused, and one that would take from a lighter namespace is not kept", () => {
    const lru = new TenantLru<number>({ max: 10, maxPerNamespace: 8, weigh: (v) => v });
    expect(lru.set("a", "huge", 9)).toBe(false);
    expect(lru.get("a", "huge")).toBeUndefined();
    expect(lru.set("a", "1", 4)).toBe(true);
    // b's 7 would need a's 4: a holds less than b would, so b's entry is the one that goes.
    expect(lru.set("b", "1", 7)).toBe(false);
    expect([lru.get("a", "1"), lru.weight, lru.size]).toEqual([4, 4, 1]);
    // b's 6 fits beside a's 4.
    expect(lru.set("b", "2", 6)).toBe(true);
    expect(Object.fromEntries(lru.weights())).toEqual({ a: 4, b: 6 });
    // a sets 3 more: it would hold 7 against b's 6, so it is the fullest and its own oldest goes.
    expect(lru.set("a", "2", 3)).toBe(true);
    expect([lru.get("a", "1"), lru.get("a", "2"), lru.get("b", "2")]).toEqual([undefined, 3, 6]);
    expect(lru.take("b", "2")).toBe(6);
    expect([lru.weight, lru.size, lru.take("b", "2")]).toEqual([3, 1, undefined]);
  });

  it("weighted properties: both bounds hold, weights add up, and the total bound takes only from a namespace holding the most", () => {
    const op = fc.record({ ns: fc.constantFrom("a", "b", "c"), key: fc.integer({ min: 0, max: 20 }).map(String), w: fc.integer({ min: 0, max: 12 }), take: fc.boolean() });
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 30 }), fc.integer({ min: 1, max: 20 }), fc.array(op, { maxLength: 150 }), (max, perNs, ops) => {
        const model = new Map<string, Array<[string, number]>>();
        const weightOf = (ns: string) => (model.get(ns) ?? []).reduce((s, [, w]) => s + w, 0);
        const evictions: Array<{ reason: EvictionReason; ns: string }> = [];
        const lru = new TenantLru<number>({ max, maxPerNamespace: perNs, weigh: (v) => v, onEvict: (reason, ns) => evictions.push({ reason, ns }) });
        for (const o of ops) {
          const list = (model.get(o.ns) ?? []).filter(([k]) => k !== o.key);
          const had = model.get(o.ns)?.find(([k]) => k === o.key);
          if (o.take) {
            expect(lru.take(o.ns, o.key)).toBe(had?.[1]);
            if (list.length) model.set(o.ns, list);
            else model.delete(o.ns);
            continue;
          }
          model.set(o.ns, [...list, [o.key, o.w]]);
          evictions.length = 0;
          const kept = lru.set(o.ns, o.key, o.w);
          if (o.w > perNs || o.w > max) {
            expect(kept).toBe(false);
            expect(evictions).toEqual([]);
            if (list.length) model.set(o.ns, list);
            else model.delete(o.ns);
          }
          for (const e of evictions) {
            const l = model.get(e.ns)!;
            if (e.reason === "total") expect(weightOf(e.ns)).toBe(Math.max(...[...model.keys()].map(weightOf)));
            l.shift();
            if (l.length === 0) model.delete(e.ns);
          }
          expect(lru.get(o.ns, o.key)).toBe(kept ? o.w : undefined);
          if (kept) {
            // get made it the most recent: so in the model.
            const l = model.get(o.ns)!;
            model.set(o.ns, [...l.filter(([k]) => k !== o.key), [o.key, o.w]]);
          }
          let total = 0;
          for (const ns of model.keys()) {
            const w = weightOf(ns);
            expect(w).toBeLessThanOrEqual(perNs);
            expect(lru.weights().get(ns)).toBe(w);
            total += w;
          }
          expect(lru.weight).toBe(total);
          expect(total).toBeLessThanOrEqual(max);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("at the total bound with thousands of namespaces, a set finds the fullest without scanning them all", () => {
    const lru = new TenantLru<number>({ max: 10_000, maxPerNamespace: 10 });
    for (let i = 0; i < 10_000; i++) lru.set(`ns-${i}`, "k", i);
    const iterations = vi.spyOn(Map.prototype, Symbol.iterator);
    try {
      // Each set evicts one entry from a fullest namespace (here any: all hold one).
      for (let i = 10_000; i < 20_000; i++) expect(lru.set(`ns-${i}`, "k", i)).toBe(true);
      expect(iterations.mock.calls.length, "Map scans while setting 10,000 entries at the bound").toBeLessThan(100);
    } finally {
      iterations.mockRestore();
    }
    expect(lru.size).toBe(10_000);
    expect(lru.namespaces).toBe(10_000);
  });
});
