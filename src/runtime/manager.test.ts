import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { Manager, type Elector, type LeaderCallbacks } from "./manager.js";

const silent = pino({ level: "silent" });

function recorder() {
  const order: string[] = [];
  const runnable = (name: string) => ({ name, start: () => void order.push(`start ${name}`), stop: () => void order.push(`stop ${name}`) });
  const cache = (name: string) => ({ ...runnable(name), waitForSync: () => Promise.resolve(order.push(`synced ${name}`)) });
  const leader = (name: string) => ({
    name,
    start: () => void order.push(`lead ${name}`),
    stop: (graceMs: number) => Promise.resolve(void order.push(`unlead ${name} ${graceMs}`)),
  });
  return { order, runnable, cache, leader };
}

describe("Manager", () => {
  it("starts servers, then caches (until synced), then what runs after sync, then leads; stops in reverse, draining first", async () => {
    const { order, runnable, cache, leader } = recorder();
    const m = new Manager({ log: silent, drainMs: 1234, onSynced: () => order.push("onSynced"), onStopping: () => order.push("onStopping") });
    m.addServer(runnable("metrics"));
    m.addCache(cache("cache"));
    m.addAfterSync(runnable("door"));
    m.addLeaderRunnable(leader("controllers"));
    m.afterDrain(() => Promise.resolve(void order.push("after drain")));
    m.addCloser(() => Promise.resolve(void order.push("close client")));
    await m.start();
    expect(m.leading).toBe(true);
    expect(order).toEqual(["start metrics", "start cache", "synced cache", "onSynced", "start door", "lead controllers"]);
    order.length = 0;
    await m.stop();
    expect(order).toEqual(["onStopping", "unlead controllers 1234", "after drain", "stop cache", "close client", "stop metrics", "stop door"]);
    expect(m.stopping).toBe(true);
    expect(m.leading).toBe(false);
  });

  it("with an elector: leads only while elected, drains nothing when the Lease is lost, releases the Lease after the drain", async () => {
    const { order, leader } = recorder();
    let callbacks: LeaderCallbacks | undefined;
    const elector: Elector = { start: () => void order.push("campaign"), stop: (release) => Promise.resolve(void order.push(`elector stop release=${release}`)) };
    const m = new Manager({
      log: silent,
      drainMs: 500,
      elector: (cb) => {
        callbacks = cb;
        return elector;
      },
    });
    m.addLeaderRunnable(leader("controllers"));
    m.afterDrain(() => Promise.resolve(void order.push("after drain")));
    await m.start();
    expect(m.leading).toBe(false);
    callbacks!.onStartedLeading();
    callbacks!.onStartedLeading(); // twice: started once
    expect(m.leading).toBe(true);
    callbacks!.onStoppedLeading(); // lost: no grace, the new leader takes over
    await Promise.resolve();
    expect(m.leading).toBe(false);
    callbacks!.onStartedLeading();
    await m.stop();
    expect(order).toEqual(["campaign", "lead controllers", "unlead controllers 0", "lead controllers", "unlead controllers 500", "after drain", "elector stop release=true"]);
  });

  it("runs workers on every replica: started after sync, before leading, whether it leads or not; drained beside the leader's runnables", async () => {
    const { order, runnable, cache, leader } = recorder();
    let callbacks: LeaderCallbacks | undefined;
    const elector: Elector = { start: () => void order.push("campaign"), stop: () => Promise.resolve(void order.push("release")) };
    const m = new Manager({ log: silent, drainMs: 700, elector: (cb) => ((callbacks = cb), elector) });
    m.addCache(cache("cache"));
    m.addAfterSync(runnable("door"));
    m.addWorker(leader("consumers"));
    m.addLeaderRunnable(leader("controllers"));
    m.afterDrain(() => Promise.resolve(void order.push("after drain")));
    await m.start();
    expect(m.leading).toBe(false);
    expect(order).toEqual(["start cache", "synced cache", "start door", "lead consumers", "campaign"]);
    callbacks!.onStartedLeading();
    order.length = 0;
    await m.stop();
    expect(order.slice(0, 2).sort()).toEqual(["unlead consumers 700", "unlead controllers 700"]);
    expect(order.slice(2, 4)).toEqual(["after drain", "release"]);
  });

  it("does not start workers when stopped before the caches synced", async () => {
    const { order, leader } = recorder();
    let synced!: () => void;
    const m = new Manager({ log: silent, drainMs: 0 });
    m.addCache({ name: "slow", start: () => undefined, stop: () => undefined, waitForSync: () => new Promise<void>((r) => (synced = r)) });
    m.addWorker(leader("consumers"));
    const started = m.start();
    await Promise.resolve();
    const stopped = m.stop();
    synced();
    await Promise.all([started, stopped]);
    expect(order).toEqual([]);
  });

  it("does not lead when stopped before the caches synced", async () => {
    const { order, leader } = recorder();
    let synced!: () => void;
    const m = new Manager({ log: silent, drainMs: 0 });
    m.addCache({ name: "slow", start: () => undefined, stop: () => undefined, waitForSync: () => new Promise<void>((r) => (synced = r)) });
    m.addLeaderRunnable(leader("controllers"));
    const started = m.start();
    await Promise.resolve();
    const stopped = m.stop();
    synced();
    await Promise.all([started, stopped]);
    expect(order).toEqual([]);
  });

  it("bounds each shutdown step: a hung step is logged and the rest still run", async () => {
    const { order, runnable } = recorder();
    const warnings: string[] = [];
    const log = pino({ level: "warn" }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });
    const m = new Manager({ log, drainMs: 0, stepTimeoutMs: 50 });
    m.addServer(runnable("metrics"));
    m.afterDrain(() => new Promise<void>(() => undefined));
    m.addCloser(() => Promise.reject(new Error("boom")));
    await m.start();
    await m.stop();
    expect(order).toEqual(["start metrics", "stop metrics"]);
    expect(warnings).toEqual(["shutdown step did not finish in time; going on", "shutdown step failed; going on"]);
  });

  it("stop is idempotent", async () => {
    const { order, runnable } = recorder();
    const m = new Manager({ log: silent, drainMs: 0 });
    m.addServer(runnable("metrics"));
    await m.start();
    await Promise.all([m.stop(), m.stop()]);
    expect(order.filter((o) => o === "stop metrics")).toHaveLength(1);
  });
});
