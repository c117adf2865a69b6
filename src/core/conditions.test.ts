import { describe, expect, it } from "vitest";
import type { Condition } from "../api/fields.js";
import { conditionDiffers, getCondition, setCondition, type ConditionInput } from "./conditions.js";
import { toRfc3339 } from "./rfc3339.js";

const T0 = Date.UTC(2025, 5, 15, 12, 0, 0);
const T1 = T0 + 60_000;
const ready: Condition = { type: "Ready", status: "True", reason: "Accepted", message: "ok", lastTransitionTime: toRfc3339(T0), observedGeneration: 2 };
const healthy: Condition = { type: "EndpointHealthy", status: "False", reason: "Failures", lastTransitionTime: toRfc3339(T0) };

describe("getCondition", () => {
  it.each<[string, Condition[] | undefined, string, Condition | undefined]>([
    ["undefined list", undefined, "Ready", undefined],
    ["empty list", [], "Ready", undefined],
    ["present", [healthy, ready], "Ready", ready],
    ["absent", [healthy], "Ready", undefined],
    ["case-sensitive", [ready], "ready", undefined],
  ])("%s", (_name, list, type, expected) => {
    expect(getCondition(list, type)).toBe(expected);
  });
});

describe("setCondition", () => {
  it("adds to an undefined list, stamping now and the generation", () => {
    expect(setCondition(undefined, { type: "Ready", status: "True", reason: "Accepted", message: "ok" }, T1, 3)).toEqual([
      { type: "Ready", status: "True", reason: "Accepted", message: "ok", lastTransitionTime: toRfc3339(T1), observedGeneration: 3 },
    ]);
  });

  it("leaves out message and observedGeneration when not given", () => {
    const [c] = setCondition([], { type: "Ready", status: "Unknown", reason: "Pending" }, T1);
    expect(c).toEqual({ type: "Ready", status: "Unknown", reason: "Pending", lastTransitionTime: toRfc3339(T1) });
    expect(c).not.toHaveProperty("message");
    expect(c).not.toHaveProperty("observedGeneration");
  });

  it.each<[string, ConditionInput, string]>([
    ["same status, new reason and message: time kept", { type: "Ready", status: "True", reason: "Reconciled", message: "still ok" }, toRfc3339(T0)],
    ["status changes: time moves", { type: "Ready", status: "False", reason: "SecretNotFound", message: "no secret" }, toRfc3339(T1)],
    ["True -> Unknown: time moves", { type: "Ready", status: "Unknown", reason: "Checking" }, toRfc3339(T1)],
  ])("%s", (_name, input, lastTransitionTime) => {
    const list = setCondition([ready, healthy], input, T1, 4);
    expect(list).toHaveLength(2);
    expect(getCondition(list, "Ready")).toEqual({ ...input, lastTransitionTime, observedGeneration: 4 });
    expect(getCondition(list, "EndpointHealthy")).toBe(healthy);
  });

  it("replaces, never duplicates, and keeps the list sorted by type", () => {
    let list = setCondition(undefined, { type: "Ready", status: "True", reason: "A" }, T0);
    list = setCondition(list, { type: "EndpointHealthy", status: "True", reason: "B" }, T0);
    list = setCondition(list, { type: "Ready", status: "True", reason: "C" }, T1);
    list = setCondition(list, { type: "Available", status: "True", reason: "D" }, T1);
    expect(list.map((c) => [c.type, c.reason])).toEqual([
      ["Available", "D"],
      ["EndpointHealthy", "B"],
      ["Ready", "C"],
    ]);
  });

  it("drops a stale message when the new input has none", () => {
    expect(getCondition(setCondition([ready], { type: "Ready", status: "True", reason: "Accepted" }, T1), "Ready")).not.toHaveProperty("message");
  });

  it("does not mutate the given list or its conditions", () => {
    const list = [ready, healthy];
    const copy = structuredClone(list);
    const next = setCondition(list, { type: "Ready", status: "False", reason: "Broken" }, T1, 9);
    expect(list).toEqual(copy);
    expect(next).not.toBe(list);
  });
});

describe("conditionDiffers", () => {
  const table: Array<[string, Condition[] | undefined, ConditionInput, number | undefined, boolean]> = [
    ["absent from an undefined list", undefined, { type: "Ready", status: "True", reason: "Accepted" }, undefined, true],
    ["absent from the list", [healthy], { type: "Ready", status: "True", reason: "Accepted" }, undefined, true],
    ["identical", [ready], { type: "Ready", status: "True", reason: "Accepted", message: "ok" }, 2, false],
    ["identical, generation not given", [ready], { type: "Ready", status: "True", reason: "Accepted", message: "ok" }, undefined, false],
    ["status differs", [ready], { type: "Ready", status: "False", reason: "Accepted", message: "ok" }, 2, true],
    ["reason differs", [ready], { type: "Ready", status: "True", reason: "Other", message: "ok" }, 2, true],
    ["message differs", [ready], { type: "Ready", status: "True", reason: "Accepted", message: "changed" }, 2, true],
    ["message dropped", [ready], { type: "Ready", status: "True", reason: "Accepted" }, 2, true],
    ["no message vs empty message", [healthy], { type: "EndpointHealthy", status: "False", reason: "Failures", message: "" }, undefined, false],
    ["generation differs", [ready], { type: "Ready", status: "True", reason: "Accepted", message: "ok" }, 3, true],
    ["generation given, none stored", [healthy], { type: "EndpointHealthy", status: "False", reason: "Failures" }, 1, true],
  ];
  it.each(table)("%s -> %s", (_name, list, input, generation, expected) => {
    expect(conditionDiffers(list, input, generation)).toBe(expected);
  });

  it("a condition just set does not differ from its own input (timestamps aside)", () => {
    const input: ConditionInput = { type: "Succeeded", status: "Unknown", reason: "RetryScheduled", message: "attempt 1 failed" };
    const list = setCondition(undefined, input, T0, 5);
    expect(conditionDiffers(list, input, 5)).toBe(false);
    expect(conditionDiffers(list, input, 6)).toBe(true);
  });
});
