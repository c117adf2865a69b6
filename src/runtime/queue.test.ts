import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { WorkQueue } from "./queue.js";

/** Lets pending promise callbacks run. */
const flush = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

/** A get() whose result can be inspected without awaiting it. */
function pendingGet<K>(q: WorkQueue<K>) {
  const state: { done: boolean; key: K | undefined } = { done: false, key: undefined };
  void q.get().then((k) => {
    state.done = true;
    state.key = k;
  });
  return state;
}

describe("WorkQueue", () => {
  let q: WorkQueue<string>;
  beforeEach(() => {
    vi.useFakeTimers({ now: Date.UTC(2025, 5, 15) });
    q = new WorkQueue<string>({ failureBackoff: { baseMs: 100, maxMs: 1_000 }, now: () => Date.now() });
  });
  afterEach(() => {
    q.shutdown();
    vi.useRealTimers();
  });

  it("hands keys out in FIFO order, each queued at most once", async () => {
    q.add("a");
    q.add("b");
    q.add("a");
    q.add("c");
    q.add("b");
    expect(q.length).toBe(3);
    expect([await q.get(), await q.get(), await q.get()]).toEqual(["a", "b", "c"]);
    expect(q.length).toBe(0);
    expect(q.inProgress).toBe(3);
  });

  it("never hands a key to two workers at once; an add while processing re-queues it after done()", async () => {
    q.add("a");
    expect(await q.get()).toBe("a");
    expect(q.isProcessing("a")).toBe(true);
    q.add("a");
    q.add("a");
    expect(q.length).toBe(0);
    const second = pendingGet(q);
    await flush();
    expect(second.done).toBe(false);
    q.done("a");
    await flush();
    expect(second).toEqual({ done: true, key: "a" });
    expect(q.isProcessing("a")).toBe(true);
    q.done("a");
    expect(q.length).toBe(0);
    expect(q.inProgress).toBe(0);
  });

  it("done() without an add meanwhile does not re-queue", async () => {
    q.add("a");
    await q.get();
    q.done("a");
    expect(q.length).toBe(0);
    expect(q.isProcessing("a")).toBe(false);
  });

  it("other keys flow while one is processing", async () => {
    q.add("a");
    await q.get();
    q.add("a");
    q.add("b");
    expect(await q.get()).toBe("b");
    q.done("b");
    q.done("a");
    expect(await q.get()).toBe("a");
  });

  it("a waiting get() receives an added key at once", async () => {
    const w1 = pendingGet(q);
    const w2 = pendingGet(q);
    q.add("x");
    await flush();
    expect(w1).toEqual({ done: true, key: "x" });
    expect(w2.done).toBe(false);
    expect(q.isProcessing("x")).toBe(true);
    q.add("x");
    await flush();
    expect(w2.done).toBe(false);
    q.done("x");
    await flush();
    expect(w2).toEqual({ done: true, key: "x" });
  });

  it("addAfter waits on the timer heap: one timer for many keys", () => {
    for (let i = 0; i < 100; i++) q.addAfter(`k${i}`, 1_000 + i);
    expect(q.length).toBe(0);
    expect(q.delayed).toBe(100);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(999);
    expect(q.length).toBe(0);
    vi.advanceTimersByTime(1);
    expect(q.length).toBe(1);
    vi.advanceTimersByTime(99);
    expect(q.length).toBe(100);
    expect(q.delayed).toBe(0);
  });

  it("addAfter: the earlier of two delays wins", async () => {
    q.addAfter("a", 5_000);
    q.addAfter("a", 100);
    vi.advanceTimersByTime(100);
    expect(q.length).toBe(1);
    await q.get();
    q.done("a");
    vi.advanceTimersByTime(10_000);
    expect(q.length).toBe(0);
  });

  it("a later add() cancels the delayed add", async () => {
    q.addAfter("a", 1_000);
    q.add("a");
    expect(q.length).toBe(1);
    expect(q.delayed).toBe(0);
    expect(await q.get()).toBe("a");
    q.done("a");
    vi.advanceTimersByTime(5_000);
    expect(q.length).toBe(0);
  });

  it("addAfter of a key already queued is a no-op", () => {
    q.add("a");
    q.addAfter("a", 1_000);
    expect(q.delayed).toBe(0);
    expect(q.length).toBe(1);
  });

  it("addAfter with a delay of 0 or less adds now", () => {
    q.addAfter("a", 0);
    q.addAfter("b", -5);
    expect(q.length).toBe(2);
    expect(q.delayed).toBe(0);
  });

  it("addAfter of a key being processed fires into the dirty set and re-queues on done()", async () => {
    q.add("a");
    await q.get();
    q.addAfter("a", 100);
    vi.advanceTimersByTime(100);
    expect(q.length).toBe(0);
    q.done("a");
    expect(q.length).toBe(1);
  });

  it("addRateLimited backs off per key, doubling up to the cap; forget() resets", () => {
    expect([1, 2, 3, 4, 5, 6].map(() => q.addRateLimited("a"))).toEqual([100, 200, 400, 800, 1_000, 1_000]);
    expect(q.failuresOf("a")).toBe(6);
    expect(q.addRateLimited("b")).toBe(100);
    expect(q.failuresOf("b")).toBe(1);
    q.forget("a");
    expect(q.failuresOf("a")).toBe(0);
    expect(q.addRateLimited("a")).toBe(100);
    expect(q.failuresOf("b")).toBe(1);
  });

  it("addRateLimited queues the key after its delay, which grows with each failure", async () => {
    q.addRateLimited("a");
    vi.advanceTimersByTime(99);
    expect(q.length).toBe(0);
    vi.advanceTimersByTime(1);
    expect(q.length).toBe(1);
    expect(await q.get()).toBe("a");
    q.done("a");
    // The reconcile failed again: 200 ms this time.
    q.addRateLimited("a");
    vi.advanceTimersByTime(199);
    expect(q.length).toBe(0);
    vi.advanceTimersByTime(1);
    expect(q.length).toBe(1);
  });

  it("addRateLimited uses 200 ms .. 60 s by default", () => {
    const d = new WorkQueue<string>({ now: () => Date.now() });
    const delays = Array.from({ length: 12 }, () => d.addRateLimited("k"));
    expect(delays.slice(0, 3)).toEqual([200, 400, 800]);
    expect(delays.at(-1)).toBe(60_000);
    d.shutdown();
  });

  it("shutdown() releases every waiting get() with undefined, and later gets too", async () => {
    const w1 = pendingGet(q);
    const w2 = pendingGet(q);
    q.shutdown();
    await flush();
    expect(w1).toEqual({ done: true, key: undefined });
    expect(w2).toEqual({ done: true, key: undefined });
    expect(await q.get()).toBeUndefined();
    expect(q.isShuttingDown).toBe(true);
  });

  it("shutdown() drops queued and delayed keys and refuses new ones", async () => {
    q.add("a");
    q.addAfter("b", 100);
    q.shutdown();
    expect(vi.getTimerCount()).toBe(0);
    q.add("c");
    q.addAfter("d", 10);
    q.addRateLimited("e");
    vi.advanceTimersByTime(10_000);
    expect(q.length).toBe(0);
    expect(await q.get()).toBeUndefined();
  });

  it("whenIdle() resolves at once when nothing is processing, else after the last done()", async () => {
    let idle = false;
    await q.whenIdle();
    q.add("a");
    q.add("b");
    await q.get();
    await q.get();
    void q.whenIdle().then(() => (idle = true));
    q.done("a");
    await flush();
    expect(idle).toBe(false);
    q.done("b");
    await flush();
    expect(idle).toBe(true);
  });

  it("whenIdle() waits for keys still processing after shutdown", async () => {
    let idle = false;
    q.add("a");
    await q.get();
    q.shutdown();
    void q.whenIdle().then(() => (idle = true));
    await flush();
    expect(idle).toBe(false);
    q.done("a");
    await flush();
    expect(idle).toBe(true);
  });

  it("keeps FIFO order across its internal compaction", async () => {
    for (let i = 0; i < 3_000; i++) q.add(`k${i}`);
    for (let i = 0; i < 2_000; i++) {
      const k = await q.get();
      expect(k).toBe(`k${i}`);
      q.done(k!);
    }
    for (let i = 3_000; i < 3_010; i++) q.add(`k${i}`);
    expect(q.length).toBe(1_010);
    for (let i = 2_000; i < 3_010; i++) expect(await q.get()).toBe(`k${i}`);
  });
});
