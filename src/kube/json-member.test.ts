import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { cutMember, memberPath } from "./json-member.js";

const PATH = memberPath("object", "spec", "payload");

/** Serialized as JSON.stringify does, or with whitespace everywhere it may go. */
const render = (v: unknown, spaced: boolean): Buffer => Buffer.from(spaced ? ` ${JSON.stringify(v, null, 2).replace(/\n/g, "\r\n\t")}\n ` : JSON.stringify(v), "utf8");

describe("cutMember", () => {
  // The member is placed among the others at a random position, at each level.
  const place = (o: Record<string, unknown>, k: string, v: unknown, at: number) => {
    const entries = Object.entries(o).filter(([x]) => x !== k);
    entries.splice(at % (entries.length + 1), 0, [k, v]);
    return Object.fromEntries(entries);
  };
  const eventOf = (top: Record<string, unknown>, object: Record<string, unknown>, spec: Record<string, unknown>, payload: unknown, at1: number, at2: number) => {
    const specObj = place(spec, "payload", payload, at2);
    const { payload: _p, ...without } = specObj;
    const event = place(top, "object", place(object, "spec", specObj, at1), at1 + at2);
    // As JSON.stringify has them (-0 is written 0).
    const norm = (v: unknown): unknown => JSON.parse(JSON.stringify(v));
    return { event, payload: norm(payload), without: norm({ ...event, object: { ...(event.object as object), spec: without } }) };
  };
  const members = (key: fc.Arbitrary<string>) => fc.dictionary(key, fc.jsonValue({ maxDepth: 3 }), { maxKeys: 4 });
  /** A key JSON.stringify writes without an escape: no quote, backslash, control character or lone surrogate. */
  const unescaped = (k: string) => JSON.stringify(k) === `"${k}"`;
  const plainKey = fc.oneof(fc.string({ maxLength: 8, unit: "binary" }).filter(unescaped), fc.constantFrom("spec", "payload", "object", "é", "{}[],:"));
  const anyKey = fc.oneof(fc.string({ maxLength: 8, unit: "binary" }), fc.constantFrom("spec", "payload", "object", 'a"b', "\\", "\n"));

  it("cuts exactly the member at the path: the rest parses to the object without it, the value to the member (property)", () => {
    fc.assert(
      fc.property(members(plainKey), members(plainKey), members(plainKey), fc.jsonValue({ maxDepth: 6 }), fc.nat(), fc.nat(), fc.boolean(), (top, object, spec, payload, at1, at2, spaced) => {
        const { event, without, payload: expected } = eventOf(top, object, spec, payload, at1, at2);
        const cut = cutMember(render(event, spaced), PATH);
        expect(cut).toBeDefined();
        expect(JSON.parse(cut!.value.toString("utf8"))).toEqual(expected);
        expect(JSON.parse(cut!.rest.toString("utf8"))).toEqual(without);
      }),
      { numRuns: 500 },
    );
  });

  it("with keys written with escapes, finds nothing or exactly the member, never another (property)", () => {
    fc.assert(
      fc.property(members(anyKey), members(anyKey), members(anyKey), fc.jsonValue({ maxDepth: 4 }), fc.nat(), fc.nat(), fc.boolean(), (top, object, spec, payload, at1, at2, spaced) => {
        const { event, without, payload: expected } = eventOf(top, object, spec, payload, at1, at2);
        const cut = cutMember(render(event, spaced), PATH);
        if (!cut) return;
        expect(JSON.parse(cut.value.toString("utf8"))).toEqual(expected);
        expect(JSON.parse(cut.rest.toString("utf8"))).toEqual(without);
      }),
      { numRuns: 500 },
    );
  });

  it("keeps non-ASCII text, escaped quotes and backslashes byte-exact on both sides of the cut", () => {
    const payload = { "q\"uote": "a\\\"b\\\\", emoji: "😀 é 中文", nested: [{ "}": "]" }, "{["] };
    const event = { type: "MODIFIED", object: { metadata: { annotations: { note: 'spec: {"payload": 1}' } }, spec: { eventId: "é\\", payload, eventType: "x\"" }, status: { payload: 2 } } };
    const cut = cutMember(Buffer.from(JSON.stringify(event)), PATH)!;
    expect(JSON.parse(cut.value.toString())).toEqual(payload);
    expect(JSON.parse(cut.rest.toString())).toEqual({ type: "MODIFIED", object: { metadata: event.object.metadata, spec: { eventId: "é\\", eventType: "x\"" }, status: { payload: 2 } } });
  });

  it("cuts a 256 KiB string payload and a deeply nested one", () => {
    const big = "x".repeat(256 * 1024);
    let deep: unknown = "leaf";
    for (let i = 0; i < 1000; i++) deep = i % 2 ? [deep] : { d: deep };
    for (const payload of [big, deep]) {
      const cut = cutMember(Buffer.from(JSON.stringify({ object: { spec: { payload, eventType: "t" } } })), PATH)!;
      expect(cut.value.toString()).toBe(JSON.stringify(payload));
      expect(JSON.parse(cut.rest.toString())).toEqual({ object: { spec: { eventType: "t" } } });
    }
  });

  it("finds nothing (the caller parses it all) where it cannot be sure", () => {
    const cases: Array<[string, string]> = [
      ["no payload", `{"object":{"spec":{"eventType":"t"}}}`],
      ["no spec", `{"object":{"status":{"payload":1}}}`],
      ["spec not an object", `{"object":{"spec":[{"payload":1}]}}`],
      ["an escaped key before it", `{"object":{"spec":{"p\\u0061yload":1,"payload":2}}}`],
      ["the key twice", `{"object":{"spec":{"payload":1,"payload":2}}}`],
      ["cut short", `{"object":{"spec":{"payload":"abc`],
      ["empty object", `{"object":{"spec":{}}}`],
      ["not JSON", `not json`],
    ];
    for (const [name, text] of cases) expect(cutMember(Buffer.from(text), PATH), name).toBeUndefined();
  });
});
