import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { TimerHeap } from "./timer-heap.js";

const MAX_TIMEOUT = 2_147_483_647;

describe("TimerHeap", () => {
  let fired: Array<[string, number]>;
  let heap: TimerHeap<string>;
  const T0 = Date.UTC(2025, 5, 15, 12, 0, 0);

  beforeEach(() => {
    vi.useFakeTimers({ now: T0 });
    fired = [];
    heap = new TimerHeap<string>((key) => fired.push([key, Date.now() - T0]), () => Date.now());
  });
  afterEach(() => {
    heap.stop();
    vi.useRealTimers();
  });

  it("fires in time order, each at its due time, with one armed timer", () => {
    const delays = [300, 100, 250, 50, 1_000, 100, 700, 20, 999, 400];
    delays.forEach((d, i) => heap.schedule(`k${i}`, T0 + d));
    expect(vi.getTimerCount()).toBe(1);
    expect(heap.size).toBe(10);
    vi.advanceTimersByTime(49);
    expect(fired).toEqual([["k7", 20]]);
    vi.advanceTimersByTime(2_000);
    expect(fired.map(([, at]) => at)).toEqual([...delays].sort((a, b) => a - b));
    // Same due time: both fire at it.
    expect(fired.filter(([, at]) => at === 100).map(([k]) => k).sort()).toEqual(["k1", "k5"]);
    expect(heap.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("keeps a single timer for many keys, re-armed for the next head", () => {
    for (let i = 0; i < 500; i++) heap.schedule(`k${i}`, T0 + 1_000 + ((i * 7919) % 5_000));
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(3_000);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(3_000);
    expect(fired).toHaveLength(500);
    const times = fired.map(([, at]) => at);
    expect(times).toEqual([...times].sort((a, b) => a - b));
  });

  it("an earlier schedule of the same key wins and it fires once", () => {
    heap.schedule("a", T0 + 500);
    heap.schedule("a", T0 + 100);
    expect(heap.dueAt("a")).toBe(T0 + 100);
    expect(heap.size).toBe(1);
    vi.advanceTimersByTime(10_000);
    expect(fired).toEqual([["a", 100]]);
  });

  it("a later schedule of a scheduled key is ignored", () => {
    heap.schedule("a", T0 + 100);
    heap.schedule("a", T0 + 500);
    expect(heap.dueAt("a")).toBe(T0 + 100);
    vi.advanceTimersByTime(10_000);
    expect(fired).toEqual([["a", 100]]);
  });

  it("a key can be scheduled again after it fired", () => {
    heap.schedule("a", T0 + 100);
    vi.advanceTimersByTime(100);
    heap.schedule("a", T0 + 300);
    vi.advanceTimersByTime(1_000);
    expect(fired).toEqual([
      ["a", 100],
      ["a", 300],
    ]);
  });

  it("cancel: the key never fires; the others still do, on time", () => {
    heap.schedule("a", T0 + 100);
    heap.schedule("b", T0 + 200);
    heap.cancel("a");
    expect(heap.has("a")).toBe(false);
    expect(heap.has("b")).toBe(true);
    expect(heap.size).toBe(1);
    vi.advanceTimersByTime(199);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual([["b", 200]]);
  });

  it("cancel then re-schedule later: fires at the new time only", () => {
    heap.schedule("a", T0 + 100);
    heap.cancel("a");
    heap.schedule("a", T0 + 400);
    vi.advanceTimersByTime(1_000);
    expect(fired).toEqual([["a", 400]]);
  });

  it("a due time in the past fires on the next tick", () => {
    heap.schedule("late", T0 - 5_000);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(0);
    expect(fired).toEqual([["late", 0]]);
  });

  it("far-future entries (beyond setTimeout's 2^31-1 ms) fire at their time, not early", () => {
    const far = MAX_TIMEOUT + 3_600_000;
    heap.schedule("far", T0 + far);
    heap.schedule("near", T0 + 10);
    vi.advanceTimersByTime(10);
    expect(fired).toEqual([["near", 10]]);
    vi.advanceTimersByTime(MAX_TIMEOUT);
    expect(fired).toHaveLength(1);
    expect(heap.has("far")).toBe(true);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(far - MAX_TIMEOUT - 10 - 1);
    expect(fired).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual([
      ["near", 10],
      ["far", far],
    ]);
  });

  it("an earlier entry scheduled after a far one re-arms the timer earlier", () => {
    heap.schedule("far", T0 + 86_400_000);
    heap.schedule("soon", T0 + 5);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(5);
    expect(fired).toEqual([["soon", 5]]);
  });

  it("stop clears everything and ignores later schedules", () => {
    heap.schedule("a", T0 + 100);
    heap.stop();
    expect(vi.getTimerCount()).toBe(0);
    expect(heap.size).toBe(0);
    heap.schedule("b", T0 + 100);
    expect(heap.has("b")).toBe(false);
    vi.advanceTimersByTime(1_000);
    expect(fired).toEqual([]);
  });

  it("a key scheduled from inside the callback fires at its own time", () => {
    const h = new TimerHeap<string>(
      (key) => {
        fired.push([key, Date.now() - T0]);
        if (key === "a") h.schedule("b", Date.now() + 50);
      },
      () => Date.now(),
    );
    h.schedule("a", T0 + 100);
    vi.advanceTimersByTime(149);
    expect(fired).toEqual([["a", 100]]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual([
      ["a", 100],
      ["b", 150],
    ]);
    h.stop();
  });
});
