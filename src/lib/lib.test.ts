import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { doubling } from "./backoff.js";
import { sleep } from "./sleep.js";

describe("sleep", () => {
  it("resolves at once when the signal has already aborted (the copies it replaced waited the whole time)", async () => {
    const ac = new AbortController();
    ac.abort();
    const started = performance.now();
    await sleep(60_000, ac.signal);
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it("resolves when the signal aborts mid-sleep, and after ms without one", async () => {
    const ac = new AbortController();
    const p = sleep(60_000, ac.signal);
    ac.abort();
    await p;
    await sleep(1);
  });
});

describe("doubling", () => {
  it("doubles from initial and stops at max", () => {
    expect([0, 1, 2, 4, 5, 10_000].map((n) => doubling(n, 250, 5_000))).toEqual([250, 500, 1_000, 4_000, 5_000, 5_000]);
    expect(doubling(-1, 250, 5_000)).toBe(250);
  });

  it("is initial x 2^attempt up to max, for any attempt, never NaN or Infinity", () => {
    fc.assert(
      fc.property(fc.integer({ min: -5, max: 5_000 }), fc.integer({ min: 1, max: 10_000 }), fc.integer({ min: 1, max: 3_600_000 }), (attempt, initial, max) => {
        const d = doubling(attempt, initial, max);
        expect(Number.isFinite(d)).toBe(true);
        expect(d).toBeLessThanOrEqual(max);
        expect(d).toBeGreaterThanOrEqual(Math.min(initial, max));
        if (attempt > 0) expect(d).toBeGreaterThanOrEqual(Math.min(max, doubling(attempt - 1, initial, max)));
      }),
    );
  });
});
