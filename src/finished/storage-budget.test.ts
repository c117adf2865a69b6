import { describe, expect, it } from "vitest";
import { candidatesPerNamespace, keepOldest, SweepTally, EVICTION_CANDIDATES, MIN_CANDIDATES_PER_NAMESPACE } from "./storage-budget.js";
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
    expect(t.counts.get("ns")).toEqual({ Succeeded: EVICTION_CANDIDATES + 5, Discarded: 1 });
    expect(t.counts.get("other")).toEqual({ Succeeded: 1, Discarded: 0 });
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
