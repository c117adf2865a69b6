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
  /** An after-drain part or a closer: its stop is what runs. */
  const hook = (name: string) => ({ name, stop: () => Promise.resolve(void order.push(name)) });
  return { order, runnable, cache, leader, hook };
}

describe("Manager", () => {
  it("starts servers, then caches (until synced), then what runs after sync, then leads; stops in reverse, draining first", async () => {
    const { order, runnable, cache, leader, hook } = recorder();
    const m = new Manager({ log: silent, drainMs: 1234, onSynced: () => order.push("onSynced"), onStopping: () => order.push("onStopping") });
    m.add(runnable("metrics"), { group: "server" });
    m.add(cache("cache"), { group: "cache" });
    m.add(runnable("door"), { group: "after-sync" });
    m.add(leader("controllers"), { group: "leader" });
    m.add(hook("after drain"), { group: "after-drain" });
    m.add(hook("close client"), { group: "closer" });
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
    const { order, leader, hook } = recorder();
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
    m.add(leader("controllers"), { group: "leader" });
    m.add(hook("after drain"), { group: "after-drain" });
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
    const { order, runnable, cache, leader, hook } = recorder();
    let callbacks: LeaderCallbacks | undefined;
    const elector: Elector = { start: () => void order.push("campaign"), stop: () => Promise.resolve(void order.push("release")) };
    const m = new Manager({ log: silent, drainMs: 700, elector: (cb) => ((callbacks = cb), elector) });
    m.add(cache("cache"), { group: "cache" });
    m.add(runnable("door"), { group: "after-sync" });
    m.add(leader("consumers"), { group: "worker" });
    m.add(leader("controllers"), { group: "leader" });
    m.add(hook("after drain"), { group: "after-drain" });
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
    m.add({ name: "slow", waitForSync: () => new Promise<void>((r) => (synced = r)) }, { group: "cache" });
    m.add(leader("consumers"), { group: "worker" });
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
    m.add({ name: "slow", waitForSync: () => new Promise<void>((r) => (synced = r)) }, { group: "cache" });
    m.add(leader("controllers"), { group: "leader" });
    const started = m.start();
    await Promise.resolve();
    const stopped = m.stop();
    synced();
    await Promise.all([started, stopped]);
    expect(order).toEqual([]);
  });

  it("everything after the drain shares one deadline: a hung step uses it up, the rest still run, stop() ends in time", async () => {
    const { order, runnable } = recorder();
    const warnings: string[] = [];
    const log = pino({ level: "warn" }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });
    const m = new Manager({ log, drainMs: 0, afterDrainMs: 200 });
    m.add(runnable("metrics"), { group: "server" });
    m.add({ name: "hangs", stop: () => new Promise<void>(() => undefined) }, { group: "after-drain" });
    m.add({ name: "hangs too", stop: () => new Promise<void>(() => undefined) }, { group: "closer" });
    m.add({ name: "fails", stop: () => Promise.reject(new Error("boom")) }, { group: "closer" });
    await m.start();
    const t0 = performance.now();
    await m.stop();
    // Two hung steps, each bounded by what is left of the one 200 ms budget: not 2 x 10 s.
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(order).toEqual(["start metrics", "stop metrics"]);
    expect(warnings).toEqual([
      "shutdown step did not finish before the shutdown deadline; going on",
      "shutdown step did not finish before the shutdown deadline; going on",
      "shutdown step failed; going on",
    ]);
  });

  it("is ready once the caches synced and no part says why not; not ready from the first moment of a shutdown", async () => {
    let synced: (() => void) | undefined;
    let nats: string | undefined = "NATS cannot be reached";
    const m = new Manager({ log: silent, drainMs: 0 });
    m.add({ name: "cache", waitForSync: () => new Promise<void>((r) => (synced = r)) }, { group: "cache" });
    m.add({ name: "nats", notReady: () => nats }, { group: "server" });
    expect(m.ready()).toEqual({ ready: false, reason: "caches not synced" });
    const started = m.start();
    while (!synced) await Promise.resolve();
    expect(m.ready()).toEqual({ ready: false, reason: "caches not synced" });
    synced();
    await started;
    expect(m.ready()).toEqual({ ready: false, reason: "NATS cannot be reached" });
    nats = undefined;
    expect(m.ready()).toEqual({ ready: true });
    const stopping = m.stop();
    expect(m.ready()).toEqual({ ready: false, reason: "shutting down" });
    await stopping;
  });

  it("stop is idempotent", async () => {
    const { order, runnable } = recorder();
    const m = new Manager({ log: silent, drainMs: 0 });
    m.add(runnable("metrics"), { group: "server" });
    await m.start();
    await Promise.all([m.stop(), m.stop()]);
    expect(order.filter((o) => o === "stop metrics")).toHaveLength(1);
  });
});
