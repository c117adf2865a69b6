import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { deliveryStatusSchema } from "./delivery.js";
import { clipBytes, clipText, fitToSchema } from "./fit.js";

/** No lone surrogate: what UTF-8 encoding would turn into U+FFFD. */
const wellFormed = (s: string) => Buffer.from(s, "utf8").toString("utf8") === s;
import { subscriptionStatusSchema } from "./subscription.js";

describe("clipText", () => {
  it("keeps a short text and cuts a long one to the limit, ending in …", () => {
    expect(clipText("short", 10)).toBe("short");
    expect(clipText("abcdefghijkl", 10)).toBe("abcdefghi…");
    expect(clipText("abcdefghijkl", 10)).toHaveLength(10);
  });

  it("never splits a surrogate pair", () => {
    const s = "a" + "😀".repeat(10); // 1 + 20 code units
    const cut = clipText(s, 5);
    expect(cut.length).toBeLessThanOrEqual(5);
    expect(cut).toBe("a😀…");
    expect(wellFormed(cut)).toBe(true);
  });

  it("property: at most max code units, well-formed, a prefix of the text", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 300 }), fc.integer({ min: 1, max: 200 }), (text, max) => {
        const cut = clipText(text, max);
        expect(cut.length).toBeLessThanOrEqual(max);
        expect(wellFormed(cut)).toBe(true);
        if (text.length <= max) expect(cut).toBe(text);
        else expect(text.startsWith(cut.slice(0, -1))).toBe(true);
      }),
    );
  });
});

describe("clipBytes", () => {
  it("property: at most max bytes of UTF-8, on a character boundary", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 400 }), fc.integer({ min: 4, max: 300 }), (text, max) => {
        const cut = clipBytes(text, max);
        expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(max);
        expect(wellFormed(cut)).toBe(true);
        if (Buffer.byteLength(text) <= max) expect(cut).toBe(text);
      }),
    );
  });
});

describe("fitToSchema", () => {
  const schema = z.object({
    a: z.string().max(5).optional(),
    list: z.array(z.object({ m: z.string().max(3) })).max(2),
    free: z.string(),
    rec: z.record(z.string(), z.string().max(2)),
  });

  it("cuts strings and lists (keeping the newest items), leaves the rest, keeps nulls", () => {
    const out = fitToSchema(schema, { a: "toolong", list: [{ m: "first" }, { m: "b" }, { m: "cc" }], free: "x".repeat(5000), rec: { k: "vvv" }, unknown: "y".repeat(10), gone: null } as never);
    expect(out).toEqual({ a: "tool…", list: [{ m: "b" }, { m: "cc" }], free: "x".repeat(5000), rec: { k: "v…" }, unknown: "y".repeat(10), gone: null });
  });

  it("is idempotent", () => {
    const once = fitToSchema(schema, { a: "toolong", list: [], free: "", rec: {} });
    expect(fitToSchema(schema, once)).toEqual(once);
  });

  it("property: any status with oversized strings fits the delivery and subscription status schemas after fitting", () => {
    const long = fc.string({ unit: "grapheme", minLength: 0, maxLength: 1500 });
    const ts = fc.constant("2026-12-01T00:00:00Z");
    const condition = fc.record({ type: fc.constantFrom("Succeeded", "Ready"), status: fc.constant("Unknown" as const), reason: fc.string({ unit: "grapheme", maxLength: 1100 }), message: long, lastTransitionTime: ts });
    const attempt = fc.record({ number: fc.integer({ min: 1, max: 50 }), startedAt: ts, durationMs: fc.nat(), error: long, outcome: fc.constant("Failed" as const), reason: fc.string({ maxLength: 100 }) });
    const delivery = fc.record({
      phase: fc.constant("DeadLettered" as const),
      lastAttempt: attempt,
      history: fc.array(attempt, { maxLength: 14 }),
      deadLetter: fc.record({ at: ts, reason: fc.constant("Exhausted" as const), message: long }),
      lastReplay: fc.record({ reason: long, at: ts, requestId: fc.string({ maxLength: 200 }) }),
      conditions: fc.uniqueArray(condition, { selector: (c) => c.type, maxLength: 2 }),
    });
    fc.assert(
      fc.property(delivery, (status) => {
        expect(deliveryStatusSchema.safeParse(fitToSchema(deliveryStatusSchema, status)).success).toBe(true);
      }),
      { numRuns: 200 },
    );
    const replay = fc.record({ reason: long, requestedAt: ts, attempted: fc.nat(), succeeded: fc.nat(), failed: fc.nat(), deduped: fc.nat(), inFlight: fc.array(fc.string(), { maxLength: 60 }) });
    fc.assert(
      fc.property(replay, fc.uniqueArray(condition, { selector: (c) => c.type, maxLength: 2 }), (lastReplay, conditions) => {
        expect(subscriptionStatusSchema.safeParse(fitToSchema(subscriptionStatusSchema, { lastReplay, conditions })).success).toBe(true);
      }),
      { numRuns: 200 },
    );
  });
});
