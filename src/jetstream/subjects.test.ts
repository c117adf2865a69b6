import { describe, expect, it } from "vitest";
import { decodeToken, encodeToken, eventSubject, filterSubjects, isValidSubject, parseEventSubject, SubjectError, subjectMatches } from "./subjects.js";

function fieldOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof SubjectError) return `${err.field}: ${err.message}`;
    throw err;
  }
  return "no error";
}

describe("eventSubject", () => {
  it.each([
    ["order.paid", "hookline.shop.order.paid"],
    ["order.paid.v2", "hookline.shop.order.paid.v2"],
    ["Order:Paid/v1-x", "hookline.shop.Order:Paid/v1-x"],
    // The shapes NATS refuses: an empty token in the middle, a trailing dot, several.
    ["order..paid", "hookline.shop.order._.paid"],
    ["order.", "hookline.shop.order._"],
    ["a...", "hookline.shop.a._._._"],
    // A token of its own that starts with "_" gets one more, so it never reads as an empty one.
    ["order._", "hookline.shop.order.__"],
    ["order._x", "hookline.shop.order.__x"],
    ["order.__", "hookline.shop.order.___"],
    ["a_b.c_", "hookline.shop.a_b.c_"],
  ])("%s -> %s", (type, subject) => {
    expect(eventSubject("shop", type)).toBe(subject);
    expect(isValidSubject(subject)).toBe(true);
    expect(parseEventSubject(subject)).toEqual({ namespace: "shop", type });
  });

  it("refuses what has no subject, naming the field", () => {
    expect(fieldOf(() => eventSubject("Shop", "order.paid"))).toMatch(/^namespace: /);
    expect(fieldOf(() => eventSubject("a.b", "order.paid"))).toMatch(/^namespace: /);
    expect(fieldOf(() => eventSubject("shop", ""))).toMatch(/^type: /);
    expect(fieldOf(() => eventSubject("shop", ".order"))).toMatch(/^type: /);
    expect(fieldOf(() => eventSubject("shop", "order.*"))).toMatch(/^type: /);
    expect(fieldOf(() => eventSubject("shop", "order paid"))).toMatch(/^type: /);
    expect(fieldOf(() => eventSubject("shop", "x".repeat(257)))).toMatch(/^type: /);
  });

  it("the longest type has a subject NATS takes", () => {
    const dots = `a${".".repeat(255)}`;
    expect(eventSubject("s".repeat(63), dots)).toHaveLength("hookline.".length + 63 + 1 + 1 + 255 * 2);
    expect(isValidSubject(eventSubject("s".repeat(63), dots))).toBe(true);
  });

  it("parseEventSubject refuses subjects eventSubject never makes", () => {
    for (const s of ["hookline.shop", "other.shop.order", "hookline.Shop.order", "hookline.shop._x", "hookline.shop.order..paid", "hookline.shop.*"]) {
      expect(parseEventSubject(s), s).toBeUndefined();
    }
  });

  it("token encoding round-trips", () => {
    for (const t of ["", "_", "__", "_a", "a_", "a", "a_b"]) expect(decodeToken(encodeToken(t))).toBe(t);
  });
});

describe("filterSubjects", () => {
  it.each([
    [undefined, ["hookline.shop.>"]],
    [[], ["hookline.shop.>"]],
    [["*"], ["hookline.shop.>"]],
    [["order.paid", "*"], ["hookline.shop.>"]],
    [["order.*"], ["hookline.shop.order.>"]],
    [["order.paid"], ["hookline.shop.order.paid"]],
    [["order.paid", "invoice.*"], ["hookline.shop.invoice.>", "hookline.shop.order.paid"]],
    // JetStream refuses overlapping filters: a covered one is left out.
    [["order.paid", "order.*", "order.paid.*"], ["hookline.shop.order.>"]],
    [["order.*", "order.paid.*", "orders.x"], ["hookline.shop.order.>", "hookline.shop.orders.x"]],
    [["a..*", "a._"], ["hookline.shop.a._.>", "hookline.shop.a.__"]],
    [["order", "order.*"], ["hookline.shop.order", "hookline.shop.order.>"]],
  ])("%j -> %j", (eventTypes, filters) => {
    expect(filterSubjects("shop", eventTypes)).toEqual(filters);
    for (const f of filters) expect(isValidSubject(f, true)).toBe(true);
  });

  it("refuses an entry that is not a pattern, naming it", () => {
    expect(fieldOf(() => filterSubjects("shop", ["order.paid", "order.**"]))).toMatch(/^eventTypes\[1\]: /);
    expect(fieldOf(() => filterSubjects("shop", ["", "x"]))).toMatch(/^eventTypes\[0\]: /);
    expect(fieldOf(() => filterSubjects("shop", ["order.>"]))).toMatch(/^eventTypes\[0\]: /);
    expect(fieldOf(() => filterSubjects("Shop", ["x"]))).toMatch(/^namespace: /);
  });
});

describe("subjectMatches (the NATS rules)", () => {
  it.each([
    ["a.b", "a.b", true],
    ["a.b", "a.b.c", false],
    ["a.*", "a.b", true],
    ["a.*", "a.b.c", false],
    ["a.*", "a", false],
    ["a.>", "a.b", true],
    ["a.>", "a.b.c", true],
    ["a.>", "a", false],
    ["*.b", "a.b", true],
    [">", "a", true],
    ["a.*.c", "a.b.c", true],
    ["a.*.c", "a.b.d", false],
  ])("%s matches %s: %s", (filter, subject, expected) => {
    expect(subjectMatches(filter, subject)).toBe(expected);
  });

  it("isValidSubject", () => {
    expect(isValidSubject("a.b")).toBe(true);
    for (const s of ["", "a..b", "a.", ".a", "a b", "a.*", "a.>"]) expect(isValidSubject(s), s).toBe(false);
    expect(isValidSubject("a.*", true)).toBe(true);
    expect(isValidSubject("a.>.b", true)).toBe(false);
    expect(isValidSubject("a.b*", true)).toBe(false);
  });
});
