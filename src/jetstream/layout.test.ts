// One stream per namespace: its name, its configuration (the quota, the backstop age), and what
// becomes of the one stream of earlier versions.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { backstopAgeMs, DEFAULT_LAYOUT, legacyStreamPlan, namespaceOfStream, namespaceStreamConfig, namespaceStreamName, ownedBy, streamDifferences, streamOwner, streamOwnerProblem } from "./layout.js";
import { MAX_MESSAGE_BYTES } from "./message.js";
import { SubjectError } from "./subjects.js";

const DAY = 86_400_000;
const NS_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

describe("namespaceStreamName", () => {
  it("is <prefix>_<namespace>, a valid JetStream name for every namespace name, and refuses anything else naming the field", () => {
    expect(namespaceStreamName("HOOKLINE", "shop")).toBe("HOOKLINE_shop");
    fc.assert(
      fc.property(fc.stringMatching(NS_NAME), (ns) => {
        const name = namespaceStreamName("HOOKLINE", ns);
        // JetStream refuses whitespace, ".", "*", ">", path separators; and names past 255 characters.
        expect(name).toMatch(/^[A-Za-z0-9_-]+$/);
        expect(name.length).toBeLessThanOrEqual(255);
        expect(namespaceOfStream("HOOKLINE", { config: { name, metadata: { "hookline.dev/namespace": ns } } })).toBe(ns);
      }),
    );
    for (const bad of ["", "Shop", "a.b", "a_b", "x".repeat(64), "-a", "日本"]) expect(() => namespaceStreamName("HOOKLINE", bad)).toThrow(SubjectError);
  });

  it("recognizes only its own namespace streams: by name and metadata together", () => {
    expect(namespaceOfStream("HOOKLINE", { config: { name: "HOOKLINE_shop", metadata: { "hookline.dev/namespace": "shop" } } })).toBe("shop");
    expect(namespaceOfStream("HOOKLINE", { config: { name: "HOOKLINE_shop" } })).toBeUndefined();
    expect(namespaceOfStream("HOOKLINE", { config: { name: "OTHER_shop", metadata: { "hookline.dev/namespace": "shop" } } })).toBeUndefined();
    expect(namespaceOfStream("HOOKLINE", { config: { name: "KV_hookline-attempts" } })).toBeUndefined();
  });
});

describe("namespaceStreamConfig", () => {
  it("is one file-backed interest stream for the namespace's subjects, its quota with discard new, the backstop age above the dead-letter age", () => {
    expect(namespaceStreamConfig(DEFAULT_LAYOUT, "shop")).toMatchObject({
      name: "HOOKLINE_shop",
      subjects: ["hookline.shop.>"],
      retention: "interest",
      storage: "file",
      discard: "new",
      duplicate_window: 120_000 * 1_000_000,
      max_msg_size: MAX_MESSAGE_BYTES,
      max_msgs: 1_000_000,
      max_bytes: 256 * 1024 * 1024,
      max_age: 14 * DAY * 1_000_000,
      num_replicas: 1,
      metadata: { "hookline.dev/namespace": "shop" },
    });
    const custom = namespaceStreamConfig({ ...DEFAULT_LAYOUT, duplicateWindowMs: 600_000, replicas: 3, namespaceMaxMessages: 10, namespaceMaxBytes: 2 << 20, maxAgeMs: 5_000 }, "a-b");
    expect(custom).toMatchObject({ subjects: ["hookline.a-b.>"], duplicate_window: 600_000 * 1_000_000, num_replicas: 3, max_msgs: 10, max_bytes: 2 << 20, max_age: (5_000 + DAY) * 1_000_000 });
  });

  it("backstop: the dead-letter age plus as much again, at least a day more; always above it", () => {
    expect(backstopAgeMs(7 * DAY)).toBe(14 * DAY);
    expect(backstopAgeMs(1_000)).toBe(1_000 + DAY);
    fc.assert(fc.property(fc.integer({ min: 1_000, max: 14 * DAY }), (age) => backstopAgeMs(age) >= age + DAY && backstopAgeMs(age) >= 2 * age));
  });

  it("an update changes exactly what differs: the quota, the age, replicas, the metadata", () => {
    const have = namespaceStreamConfig(DEFAULT_LAYOUT, "shop");
    expect(streamDifferences(have, have)).toEqual([]);
    const wanted = namespaceStreamConfig({ ...DEFAULT_LAYOUT, namespaceMaxMessages: 5, maxAgeMs: DAY }, "shop");
    expect(streamDifferences(have, wanted)).toEqual(["max_age", "max_msgs"]);
    expect(streamDifferences({ ...have, metadata: {} }, have)).toEqual(["metadata"]);
  });
});

describe("the installation's claim", () => {
  const claimed = namespaceStreamConfig({ ...DEFAULT_LAYOUT, owner: "hookline/hookline" }, "shop");

  it("is in the stream's metadata beside its namespace; none without an installation", () => {
    expect(claimed.metadata).toEqual({ "hookline.dev/namespace": "shop", "hookline.dev/installation": "hookline/hookline" });
    expect(namespaceStreamConfig(DEFAULT_LAYOUT, "shop").metadata).toEqual({ "hookline.dev/namespace": "shop" });
    expect(streamOwner({ config: claimed })).toBe("hookline/hookline");
  });

  it("a stream nobody claimed is claimed by the next update; one already claimed is not changed for it", () => {
    const unclaimed = namespaceStreamConfig(DEFAULT_LAYOUT, "shop");
    expect(streamDifferences(unclaimed, claimed)).toEqual(["metadata"]);
    expect(streamDifferences(claimed, claimed)).toEqual([]);
    // An installation-less operator (a library) claims nothing and leaves a claim as it is.
    expect(streamDifferences(claimed, unclaimed)).toEqual([]);
  });

  it("another installation's stream is refused, saying whose and what to do; an unclaimed one is used only without an installation", () => {
    expect(streamOwnerProblem("team-a", "team-a")).toBeUndefined();
    expect(streamOwnerProblem(undefined, "team-a")).toBeUndefined();
    expect(streamOwnerProblem("team-a", undefined)).toBeUndefined();
    const problem = streamOwnerProblem("team-a", "team-b");
    expect(problem).toContain('belongs to another Hookline installation, "team-a" (this one is "team-b", HOOKLINE_INSTALLATION)');
    expect(problem).toContain("Give each installation its own NATS account");
    expect(problem).toContain("set HOOKLINE_INSTALLATION=team-a");
    // What a sweep may count or delete: only its own (or anything when no installation is configured).
    expect([ownedBy("team-a", "team-a"), ownedBy("team-b", "team-a"), ownedBy(undefined, "team-a"), ownedBy("team-b", undefined)]).toEqual([true, false, false, true]);
  });
});

describe("legacyStreamPlan", () => {
  const legacy = (messages: number, subjects = ["hookline.>"]) => ({ config: { subjects }, state: { messages } });
  it("nothing to do without one; remove an empty one; refuse one that holds events", () => {
    expect(legacyStreamPlan(undefined)).toBe("none");
    expect(legacyStreamPlan(legacy(0))).toBe("remove");
    expect(legacyStreamPlan(legacy(3))).toBe("refuse");
    // A stream of that name that takes other subjects is not Hookline's: left alone.
    expect(legacyStreamPlan(legacy(3, ["orders.>"]))).toBe("none");
  });
});
