import { describe, expect, it } from "vitest";
import { MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH } from "../api/names.js";
import { PayloadTooLargeError, PublishInputError } from "./errors.js";
import { validateEvent } from "./input.js";

const ok = { namespace: "shop", type: "order.paid", id: "evt-1", data: { order: 1 } };

function fieldOf(input: unknown): string {
  try {
    validateEvent(input);
  } catch (err) {
    if (err instanceof PublishInputError) return `${err.field}: ${err.message}`;
    throw err;
  }
  return "valid";
}

describe("validateEvent", () => {
  it("accepts an event and measures its data", () => {
    expect(validateEvent(ok)).toEqual({ ...ok, size: JSON.stringify(ok.data).length });
  });

  it("generates an id when there is none", () => {
    const { id: _id, ...rest } = ok;
    expect(validateEvent(rest, () => "generated").id).toBe("generated");
    expect(validateEvent(rest).id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it.each([null, 0, "text", [1], { a: [null, { b: "é" }] }, true])("accepts any JSON data: %j", (data) => {
    expect(validateEvent({ ...ok, data }).data).toEqual(data);
  });

  it.each([
    ["missing type", { namespace: "shop", data: 1 }, /^type: type is required/],
    ["empty type", { ...ok, type: "" }, /^type: type must not be empty/],
    ["bad type", { ...ok, type: "order paid" }, /^type: type must be a dotted name such as order\.paid/],
    ["wildcard type", { ...ok, type: "order.*" }, /^type: /],
    ["type not a string", { ...ok, type: 5 }, /^type: type must be a string/],
    ["long type", { ...ok, type: "a".repeat(257) }, /^type: type must be at most 256 characters/],
    ["empty id", { ...ok, id: "" }, /^id: id must not be empty/],
    ["long id", { ...ok, id: "i".repeat(257) }, /^id: id must be at most 256 characters/],
    ["id not a string", { ...ok, id: 42 }, /^id: id must be a string/],
    ["bad namespace", { ...ok, namespace: "Shop" }, /^namespace: namespace must be a namespace name/],
    ["missing data", { namespace: "shop", type: "order.paid" }, /^data: data is required/],
    ["data with a BigInt", { ...ok, data: { n: 1n } }, /^data: data is not serializable as JSON/],
    ["data a function", { ...ok, data: () => 1 }, /^data: data is not a JSON value/],
    ["not an object", "order.paid", /^event: /],
  ])("refuses %s, naming the field", (_what, input, message) => {
    expect(fieldOf(input)).toMatch(message);
  });

  it("refuses data above the limit with a typed error, and takes data at the limit", () => {
    const at = "x".repeat(MAX_PAYLOAD_BYTES - 2); // the quotes make it exactly the limit
    expect(validateEvent({ ...ok, data: at }).size).toBe(MAX_PAYLOAD_BYTES);
    let err: unknown;
    try {
      validateEvent({ ...ok, data: at + "x" });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(PayloadTooLargeError);
    expect((err as PayloadTooLargeError).size).toBe(MAX_PAYLOAD_BYTES + 1);
    expect((err as PayloadTooLargeError).field).toBe("data");
  });

  it("takes data nested up to the depth limit and refuses deeper data, naming the field, even past what JSON.stringify can serialize", () => {
    const nested = (depth: number) => JSON.parse(`${"[".repeat(depth)}${"]".repeat(depth)}`) as unknown;
    expect(validateEvent({ ...ok, data: nested(MAX_PAYLOAD_DEPTH) }).size).toBe(2 * MAX_PAYLOAD_DEPTH);
    for (const depth of [MAX_PAYLOAD_DEPTH + 1, 100_000]) {
      expect(fieldOf({ ...ok, data: nested(depth) })).toBe(`data: data is nested deeper than ${MAX_PAYLOAD_DEPTH} levels of arrays and objects`);
    }
  });

  it("counts bytes, not characters", () => {
    const euro = "€".repeat(Math.floor(MAX_PAYLOAD_BYTES / 3)); // 3 bytes each
    expect(() => validateEvent({ ...ok, data: euro })).toThrow(PayloadTooLargeError);
  });
});
