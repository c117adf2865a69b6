import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { firstN, olderFirst } from "./oldest.js";

type Rec = { at: number; name: string };
const byAge = olderFirst<Rec>((r) => r.at, (r) => r.name);

/** Records with many equal times (dead letters of one burst finish in the same second), non-ASCII names included. */
const recs = fc.uniqueArray(fc.record({ at: fc.integer({ min: 0, max: 20 }), name: fc.string({ unit: "grapheme", minLength: 1, maxLength: 6 }) }), { selector: (r) => r.name, maxLength: 300 });

describe("firstN", () => {
  it("property: the n first of a full sort, in order, for any n", () => {
    fc.assert(
      fc.property(recs, fc.integer({ min: -1, max: 320 }), (items, n) => {
        expect(firstN(items, n, byAge)).toEqual([...items].sort(byAge).slice(0, Math.max(0, n)));
      }),
    );
  });

  it("orders equal times by name in code-point order, not by locale", () => {
    const items = [{ at: 1, name: "b" }, { at: 1, name: "B" }, { at: 0, name: "z" }, { at: 1, name: "é" }, { at: 1, name: "a" }];
    expect(firstN(items, 4, byAge).map((r) => r.name)).toEqual(["z", "B", "a", "b"]);
  });

  it("finds the oldest of 10,000 with a few comparisons per record, not a sort's", () => {
    // Counted, not timed: each comparison reads two times. A sort of 10,000 makes about
    // 10,000 x log2(10,000) = 130,000 comparisons; the selection about one per record.
    let reads = 0;
    const counted = olderFirst<Rec>((r) => (reads++, r.at), (r) => r.name);
    const items = Array.from({ length: 10_000 }, (_, i) => ({ at: (i * 7919) % 10_007, name: `dead-${i}` }));
    const [first] = firstN(items, 1, counted);
    expect(first).toEqual(items.reduce((a, b) => (byAge(a, b) <= 0 ? a : b)));
    expect(reads).toBeLessThan(3 * 2 * items.length);
    reads = 0;
    firstN(items, 9, counted);
    expect(reads).toBeLessThan(3 * 2 * items.length);
  });
});
