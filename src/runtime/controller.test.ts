import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Logger } from "pino";
import { Controller, TerminalError, type ControllerMetrics, type Reconciler, type Result } from "./controller.js";
import { WorkQueue } from "./queue.js";

const T0 = Date.UTC(2025, 5, 15, 12, 0, 0);

type Step = (signal: AbortSignal) => Promise<Result | void> | Result | void;

/** A reconciler that plays a script per call and records when each call started. */
class FakeReconciler implements Reconciler<string> {
  calls: Array<{ key: string; at: number }> = [];
  running = 0;
  maxRunningPerKey = new Map<string, number>();
  private readonly runningPerKey = new Map<string, number>();
  constructor(private readonly steps: Step[], private readonly fallback: Step = () => ({})) {}

  async reconcile(key: string, signal: AbortSignal): Promise<Result | void> {
    const step = this.steps[this.calls.length] ?? this.fallback;
    this.calls.push({ key, at: Date.now() - T0 });
    this.running++;
    const n = (this.runningPerKey.get(key) ?? 0) + 1;
    this.runningPerKey.set(key, n);
    this.maxRunningPerKey.set(key, Math.max(n, this.maxRunningPerKey.get(key) ?? 0));
    try {
      return await step(signal);
    } finally {
      this.running--;
      this.runningPerKey.set(key, (this.runningPerKey.get(key) ?? 1) - 1);
    }
  }

  get times(): number[] {
    return this.calls.map((c) => c.at);
  }
}

const fail = (): Step => () => {
  throw new Error("boom");
};
const sleep = (ms: number): Step => () => new Promise((r) => setTimeout(() => r({}), ms));
/** Runs until its signal is aborted, then finishes (as an interrupted attempt would). */
const untilAborted = (seen: { abortedAtStart?: boolean }): Step => (signal) =>
  new Promise((resolve) => {
    seen.abortedAtStart = signal.aborted;
    signal.addEventListener("abort", () => resolve({}), { once: true });
  });

/** A logger whose children write through the parent's spies with their bindings merged in (as pino does). */
function fakeLog() {
  const spies = { warn: vi.fn(), error: vi.fn(), info: vi.fn(), debug: vi.fn() };
  const make = (bindings: Record<string, unknown>): Record<string, unknown> => ({
    ...Object.fromEntries(Object.entries(spies).map(([level, spy]) => [level, (o: Record<string, unknown>, msg?: string) => spy({ ...bindings, ...o }, msg)])),
    child: (more: Record<string, unknown>) => make({ ...bindings, ...more }),
  });
  return Object.assign(make({}), spies);
}

describe("Controller", () => {
  let queue: WorkQueue<string>;
  let log: ReturnType<typeof fakeLog>;
  let metrics: { reconciled: ReturnType<typeof vi.fn<ControllerMetrics["reconciled"]>> };
  let controller: Controller<string> | undefined;

  beforeEach(() => {
    vi.useFakeTimers({ now: T0 });
    queue = new WorkQueue<string>({ failureBackoff: { baseMs: 100, maxMs: 10_000 }, now: () => Date.now() });
    log = fakeLog();
    metrics = { reconciled: vi.fn<ControllerMetrics["reconciled"]>() };
    controller = undefined;
  });
  afterEach(async () => {
    if (controller) {
      const stopping = controller.stop(0);
      await vi.advanceTimersByTimeAsync(0);
      await stopping;
    }
    queue.shutdown();
    vi.useRealTimers();
  });

  function start(reconciler: Reconciler<string>, workers = 1): Controller<string> {
    controller = new Controller<string>({ name: "test", queue, reconciler, workers, log: log as unknown as Logger, metrics });
    controller.start();
    return controller;
  }
  const outcomes = () => metrics.reconciled.mock.calls.map((c) => c[1]);

  it("result {} finishes the key: not re-queued, failures forgotten", async () => {
    const r = new FakeReconciler([fail(), fail(), () => ({})]);
    start(r);
    queue.add("a");
    await vi.advanceTimersByTimeAsync(0);
    expect(queue.failuresOf("a")).toBe(1);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(r.times).toEqual([0, 100, 300]);
    expect(queue.failuresOf("a")).toBe(0);
    expect(queue.length + queue.delayed).toBe(0);
    expect(outcomes()).toEqual(["error", "error", "success"]);
  });

  it("after a success, a new failure backs off from the base delay again", async () => {
    const r = new FakeReconciler([fail(), fail(), () => ({}), fail(), () => ({})]);
    start(r);
    queue.add("a");
    await vi.advanceTimersByTimeAsync(1_000);
    expect(r.times).toEqual([0, 100, 300]);
    queue.add("a");
    await vi.advanceTimersByTimeAsync(1_000);
    expect(r.times).toEqual([0, 100, 300, 1_000, 1_100]);
  });

  it("{requeueAfter} runs the key again after exactly that delay, without counting a failure", async () => {
    const r = new FakeReconciler([() => ({ requeueAfter: 500 }), () => ({ requeueAfter: 250 }), () => ({})]);
    start(r);
    queue.add("a");
    await vi.advanceTimersByTimeAsync(499);
    expect(r.times).toEqual([0]);
    await vi.advanceTimersByTimeAsync(1);
    expect(r.times).toEqual([0, 500]);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(r.times).toEqual([0, 500, 750]);
    expect(queue.failuresOf("a")).toBe(0);
    expect(outcomes()).toEqual(["requeue", "requeue", "success"]);
  });

  it("{requeueAfter: 0} (or negative) runs it again at once", async () => {
    const r = new FakeReconciler([() => ({ requeueAfter: 0 }), () => ({ requeueAfter: -10 }), () => ({})]);
    start(r);
    queue.add("a");
    await vi.advanceTimersByTimeAsync(0);
    expect(r.times).toEqual([0, 0, 0]);
  });

  it("a thrown error re-queues with per-key exponential backoff and logs a warning", async () => {
    const r = new FakeReconciler([], fail());
    start(r);
    queue.add("a");
    await vi.advanceTimersByTimeAsync(1_600);
    expect(r.times).toEqual([0, 100, 300, 700, 1_500]);
    expect(queue.failuresOf("a")).toBe(5);
    expect(log.warn).toHaveBeenCalledWith(expect.objectContaining({ controller: "test", key: "a", err: "boom", retryInMs: 100 }), expect.any(String));
    expect(outcomes().every((o) => o === "error")).toBe(true);
  });

  it("each reconcile has its own id and a logger bound to {controller, key, reconcileID}; the failure line carries the id", async () => {
    const seen: Array<{ id: string; lines: number }> = [];
    const r: Reconciler<string> = {
      reconcile: (_key, _signal, ctx) => {
        ctx.log.info({ step: "planned" }, "planned");
        seen.push({ id: ctx.id, lines: log.info.mock.calls.length });
        if (seen.length === 2) throw new Error("boom");
        return Promise.resolve({});
      },
    };
    start(r);
    queue.add("a");
    queue.add("b");
    await vi.advanceTimersByTimeAsync(0);
    expect(seen).toHaveLength(2);
    expect(new Set(seen.map((x) => x.id)).size).toBe(2);
    for (const x of seen) expect(x.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(log.info.mock.calls.map((c) => c[0])).toEqual([
      { controller: "test", key: "a", reconcileID: seen[0]!.id, step: "planned" },
      { controller: "test", key: "b", reconcileID: seen[1]!.id, step: "planned" },
    ]);
    expect(log.warn).toHaveBeenCalledWith(expect.objectContaining({ controller: "test", key: "b", reconcileID: seen[1]!.id, err: "boom" }), "reconcile failed, retrying");
  });

  it("reports each reconcile's duration with its result", async () => {
    start(new FakeReconciler([sleep(250)]));
    queue.add("a");
    await vi.advanceTimersByTimeAsync(300);
    expect(metrics.reconciled).toHaveBeenCalledWith("test", "success", expect.any(Number));
    expect(metrics.reconciled.mock.calls[0]![2]).toBeGreaterThanOrEqual(0.25);
  });

  it("backoff is per key: a failing key does not slow another", async () => {
    const r = new FakeReconciler([], () => undefined);
    const failing = new FakeReconciler([], fail());
    const both: Reconciler<string> = { reconcile: (key, signal) => (key === "bad" ? failing.reconcile(key, signal) : r.reconcile(key, signal)) };
    controller = new Controller<string>({ name: "test", queue, reconciler: both, workers: 1, log: log as unknown as Logger });
    controller.start();
    queue.add("bad");
    await vi.advanceTimersByTimeAsync(350);
    queue.add("good");
    await vi.advanceTimersByTimeAsync(0);
    expect(r.times).toEqual([350]);
    expect(queue.failuresOf("good")).toBe(0);
    expect(queue.failuresOf("bad")).toBe(3);
  });

  it("a TerminalError is not re-queued, and forgets earlier failures", async () => {
    const r = new FakeReconciler([
      fail(),
      () => {
        throw new TerminalError("cannot ever work");
      },
    ]);
    start(r);
    queue.add("a");
    await vi.advanceTimersByTimeAsync(60_000);
    expect(r.times).toEqual([0, 100]);
    expect(queue.failuresOf("a")).toBe(0);
    expect(queue.length + queue.delayed).toBe(0);
    expect(log.error).toHaveBeenCalledWith(expect.objectContaining({ key: "a", err: "cannot ever work" }), expect.any(String));
    expect(outcomes()).toEqual(["error", "terminal"]);
  });

  it("runs different keys in parallel but never one key twice at once", async () => {
    const r = new FakeReconciler([], sleep(100));
    start(r, 4);
    queue.add("a");
    queue.add("b");
    await vi.advanceTimersByTimeAsync(10);
    expect(r.running).toBe(2);
    expect(controller!.busy).toBe(2);
    queue.add("a");
    queue.add("a");
    await vi.advanceTimersByTimeAsync(10);
    expect(r.running).toBe(2);
    await vi.advanceTimersByTimeAsync(1_000);
    // a ran again once (the two adds collapsed), after its first run ended.
    expect(r.calls.filter((c) => c.key === "a").map((c) => c.at)).toEqual([0, 100]);
    expect(r.maxRunningPerKey.get("a")).toBe(1);
    expect(controller!.busy).toBe(0);
  });

  it("stop(graceMs): reconciles that finish in time are not aborted; beforeAbort is not called", async () => {
    const seen: { aborted?: boolean } = {};
    const r = new FakeReconciler([
      async (signal) => {
        await sleep(300)(signal);
        seen.aborted = signal.aborted;
        return {};
      },
    ]);
    const c = start(r);
    queue.add("a");
    await vi.advanceTimersByTimeAsync(0);
    const beforeAbort = vi.fn();
    let result: { finishedInGrace: boolean } | undefined;
    void c.stop(5_000, beforeAbort).then((x) => (result = x));
    await vi.advanceTimersByTimeAsync(299);
    expect(result).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(result).toEqual({ finishedInGrace: true });
    expect(seen.aborted).toBe(false);
    expect(beforeAbort).not.toHaveBeenCalled();
    controller = undefined;
  });

  it("stop(graceMs): waits the grace, then calls beforeAbort, then aborts the signal", async () => {
    const seen: { abortedAtStart?: boolean } = {};
    const r = new FakeReconciler([untilAborted(seen)]);
    const c = start(r);
    queue.add("a");
    await vi.advanceTimersByTimeAsync(0);
    expect(seen.abortedAtStart).toBe(false);
    const order: string[] = [];
    const beforeAbort = vi.fn(() => order.push("beforeAbort"));
    let result: { finishedInGrace: boolean } | undefined;
    void c.stop(1_000, beforeAbort).then((x) => {
      order.push("stopped");
      result = x;
    });
    await vi.advanceTimersByTimeAsync(999);
    expect(result).toBeUndefined();
    expect(beforeAbort).not.toHaveBeenCalled();
    expect(r.running).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(result).toEqual({ finishedInGrace: false });
    expect(order).toEqual(["beforeAbort", "stopped"]);
    expect(r.running).toBe(0);
    controller = undefined;
  });

  it("beforeAbort runs while the reconcile's signal is still live", async () => {
    let signal: AbortSignal | undefined;
    const r = new FakeReconciler([
      (s) => {
        signal = s;
        return untilAborted({})(s);
      },
    ]);
    const c = start(r);
    queue.add("a");
    await vi.advanceTimersByTimeAsync(0);
    let abortedInBeforeAbort: boolean | undefined;
    const stopping = c.stop(100, () => (abortedInBeforeAbort = signal!.aborted));
    await vi.advanceTimersByTimeAsync(100);
    await stopping;
    expect(abortedInBeforeAbort).toBe(false);
    expect(signal!.aborted).toBe(true);
    controller = undefined;
  });

  it("stop(0) with a reconcile running aborts at once and reports it", async () => {
    const r = new FakeReconciler([untilAborted({})]);
    const c = start(r);
    queue.add("a");
    await vi.advanceTimersByTimeAsync(0);
    const beforeAbort = vi.fn();
    const stopping = c.stop(0, beforeAbort);
    await vi.advanceTimersByTimeAsync(0);
    expect(await stopping).toEqual({ finishedInGrace: false });
    expect(beforeAbort).toHaveBeenCalledTimes(1);
    controller = undefined;
  });

  it("stop() when idle finishes in grace without beforeAbort, and takes no more keys", async () => {
    const r = new FakeReconciler([]);
    const c = start(r, 3);
    const beforeAbort = vi.fn();
    const stopping = c.stop(1_000, beforeAbort);
    await vi.advanceTimersByTimeAsync(0);
    expect(await stopping).toEqual({ finishedInGrace: true });
    expect(beforeAbort).not.toHaveBeenCalled();
    queue.add("a");
    await vi.advanceTimersByTimeAsync(1_000);
    expect(r.calls).toEqual([]);
    controller = undefined;
  });

  it("a reconcile aborted by stop is not re-queued, whatever it returns", async () => {
    const r = new FakeReconciler([(s) => new Promise((resolve) => s.addEventListener("abort", () => resolve({ requeueAfter: 10 })))]);
    const c = start(r);
    queue.add("a");
    await vi.advanceTimersByTimeAsync(0);
    const stopping = c.stop(50);
    await vi.advanceTimersByTimeAsync(50);
    await stopping;
    await vi.advanceTimersByTimeAsync(1_000);
    expect(r.calls).toHaveLength(1);
    expect(queue.delayed).toBe(0);
    controller = undefined;
  });
});
