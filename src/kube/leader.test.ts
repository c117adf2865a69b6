import pino from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ApiError, type KubeClient } from "./client.js";
import { LeaderElector } from "./leader.js";

/**
 * A Lease store answering the elector's GET, POST and PUT at once, with what happened in order.
 * `pauseBeforeAnswer` may move the clock between a request's write and its answer being read,
 * as a process stopped (SIGSTOP, a long pause) while the request was on its way would see.
 */
function fakeClient(happened: string[], pauseBeforeAnswer: (method: string) => number = () => 0) {
  let lease: { metadata: Record<string, unknown>; spec?: Record<string, unknown> } | undefined;
  let version = 0;
  const answer = (r: { method: string; body?: unknown }) => {
    happened.push(r.method);
    if (r.method === "GET") {
      if (!lease) throw new ApiError(404, "NotFound", "not found");
      return structuredClone(lease);
    }
    const body = r.body as NonNullable<typeof lease>;
    lease = { ...body, metadata: { ...body.metadata, resourceVersion: String(++version) } };
    return structuredClone(lease);
  };
  const request = (r: { method: string; body?: unknown }) =>
    new Promise((resolve) => {
      const a = answer(r);
      const pause = pauseBeforeAnswer(r.method);
      if (pause > 0) vi.setSystemTime(Date.now() + pause);
      resolve(a);
    });
  return { request } as unknown as KubeClient;
}

describe("LeaderElector", () => {
  beforeEach(() => void vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] }));
  afterEach(() => void vi.useRealTimers());

  function elector(happened: string[], pauseBeforeAnswer?: (method: string) => number) {
    return new LeaderElector({
      client: fakeClient(happened, pauseBeforeAnswer),
      namespace: "hookline",
      name: "hookline-leader",
      identity: "replica-a",
      leaseDurationMs: 4_000,
      renewDeadlineMs: 3_000,
      retryPeriodMs: 500,
      log: pino({ level: "silent" }),
      onStartedLeading: () => happened.push("started"),
      onStoppedLeading: () => happened.push("stopped"),
      onLateAnswer: (write) => happened.push(`late ${write}`),
      random: () => 0,
    });
  }

  it("renews every retry period and stays fresh", async () => {
    const happened: string[] = [];
    const e = elector(happened);
    e.start();
    await vi.advanceTimersByTimeAsync(0);
    expect([e.isLeader, e.leaseFresh]).toEqual([true, true]);
    await vi.advanceTimersByTimeAsync(2_600);
    expect(e.leaseFresh).toBe(true);
    expect(happened.filter((h) => h === "PUT").length).toBe(5);
    expect(happened).not.toContain("stopped");
    await e.stop(false);
  });

  it("paused past the renew deadline: not fresh the moment it runs again, and it steps down before it renews (then campaigns again)", async () => {
    const happened: string[] = [];
    const e = elector(happened);
    e.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(e.leaseFresh).toBe(true);
    // The process was stopped for 5 s: the clock moved, no timer ran.
    vi.setSystemTime(Date.now() + 5_000);
    expect([e.isLeader, e.leaseFresh]).toEqual([true, false]);
    const before = happened.length;
    // Its renew timer fires (the sleep it was in when it stopped).
    await vi.advanceTimersByTimeAsync(500);
    expect(happened.slice(before)).toEqual(["stopped", "GET", "PUT", "started"]);
    expect([e.isLeader, e.leaseFresh]).toEqual([true, true]);
    await e.stop(false);
  });

  it("an acquire whose answer is read past the renew deadline does not make it leader (another replica may lead by then); it campaigns again", async () => {
    const happened: string[] = [];
    let pauses = 1;
    // The acquire (a POST: no Lease yet) is written, then the process stops for 7 s before it reads the answer.
    const e = elector(happened, (m) => (m !== "GET" && pauses-- > 0 ? 7_000 : 0));
    e.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(happened).toEqual(["GET", "POST", "late acquire"]);
    expect([e.isLeader, e.leaseFresh]).toEqual([false, false]);
    // The next campaign finds the Lease still its own and takes it in time.
    await vi.advanceTimersByTimeAsync(500);
    expect(happened).toEqual(["GET", "POST", "late acquire", "GET", "PUT", "started"]);
    expect([e.isLeader, e.leaseFresh]).toEqual([true, true]);
    await e.stop(false);
  });

  it("a renew whose answer is read past the renew deadline steps down", async () => {
    const happened: string[] = [];
    let puts = 0;
    // The third PUT (the second renew) is answered after a 4 s stop.
    const e = elector(happened, (m) => (m === "PUT" && ++puts === 2 ? 4_000 : 0));
    e.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(happened).toEqual(["GET", "POST", "started"]);
    await vi.advanceTimersByTimeAsync(500); // first renew, in time
    expect([e.isLeader, e.leaseFresh]).toEqual([true, true]);
    await vi.advanceTimersByTimeAsync(500); // second renew, read 4 s late
    // Stepped down on reading it, then campaigned at once: the Lease was still its own.
    expect(happened.slice(3)).toEqual(["GET", "PUT", "GET", "PUT", "late renew", "stopped", "GET", "PUT", "started"]);
    await e.stop(false);
  });
});
