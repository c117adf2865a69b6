import { describe, expect, it } from "vitest";
import pino from "pino";
import type { Caches } from "../delivery/caches.js";
import { Metrics } from "../observability/metrics.js";
import { candidatesPerNamespace, keepOldest, StorageBudget, SweepTally, EVICTION_CANDIDATES, MIN_CANDIDATES_PER_NAMESPACE } from "./storage-budget.js";
import type { TerminalRecord } from "./records.js";

const rec = (name: string, finishedAt: number, phase: TerminalRecord["phase"] = "Succeeded", namespace = "ns"): TerminalRecord => ({ metadata: { name, namespace }, subscription: "s", phase, finishedAt });

describe("keepOldest", () => {
  it("keeps the n oldest, oldest first, whatever the order they come in", () => {
    const list: TerminalRecord[] = [];
    const times = [50, 10, 90, 30, 70, 20, 80, 40, 60, 0];
    for (const t of times) keepOldest(list, rec(`d-${t}`, t), 4);
    expect(list.map((r) => r.finishedAt)).toEqual([0, 10, 20, 30]);
  });

  it("orders equal finish times by name", () => {
    const list: TerminalRecord[] = [];
    for (const n of ["c", "a", "b"]) keepOldest(list, rec(n, 5), 2);
    expect(list.map((r) => r.metadata.name)).toEqual(["a", "b"]);
  });
});

describe("SweepTally", () => {
  it("counts Succeeded and Discarded per namespace, ignores dead letters, and bounds the candidates", () => {
    const t = new SweepTally(new Map());
    for (let i = 0; i < EVICTION_CANDIDATES + 5; i++) t.see(rec(`s-${i}`, 1_000_000 - i));
    t.see(rec("x", 1, "Discarded"));
    t.see(rec("y", 1, "DeadLettered"));
    t.see(rec("z", 2, "Succeeded", "other"));
    expect(t.counts.get("ns")).toEqual({ Succeeded: EVICTION_CANDIDATES + 5, Discarded: 1, Replayed: 0 });
    expect(t.counts.get("other")).toEqual({ Succeeded: 1, Discarded: 0, Replayed: 0 });
    expect(t.oldest.get("ns")!.Succeeded).toHaveLength(candidatesPerNamespace(2));
    expect(t.oldest.get("ns")!.Succeeded[0]!.finishedAt).toBe(1_000_000 - (EVICTION_CANDIDATES + 4));
    expect(t.oldest.get("other")!.Succeeded.map((r) => r.metadata.name)).toEqual(["z"]);
  });

  it("keeps the candidates of many namespaces within about twice EVICTION_CANDIDATES, and the oldest of each", () => {
    const t = new SweepTally(new Map());
    const namespaces = 300;
    // Namespace by namespace, as a paginated list per namespace brings them: 200 each.
    for (let n = 0; n < namespaces; n++) for (let i = 0; i < 200; i++) t.see(rec(`d-${i}`, 10_000 - i, "Succeeded", `ns-${n}`));
    let kept = 0;
    for (const lists of t.oldest.values()) kept += lists.Succeeded.length + lists.Discarded.length;
    expect(kept).toBeLessThanOrEqual(Math.max(2 * EVICTION_CANDIDATES, 2 * namespaces * MIN_CANDIDATES_PER_NAMESPACE));
    for (const lists of t.oldest.values()) {
      expect(lists.Succeeded.length).toBeGreaterThanOrEqual(candidatesPerNamespace(namespaces));
      expect(lists.Succeeded[0]!.finishedAt).toBe(10_000 - 199);
    }
  });
});

describe("StorageBudget: what goes first within a namespace", () => {
  /** A budget of `max` over one namespace's sweep; returns the names deleted, in order. */
  async function evict(max: number, recs: TerminalRecord[], deadLetters: TerminalRecord[] = [], addedAfterSweep: TerminalRecord[] = []) {
    const deleted: string[] = [];
    let sweeps = 0;
    const budget = new StorageBudget({
      max,
      caches: { deliveries: new Map(), subscription: () => undefined } as unknown as Caches,
      events: { record: () => undefined },
      metrics: new Metrics({ defaultMetrics: false }),
      log: pino({ level: "silent" }),
      isLeader: () => false,
      deadLettersByNamespace: () => new Map([["ns", deadLetters.length - deleted.filter((n) => deadLetters.some((d) => d.metadata.name === n)).length]]),
      oldestDeadLetters: (_ns, n, skip) => deadLetters.filter((d) => !skip.has(`ns/${d.metadata.name}`) && !deleted.includes(d.metadata.name)).slice(0, n),
      deleteDelivery: (r) => {
        deleted.push(r.metadata.name);
        return Promise.resolve(true);
      },
      requestSweep: () => sweeps++,
    });
    const tally = budget.sweepStarted();
    for (const r of recs) tally.see(r);
    budget.sweepFinished(tally);
    for (const r of addedAfterSweep) budget.added(r);
    // One round at a time, as the watch's DELETED events would follow each.
    const round = (budget as unknown as { round(): Promise<boolean> }).round.bind(budget);
    while (await round()) for (const r of recs.filter((x) => deleted.includes(x.metadata.name))) budget.removed(r);
    return { deleted, sweeps };
  }
  const replayed = (name: string, finishedAt: number): TerminalRecord => ({ ...rec(name, finishedAt), wasDeadLetter: true });

  it("a plain delivered one before Discarded before a former dead letter a replay delivered, however old, before a dead letter", async () => {
    const recs = [replayed("replayed-old", 1), rec("discarded", 5, "Discarded"), rec("plain-new", 10), rec("plain-newer", 20), replayed("replayed-new", 30)];
    const dead = [rec("dead", 0, "DeadLettered")];
    // 6 stored, a budget of 1: five go, the dead letter stays.
    const { deleted } = await evict(1, recs, dead);
    expect(deleted).toEqual(["plain-new", "plain-newer", "discarded", "replayed-old", "replayed-new"]);
  });

  it("takes no former dead letter while a plain delivered one is stored but not among the remembered candidates (asks for a sweep)", async () => {
    const { deleted, sweeps } = await evict(0, [replayed("replayed", 1)], [], [rec("plain-after-the-sweep", 10)]);
    expect(deleted).toEqual([]);
    expect(sweeps).toBe(1);
  });

  it("counts a former dead letter as Succeeded in the stored metric", () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const budget = new StorageBudget({
      max: 100,
      caches: { deliveries: new Map(), subscription: () => undefined } as unknown as Caches,
      events: { record: () => undefined },
      metrics,
      log: pino({ level: "silent" }),
      isLeader: () => false,
      deadLettersByNamespace: () => new Map(),
      oldestDeadLetters: () => [],
      deleteDelivery: () => Promise.resolve(true),
      requestSweep: () => undefined,
    });
    budget.added(replayed("r", 1));
    budget.added(rec("p", 2));
    expect(budget.stored()).toMatchObject({ Succeeded: 2, Discarded: 0 });
    expect(budget.byNamespace().get("ns")).toEqual({ Succeeded: 2, Discarded: 0, DeadLettered: 0 });
    expect(budget.finished()).toBe(2);
  });
});

describe("StorageBudget: deletes that make no progress", () => {
  it("stops when every pick is refused at once (another path is deleting it), and never starves I/O", async () => {
    // FinishedDeletes answers false at once, with no request, for a delivery another path (the
    // dead-letter cap) is deleting. The budget once counted that as progress and picked the same
    // dead letters again, in microtasks only: the operator spun, and the cap's own deletes (I/O)
    // never finished. A guard stops such a loop after 1,000 calls so this test fails, not hangs.
    const dead = [rec("d-1", 1, "DeadLettered"), rec("d-2", 2, "DeadLettered"), rec("d-3", 3, "DeadLettered")];
    let calls = 0;
    const budget = new StorageBudget({
      max: 0,
      caches: { deliveries: new Map(), subscription: () => undefined } as unknown as Caches,
      events: { record: () => undefined },
      metrics: new Metrics({ defaultMetrics: false }),
      log: pino({ level: "silent" }),
      isLeader: () => true,
      deadLettersByNamespace: () => new Map([["ns", dead.length]]),
      oldestDeadLetters: (_ns, n, skip) => dead.filter((d) => !skip.has(`ns/${d.metadata.name}`)).slice(0, n),
      deleteDelivery: () => (++calls > 1_000 ? new Promise<boolean>(() => undefined) : Promise.resolve(false)),
      requestSweep: () => undefined,
    });
    budget.sweepFinished(budget.sweepStarted());
    // A timer fires only if the loop lets the event loop turn.
    await new Promise((r) => setTimeout(r, 50));
    expect(calls, "one round of three picks, then it waits for the watch").toBe(dead.length);
  });
});
