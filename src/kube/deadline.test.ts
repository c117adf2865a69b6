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

  it("aborts every open deadline under one parent with one listener on it; a cleared one is left alone", () => {
    const parent = new AbortController();
    let listeners = 0;
    const add = parent.signal.addEventListener.bind(parent.signal);
    parent.signal.addEventListener = (...args: Parameters<typeof add>) => {
      listeners++;
      add(...args);
    };
    const open = Array.from({ length: 50 }, () => deadline(10_000, parent.signal));
    const cleared = deadline(10_000, parent.signal);
    cleared.clear();
    const heard: number[] = [];
    open.forEach((d, i) => d.signal.once("abort", () => heard.push(i)));
    parent.abort(new Error("drain"));
    expect(listeners).toBe(1);
    expect(heard).toHaveLength(50);
    expect(open.every((d) => d.signal.aborted && !d.expired && (d.signal.reason as Error).message === "drain")).toBe(true);
    expect(cleared.signal.aborted).toBe(false);
    for (const d of open) d.clear();
  });

  it("aborts once: a second abort keeps the first reason and emits nothing", () => {
    const d = deadline(0);
    let emitted = 0;
    d.signal.on("abort", () => emitted++);
    d.signal.abort("first");
    d.signal.abort("second");
    expect(emitted).toBe(1);
    expect(d.signal.reason).toBe("first");
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
