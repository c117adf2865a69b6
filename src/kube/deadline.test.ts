import { afterEach, describe, expect, it, vi } from "vitest";
import { deadline } from "./deadline.js";

describe("deadline", () => {
  afterEach(() => vi.useRealTimers());

  it("aborts when the time is up, and says so", () => {
    vi.useFakeTimers();
    const d = deadline(100);
    vi.advanceTimersByTime(99);
    expect(d.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(d.signal.aborted).toBe(true);
    expect(d.expired).toBe(true);
    expect((d.signal.reason as Error).name).toBe("TimeoutError");
  });

  it("follows its parent, without calling that a timeout", () => {
    const parent = new AbortController();
    const d = deadline(10_000, parent.signal);
    parent.abort(new Error("drain"));
    expect(d.signal.aborted).toBe(true);
    expect(d.expired).toBe(false);
    d.clear();
  });

  it("leaves no timer behind once cleared", () => {
    vi.useFakeTimers();
    const parent = new AbortController();
    const d = deadline(100, parent.signal);
    expect(vi.getTimerCount()).toBe(1);
    d.clear();
    expect(vi.getTimerCount()).toBe(0);
    parent.abort();
    expect(d.signal.aborted).toBe(false);
  });

  it("starts aborted under an aborted parent; 0 means no timer", () => {
    const parent = new AbortController();
    parent.abort();
    expect(deadline(0, parent.signal).signal.aborted).toBe(true);
    vi.useFakeTimers();
    deadline(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});
