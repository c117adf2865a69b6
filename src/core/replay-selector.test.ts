import { describe, expect, it } from "vitest";
import { afterCursor, formatCursor, parseCursor, selects, type ReplayCandidate, type ReplaySelection } from "./replay-selector.js";

const T0 = Date.UTC(2026, 10, 30, 0, 0, 0);
const all: ReplaySelection = { subscriptions: undefined, eventTypes: undefined, reasons: undefined, phases: new Set(["DeadLettered"]), finishedAfter: undefined, finishedBefore: T0 + 86_400_000 };
const dl = (over: Partial<ReplayCandidate> = {}): ReplayCandidate => ({ subscription: "acme", eventType: "order.paid", phase: "DeadLettered", reason: "Exhausted", finishedAt: T0 + 1_000, ...over });

describe("replay selection", () => {
  it("an empty selector takes every dead letter that finished before the replay started", () => {
    expect(selects(all, dl())).toBe(true);
    expect(selects(all, dl({ finishedAt: T0 + 86_400_000 }))).toBe(false);
    expect(selects(all, dl({ phase: "Succeeded" }))).toBe(false);
    expect(selects(all, dl({ phase: "Discarded" }))).toBe(false);
    expect(selects({ ...all, phases: new Set(["DeadLettered", "Succeeded"]) }, dl({ phase: "Discarded" }))).toBe(false);
  });

  it("subscriptions, event type patterns, reasons and the window", () => {
    expect(selects({ ...all, subscriptions: new Set(["globex"]) }, dl())).toBe(false);
    expect(selects({ ...all, subscriptions: new Set(["globex", "acme"]) }, dl())).toBe(true);
    expect(selects({ ...all, eventTypes: ["order.*"] }, dl())).toBe(true);
    expect(selects({ ...all, eventTypes: ["invoice.*", "order.paid.v2"] }, dl())).toBe(false);
    expect(selects({ ...all, eventTypes: ["*"] }, dl({ eventType: undefined }))).toBe(false);
    expect(selects({ ...all, reasons: new Set(["Exhausted", "BreakerOpen"]) }, dl())).toBe(true);
    expect(selects({ ...all, reasons: new Set(["Gone"]) }, dl())).toBe(false);
    expect(selects({ ...all, finishedAfter: T0 + 1_000 }, dl())).toBe(true);
    expect(selects({ ...all, finishedAfter: T0 + 1_001 }, dl())).toBe(false);
    expect(selects({ ...all, finishedBefore: T0 + 1_000 }, dl())).toBe(false);
  });

  it("reasons apply to dead letters only", () => {
    const both = { ...all, phases: new Set(["DeadLettered", "Succeeded"] as const), reasons: new Set(["Gone"]) };
    expect(selects(both, dl({ phase: "Succeeded", reason: undefined }))).toBe(true);
    expect(selects(both, dl())).toBe(false);
  });
});

describe("replay cursor", () => {
  it("dead letters oldest first, then Succeeded by name; round-trips as text", () => {
    const c = { phase: "DeadLettered" as const, finishedAt: T0, name: "b" };
    expect(afterCursor(undefined, c)).toBe(true);
    expect(afterCursor(c, { phase: "DeadLettered", finishedAt: T0, name: "b" })).toBe(false);
    expect(afterCursor(c, { phase: "DeadLettered", finishedAt: T0, name: "c" })).toBe(true);
    expect(afterCursor(c, { phase: "DeadLettered", finishedAt: T0 - 1, name: "z" })).toBe(false);
    expect(afterCursor(c, { phase: "DeadLettered", finishedAt: T0 + 1, name: "a" })).toBe(true);
    expect(afterCursor(c, { phase: "Succeeded", finishedAt: 0, name: "a" })).toBe(true);
    expect(afterCursor({ phase: "Succeeded", finishedAt: 0, name: "m" }, { phase: "DeadLettered", finishedAt: T0 + 9, name: "z" })).toBe(false);
    expect(afterCursor({ phase: "Succeeded", finishedAt: 0, name: "m" }, { phase: "Succeeded", finishedAt: T0 + 9, name: "a" })).toBe(false);
    expect(parseCursor(formatCursor({ phase: "Succeeded", finishedAt: 0, name: "evt-1.acme" }))).toEqual({ phase: "Succeeded", finishedAt: 0, name: "evt-1.acme" });
    expect(parseCursor("garbage")).toBeUndefined();
    expect(parseCursor(undefined)).toBeUndefined();
  });
});
