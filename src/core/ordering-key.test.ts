import { describe, expect, it } from "vitest";
import { isOrderingKey, orderingValue, parseOrderingKey } from "./ordering-key.js";

const at = (key: string, payload: unknown, eventType = "order.paid") => orderingValue(parseOrderingKey(key)!, { eventType, payload });

describe("ordering keys: the grammar", () => {
  it.each(["eventType", "$.a", "$.customer.id", "$.items[0].sku", "$['order-id']", "$['a.b c']", "$.größe", "$.顧客.番号", "$[3]", "$.a_b-c", `$${".a".repeat(32)}`])("accepts %s", (key) => {
    expect(isOrderingKey(key)).toBe(true);
    expect(parseOrderingKey(key)).toBeDefined();
  });

  it.each([
    ["", "empty"],
    ["$", "the whole payload"],
    ["customer.id", "no $"],
    ["$.*", "wildcard"],
    ["$..id", "recursive descent"],
    ["$.items[*]", "wildcard index"],
    ["$.items[-1]", "negative index"],
    ["$.items[01]", "leading zero"],
    ["$.items[0:2]", "slice"],
    ["$[?(@.a)]", "filter"],
    ["$.a b", "a space in a name step"],
    ["$['a'b']", "a quote in a bracket"],
    ['$["a"]', "double quotes"],
    ["$.a.", "trailing dot"],
    ["eventtype", "case matters"],
    [`$${".a".repeat(33)}`, "33 steps"],
    [`$.${"a".repeat(300)}`, "longer than 256"],
  ])("refuses %j (%s)", (key) => {
    expect(isOrderingKey(key)).toBe(false);
    expect(parseOrderingKey(key)).toBeUndefined();
  });

  it("parses steps", () => {
    expect(parseOrderingKey("$.items[12]['x.y'].größe")).toEqual({
      kind: "path",
      steps: [
        { kind: "name", name: "items" },
        { kind: "index", index: 12 },
        { kind: "name", name: "x.y" },
        { kind: "name", name: "größe" },
      ],
    });
    expect(parseOrderingKey("eventType")).toEqual({ kind: "eventType" });
  });
});

describe("ordering keys: the value", () => {
  it("serializes as JSON, so 5 and \"5\" are different keys", () => {
    expect(at("$.c", { c: 5 })).toBe("5");
    expect(at("$.c", { c: "5" })).toBe('"5"');
    expect(at("$.c.d", { c: { d: { e: [1] } } })).toBe('{"e":[1]}');
    expect(at("$.a[1].b", { a: [{ b: 1 }, { b: "x" }] })).toBe('"x"');
    expect(at("$['a.b']", { "a.b": true })).toBe("true");
    expect(at("$.größe", { größe: "XL" })).toBe('"XL"');
    expect(at("eventType", { c: 1 }, "order.paid")).toBe('"order.paid"');
  });

  it("is undefined when the payload has nothing there (or null): not ordered", () => {
    for (const payload of [undefined, null, 5, "x", [], {}, { c: null }, { c: { d: 1 } }, { a: {} }, { a: [] }]) expect(at("$.a[0]", payload)).toBeUndefined();
    expect(at("$.c", { c: null })).toBeUndefined();
    // Names are own properties only.
    expect(at("$.constructor", {})).toBeUndefined();
    expect(at("$.__proto__", JSON.parse('{"__proto__": 1}'))).toBe("1");
    expect(at("$.length", [1, 2])).toBeUndefined();
  });

  it("keeps a long value as its SHA-256", () => {
    const v = at("$.c", { c: "x".repeat(500) })!;
    expect(v).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(at("$.c", { c: "x".repeat(500) })).toBe(v);
    expect(at("$.c", { c: "x".repeat(501) })).not.toBe(v);
  });

  it("walks 32 steps of a deep payload", () => {
    let deep: unknown = "bottom";
    for (let i = 0; i < 32; i++) deep = { a: deep };
    expect(at(`$${".a".repeat(32)}`, deep)).toBe('"bottom"');
  });
});
