import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { reserve } from "./report-budget.js";

const cfg = { perSecond: 5, burst: 3 };

describe("reserve (a budget that delays instead of refusing)", () => {
  it("lets a burst go at once, then gives each next request a slot 1/perSecond apart", () => {
    let tat: number | undefined;
    const delays: number[] = [];
    for (let i = 0; i < 6; i++) {
      const r = reserve(tat, 1_000, cfg);
      tat = r.tat;
      delays.push(r.delayMs);
    }
    expect(delays).toEqual([0, 0, 0, 200, 400, 600]);
  });

  it("refills while quiet: after a pause the burst is available again", () => {
    let r = reserve(undefined, 0, cfg);
    for (let i = 0; i < 5; i++) r = reserve(r.tat, 0, cfg);
    expect(reserve(r.tat, 10_000, cfg).delayMs).toBe(0);
  });

  it("property: in any window the requests that go (at their slot) never exceed burst + rate x window", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 5_000 }), { minLength: 1, maxLength: 60 }), fc.integer({ min: 100, max: 3_000 }), (arrivals, window) => {
        const sorted = [...arrivals].sort((a, b) => a - b);
        let tat: number | undefined;
        const goes: number[] = [];
        for (const t of sorted) {
          const r = reserve(tat, t, cfg);
          tat = r.tat;
          goes.push(t + r.delayMs);
        }
        goes.sort((a, b) => a - b);
        for (let i = 0; i < goes.length; i++) {
          const inWindow = goes.filter((g) => g >= goes[i]! && g < goes[i]! + window).length;
          if (inWindow > cfg.burst + Math.ceil((window / 1000) * cfg.perSecond)) return false;
        }
        return true;
      }),
    );
  });
});
