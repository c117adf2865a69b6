import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Backlog } from "./backlog.js";

function setup() {
  const woken: string[] = [];
  return { backlog: new Backlog((k) => woken.push(k)), woken };
}

describe("Backlog (spec.maxPending for deliveries created directly)", () => {
  it("admits the first maxPending, the rest wait in line; each delivery that leaves lets the next in", () => {
    const { backlog, woken } = setup();
    const keys = ["a", "b", "c", "d", "e"].map((k) => `shop/${k}`);
    expect(keys.map((k) => backlog.admit("shop/acme", k, 2))).toEqual([true, true, false, false, false]);
    expect(backlog.waitingOf("shop/acme")).toBe(3);
    // Already admitted stays admitted; a waiting one asking again still waits (no place).
    expect(backlog.admit("shop/acme", "shop/a", 2)).toBe(true);
    expect(backlog.admit("shop/acme", "shop/e", 2)).toBe(false);
    backlog.left("shop/acme", "shop/a", 2);
    expect(woken).toEqual(["shop/c"]);
    // Only the first in line takes the place, not one that asks before it.
    expect(backlog.admit("shop/acme", "shop/e", 2)).toBe(false);
    expect(backlog.admit("shop/acme", "shop/c", 2)).toBe(true);
  });

  it("no cap admits everything and lets whoever waited go on", () => {
    const { backlog, woken } = setup();
    backlog.admit("shop/acme", "shop/a", 1);
    expect(backlog.admit("shop/acme", "shop/b", 1)).toBe(false);
    expect(backlog.admit("shop/acme", "shop/c", undefined)).toBe(true);
    expect(woken).toEqual(["shop/b"]);
    expect(backlog.admit("shop/acme", "shop/b", undefined)).toBe(true);
  });

  it("a raised cap lets the first waiting ones in as they ask again", () => {
    const { backlog } = setup();
    for (const k of ["a", "b", "c", "d"]) backlog.admit("shop/acme", `shop/${k}`, 1);
    expect(backlog.admit("shop/acme", "shop/c", 3)).toBe(true);
    expect(backlog.admit("shop/acme", "shop/b", 3)).toBe(true);
    expect(backlog.admit("shop/acme", "shop/d", 3)).toBe(false);
  });

  it("a waiting delivery that is deleted gives up its place in line", () => {
    const { backlog, woken } = setup();
    for (const k of ["a", "b", "c"]) backlog.admit("shop/acme", `shop/${k}`, 1);
    backlog.left("shop/acme", "shop/b", 1);
    backlog.left("shop/acme", "shop/a", 1);
    expect(woken).toEqual(["shop/c"]);
  });

  it("keeps subscriptions apart", () => {
    const { backlog } = setup();
    expect(backlog.admit("shop/acme", "shop/a", 1)).toBe(true);
    expect(backlog.admit("shop/globex", "shop/b", 1)).toBe(true);
  });

  it("property: never more than cap admitted; a free place never sits beside a woken-and-retried line", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.array(fc.tuple(fc.constantFrom("admit", "leave"), fc.integer({ min: 0, max: 9 })), { maxLength: 80 }), (cap, ops) => {
        const woken = new Set<string>();
        const backlog = new Backlog((k) => woken.add(k));
        const admitted = new Set<string>();
        for (const [op, i] of ops) {
          const key = `ns/d${i}`;
          if (op === "admit") {
            if (backlog.admit("ns/s", key, cap)) admitted.add(key);
          } else {
            backlog.left("ns/s", key, cap);
            admitted.delete(key);
          }
          if (admitted.size > cap) return false;
          // Every woken delivery asking again: as many get in as there are places.
          for (const k of [...woken]) {
            woken.delete(k);
            if (backlog.admit("ns/s", k, cap)) admitted.add(k);
          }
          if (admitted.size > cap) return false;
          if (admitted.size < cap && backlog.waitingOf("ns/s") > 0) return false;
        }
        return true;
      }),
    );
  });
});
