import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { evictionPlan, fairShares } from "./fair-share.js";

const m = (o: Record<string, number>) => new Map(Object.entries(o));
const sum = (xs: Iterable<number>) => [...xs].reduce((a, b) => a + b, 0);

/** Up to 8 namespaces holding 0..200 each, and a cap of 0..400. */
const holdings = fc.dictionary(fc.constantFrom("a", "b", "c", "d", "e", "f", "g", "h"), fc.integer({ min: 0, max: 200 }), { maxKeys: 8 }).map((o) => m(o));
const caps = fc.integer({ min: 0, max: 400 });

describe("fairShares", () => {
  it("gives what is held when it all fits", () => {
    expect(fairShares(m({ a: 3, b: 5 }), 10)).toEqual(m({ a: 3, b: 5 }));
  });

  it("redistributes what a small holder leaves unused (max-min)", () => {
    expect(fairShares(m({ a: 2, b: 30, c: 100 }), 60)).toEqual(m({ a: 2, b: 29, c: 29 }));
  });

  it("gives the remainder of the division to the smallest holders first, ties by name", () => {
    expect(fairShares(m({ c: 50, a: 50, b: 40 }), 20)).toEqual(m({ b: 7, a: 7, c: 6 }));
  });

  it("leaves out namespaces holding nothing, and gives nothing of a cap of 0", () => {
    expect(fairShares(m({ a: 0, b: 4 }), 2)).toEqual(m({ b: 2 }));
    expect(fairShares(m({ a: 5 }), 0)).toEqual(m({ a: 0 }));
  });

  it("property: shares are whole, never above what is held, and add up to min(total, cap)", () => {
    fc.assert(
      fc.property(holdings, caps, (held, cap) => {
        const shares = fairShares(held, cap);
        for (const [ns, s] of shares) {
          expect(Number.isInteger(s)).toBe(true);
          expect(s).toBeGreaterThanOrEqual(0);
          expect(s).toBeLessThanOrEqual(held.get(ns)!);
        }
        expect(sum(shares.values())).toBe(Math.min(sum(held.values()), cap));
      }),
    );
  });
});

describe("evictionPlan", () => {
  it("takes only from the namespace over its share: a flood never costs a small tenant", () => {
    // 20 dead letters of "quiet", a flood of 500 in "noisy", a cap of 100.
    expect(evictionPlan(m({ quiet: 20, noisy: 500 }), 100)).toEqual(m({ noisy: 420 }));
  });

  it("orders the namespaces furthest over first", () => {
    expect([...evictionPlan(m({ a: 10, b: 90, c: 50 }), 60)]).toEqual([
      ["b", 65],
      ["c", 25],
    ]);
  });

  it("is empty when everything fits", () => {
    expect(evictionPlan(m({ a: 10, b: 20 }), 30).size).toBe(0);
  });

  it("property: evicts exactly the total over the cap, only from namespaces over their share, and leaves each at its share", () => {
    fc.assert(
      fc.property(holdings, caps, (held, cap) => {
        const shares = fairShares(held, cap);
        const plan = evictionPlan(held, cap);
        expect(sum(plan.values())).toBe(Math.max(0, sum(held.values()) - cap));
        for (const [ns, n] of held) {
          const lose = plan.get(ns) ?? 0;
          // No namespace at or under its share loses an object while another is over.
          if (n <= (shares.get(ns) ?? 0)) expect(lose).toBe(0);
          else expect(n - lose).toBe(shares.get(ns));
        }
      }),
    );
  });

  it("property (max-min): a namespace that loses keeps at least as many as any other keeps, less one", () => {
    fc.assert(
      fc.property(holdings, caps, (held, cap) => {
        const plan = evictionPlan(held, cap);
        const kept = [...held].map(([ns, n]) => n - (plan.get(ns) ?? 0));
        const most = Math.max(0, ...kept);
        for (const [ns, n] of held) if (plan.has(ns)) expect(n - plan.get(ns)!).toBeGreaterThanOrEqual(most - 1);
      }),
    );
  });

  it("property: through any sequence of floods, a namespace holding no more than cap / N never loses one", () => {
    const op = fc.tuple(fc.constantFrom("a", "b", "c", "d", "quiet"), fc.integer({ min: 1, max: 300 }));
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 500 }), fc.array(op, { maxLength: 40 }), (cap, ops) => {
        const held = new Map<string, number>();
        for (const [ns, add] of ops) {
          held.set(ns, (held.get(ns) ?? 0) + add);
          const holders = [...held.values()].filter((n) => n > 0).length;
          const floor = Math.floor(cap / holders);
          const before = new Map(held);
          for (const [victim, n] of evictionPlan(held, cap)) {
            expect(before.get(victim)!, `${victim} holding ${before.get(victim)} of a fair floor ${floor} lost ${n}`).toBeGreaterThan(floor);
            held.set(victim, held.get(victim)! - n);
          }
          expect(sum(held.values())).toBeLessThanOrEqual(cap);
        }
      }),
    );
  });
});
