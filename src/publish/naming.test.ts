import { describe, expect, it } from "vitest";
import { deliveryName, HASH_LENGTH, isObjectName, labelValue, MAX_LABEL_LENGTH, MAX_NAME_LENGTH } from "./naming.js";

const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

describe("deliveryName", () => {
  it.each([
    ["evt-1001", "acme", "evt-1001.acme"],
    ["3f2a9c1e-7b1d-4c55-9a63-0d2f5e8b1a77", "acme", "3f2a9c1e-7b1d-4c55-9a63-0d2f5e8b1a77.acme"],
    ["1001", "billing.eu", "1001.billing.eu"],
  ])("is readable for a clean id: %s + %s = %s", (id, sub, name) => {
    expect(deliveryName(id, sub)).toBe(name);
  });

  it.each([
    ["Evt-1001", "acme", /^evt-1001-acme-[0-9a-f]{12}$/],
    ["ord_123", "acme", /^ord-123-acme-[0-9a-f]{12}$/],
    ["evt.1", "acme", /^evt-1-acme-[0-9a-f]{12}$/],
    ["-lead", "acme", /^lead-acme-[0-9a-f]{12}$/],
    ["évènement/42", "billing.eu", /^v-nement-42-billing-eu-[0-9a-f]{12}$/],
    ["___", "acme", /^event-acme-[0-9a-f]{12}$/],
  ])("is sanitized and hashed when the id is not a clean name: %s + %s", (id, sub, pattern) => {
    expect(deliveryName(id, sub)).toMatch(pattern);
  });

  it("is stable", () => {
    expect(deliveryName("Evt-1001", "acme")).toBe(deliveryName("Evt-1001", "acme"));
    expect(deliveryName("evt-1001", "acme")).toBe(deliveryName("evt-1001", "acme"));
  });

  it("never joins two pairs into one name (the dash ambiguity)", () => {
    // Joined with "-", both would read "evt-1-b-acme".
    expect(deliveryName("evt-1-b", "acme")).not.toBe(deliveryName("evt-1", "b-acme"));
    // Sanitizing maps these ids to the same text; the hash keeps them apart.
    expect(deliveryName("Evt-1", "acme")).not.toBe(deliveryName("EVT-1", "acme"));
    expect(deliveryName("evt_1", "acme")).not.toBe(deliveryName("evt.1", "acme"));
    // A hashed name (no dot) never equals a readable one (always a dot).
    const hashed = deliveryName("Evt", "x");
    expect(hashed).not.toContain(".");
    expect(deliveryName("evt", "x")).toContain(".");
  });

  it("has no collisions over many near-identical inputs", () => {
    const ids = ["a", "A", "a-b", "a_b", "a.b", "a b", "a--b", "a-", "-a", "ab", "a/b", "a:b", "1", "01", "x".repeat(300), "x".repeat(301)];
    const subs = ["s", "b-s", "s.t", "t", "b"];
    const names = new Map<string, string>();
    for (const id of ids) {
      for (const sub of subs) {
        const name = deliveryName(id, sub);
        const pair = JSON.stringify([id, sub]);
        expect(names.get(name), `${pair} collides with ${names.get(name)}`).toBeUndefined();
        names.set(name, pair);
      }
    }
  });

  it("stays a valid object name at any length", () => {
    const cases: Array<[string, string]> = [
      ["e".repeat(256), "s".repeat(253)],
      ["e".repeat(120), "s".repeat(140)],
      ["E".repeat(256), "a.b.c"],
      ["e", "s".repeat(253)],
      ["-.-", "-"],
    ];
    for (const [id, sub] of cases) {
      const name = deliveryName(id, sub);
      expect(name.length).toBeLessThanOrEqual(MAX_NAME_LENGTH);
      expect(isObjectName(name), name).toBe(true);
    }
  });

  it("uses the readable form up to the 253-character limit, and hashes past it", () => {
    const sub = "s".repeat(253 - 1 - 10);
    expect(deliveryName("e".repeat(10), sub)).toBe(`${"e".repeat(10)}.${sub}`);
    const long = deliveryName("e".repeat(11), sub);
    expect(long).toMatch(new RegExp(`-[0-9a-f]{${HASH_LENGTH}}$`));
    expect(long.length).toBeLessThanOrEqual(MAX_NAME_LENGTH);
  });
});

describe("labelValue", () => {
  it.each(["evt-1001", "Evt_1001", "a", "3f2a9c1e-7b1d-4c55-9a63-0d2f5e8b1a77", "x".repeat(63)])("keeps a valid value: %s", (v) => {
    expect(labelValue(v)).toBe(v);
  });

  it.each(["x".repeat(64), "evt 1", "-evt", "evt-", "évt", "a/b", "", `evt_${"0".repeat(HASH_LENGTH)}`])("hashes anything else into a valid value: %j", (v) => {
    const out = labelValue(v);
    expect(out).not.toBe(v);
    expect(out.length).toBeLessThanOrEqual(MAX_LABEL_LENGTH);
    expect(out).toMatch(LABEL_VALUE);
    expect(out).toMatch(new RegExp(`_[0-9a-f]{${HASH_LENGTH}}$`));
  });

  it("never maps two values to one", () => {
    const values = ["x".repeat(64), "x".repeat(65), "evt 1", "evt/1", "evt-1"];
    const hashedLookalike = labelValue("evt 1");
    values.push(hashedLookalike);
    const out = values.map(labelValue);
    expect(new Set(out).size).toBe(values.length);
  });
});
