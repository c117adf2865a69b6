import { describe, expect, it } from "vitest";
import type { DeliveryObject } from "../delivery/objects.js";
import { dedupeKey } from "../delivery/payload.js";
import { parseConcurrency, pendingTwin, validReason } from "./replay.js";

describe("validReason", () => {
  const table: Array<[string | undefined, boolean]> = [
    [undefined, false],
    ["", false],
    ["fix", false],
    ["abcd", false],
    ["abcde", true],
    ["endpoint fixed, INC-42", true],
    ["     ", false],
    ["  abcd  ", false],
    ["  abcde  ", true],
    ["\tab\ncd\t", true], // inner whitespace counts: 5 characters after trimming
    ["INC-4", true],
  ];
  it.each(table)("%j -> %s", (reason, valid) => {
    expect(validReason(reason)).toBe(valid);
  });
});

describe("parseConcurrency", () => {
  const table: Array<[string | undefined, number | undefined]> = [
    // absent or empty: the default
    [undefined, 5],
    ["", 5],
    ["   ", 5],
    // in range
    ["1", 1],
    ["10", 10],
    ["50", 50],
    [" 7 ", 7],
    ["007", 7],
    // clamped to 1..50
    ["0", 1],
    ["-3", 1],
    ["51", 50],
    ["1000", 50],
    ["99999999999999999999999", 50],
    // not a number
    ["ten", undefined],
    ["5.5", undefined],
    ["1e2", undefined],
    ["+5", undefined],
    ["0x10", undefined],
    ["5 workers", undefined],
    ["NaN", undefined],
    ["Infinity", undefined],
  ];
  it.each(table)("%j -> %s", (value, expected) => {
    expect(parseConcurrency(value)).toBe(expected);
  });
});

describe("pendingTwin", () => {
  const obj = (name: string, phase: string | undefined, payload: unknown = { order: 7 }, extra: Record<string, unknown> = {}): DeliveryObject =>
    ({
      metadata: { name, namespace: "ns", uid: `uid-${name}-${phase}`, ...extra },
      spec: { subscriptionRef: { name: "dups" }, eventType: "order.paid", eventId: "evt-dup", payload },
      ...(phase ? { status: { phase } } : {}),
    }) as unknown as DeliveryObject;
  const dk = dedupeKey(obj("dup-1", "DeadLettered"))!;
  const reads = (objs: Record<string, DeliveryObject | undefined>) => {
    const asked: string[] = [];
    return { asked, read: (key: string) => (asked.push(key), Promise.resolve(objs[key])) };
  };

  it("a twin the API server still has pending counts", async () => {
    const r = reads({ "ns/dup-2": obj("dup-2", "Retrying") });
    expect(await pendingTwin("ns/dup-1", dk, ["ns/dup-2"], r.read)).toBe(true);
    expect(r.asked).toEqual(["ns/dup-2"]);
  });

  it("the candidate itself, still pending in a cache that is behind, is not its own twin (it is not read)", async () => {
    const r = reads({ "ns/dup-1": obj("dup-1", "DeadLettered") });
    expect(await pendingTwin("ns/dup-1", dk, ["ns/dup-1"], r.read)).toBe(false);
    expect(r.asked).toEqual([]);
  });

  it("a twin the cache holds as pending but which has since finished, gone or changed does not count", async () => {
    for (const now of [obj("dup-2", "DeadLettered"), obj("dup-2", "Succeeded"), obj("dup-2", "Discarded"), undefined, obj("dup-2", "Pending", { order: 8 }), obj("dup-2", "Pending", { order: 7 }, { deletionTimestamp: "2026-12-07T00:00:00Z" })]) {
      const r = reads({ "ns/dup-2": now });
      expect(await pendingTwin("ns/dup-1", dk, ["ns/dup-2"], r.read)).toBe(false);
    }
  });

  it("reads the twins in turn until one is pending", async () => {
    const r = reads({ "ns/a": obj("a", "DeadLettered"), "ns/b": obj("b", undefined), "ns/c": obj("c", "Pending") });
    expect(await pendingTwin("ns/dup-1", dk, ["ns/a", "ns/dup-1", "ns/b", "ns/c"], r.read)).toBe(true);
    expect(r.asked).toEqual(["ns/a", "ns/b"]);
  });
});
