import { describe, expect, it } from "vitest";
import { keepOldest, SweepTally, EVICTION_CANDIDATES } from "./storage-budget.js";
import type { TerminalRecord } from "./terminal-index.js";

const rec = (name: string, finishedAt: number, phase: TerminalRecord["phase"] = "Succeeded"): TerminalRecord => ({ metadata: { name, namespace: "ns" }, subscription: "s", phase, finishedAt });

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
  it("counts Succeeded and Discarded, ignores dead letters, and bounds the candidates", () => {
    const t = new SweepTally({ Succeeded: 0, Discarded: 0 });
    for (let i = 0; i < EVICTION_CANDIDATES + 5; i++) t.see(rec(`s-${i}`, 1_000_000 - i));
    t.see(rec("x", 1, "Discarded"));
    t.see(rec("y", 1, "DeadLettered"));
    expect(t.counts).toEqual({ Succeeded: EVICTION_CANDIDATES + 5, Discarded: 1 });
    expect(t.oldest.Succeeded).toHaveLength(EVICTION_CANDIDATES);
    expect(t.oldest.Succeeded[0]!.finishedAt).toBe(1_000_000 - (EVICTION_CANDIDATES + 4));
  });
});
