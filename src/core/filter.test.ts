// spec.filter: what compiles, what an evaluation gives, and the bounds that keep a hostile
// expression or hostile data to its own subscription and event.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { applyFilter, compileFilter, dataShape, FILTER_COST_BUDGET, FILTER_MAX_LENGTH, rememberedBySource, type CompiledFilter, type FilterEvent } from "./filter.js";

const event = (data: unknown, over: Partial<FilterEvent> = {}): FilterEvent => ({ id: "evt-1", type: "order.paid", namespace: "shop", data, ...over });
const compiled = (source: string): CompiledFilter => {
  const c = compileFilter(source);
  if (!c.ok) throw new Error(`expected ${source} to compile: ${c.message}`);
  return c.filter;
};
const refusal = (source: string): string => {
  const c = compileFilter(source);
  if (c.ok) throw new Error(`expected ${source} to be refused`);
  return c.message;
};

describe("compileFilter and run", () => {
  it("the issue's example: amount and currency", () => {
    const f = compiled('data.amount.value > 1000 && data.currency == "EUR"');
    expect(f.run(event({ amount: { value: 4200 }, currency: "EUR" }))).toEqual({ kind: "matched" });
    expect(f.run(event({ amount: { value: 999 }, currency: "EUR" }))).toEqual({ kind: "filtered" });
    expect(f.run(event({ amount: { value: 4200 }, currency: "USD" }))).toEqual({ kind: "filtered" });
  });

  it("sees the event's id, type and namespace under event (type and namespace are reserved words in CEL)", () => {
    expect(compiled('event.type == "order.paid" && event.namespace == "shop" && event.id.startsWith("evt-")').run(event({}))).toEqual({ kind: "matched" });
    expect(compiled("event.data.n == data.n").run(event({ n: 1 }))).toEqual({ kind: "matched" });
  });

  it("a missing field is an error on this event (has() tests for it), a result that is not a bool is an error", () => {
    expect(compiled("data.x > 1").run(event({}))).toMatchObject({ kind: "error", reason: "evaluation", message: expect.stringContaining("x") });
    expect(compiled("has(data.x) && data.x > 1").run(event({}))).toEqual({ kind: "filtered" });
    expect(compiled('"yes"').run(event({}))).toMatchObject({ kind: "error", reason: "type", message: "the filter gave a string, not true or false" });
  });

  it("refuses what does not parse, naming the position", () => {
    expect(refusal("data.amount >")).toMatch(/^does not parse: at 1:\d+/);
    expect(refusal('data.a == 1 &&\n  data.b ==')).toMatch(/at 2:\d+/);
  });

  it("refuses a name it cannot see, naming it and where it is", () => {
    expect(refusal("data.a == 1 && payload.b == 2")).toBe('uses "payload" at 1:16: a filter sees data (the event\'s payload) and event (event.id, event.type, event.namespace, event.data)');
    // Comprehension variables are in scope inside the comprehension only.
    expect(compiled("data.items.exists(i, i.sku == 'a')").run(event({ items: [{ sku: "a" }] }))).toEqual({ kind: "matched" });
    expect(refusal("data.items.exists(i, true) && i == 1")).toContain('uses "i"');
  });

  it("non-ASCII text in the expression and in the data", () => {
    const f = compiled('data.name.startsWith("é€") && data.name.endsWith("😀") && size(data.name) == 4');
    expect(f.run(event({ name: "é€x😀" }))).toEqual({ kind: "matched" });
    expect(f.run(event({ name: "e€x😀" }))).toEqual({ kind: "filtered" });
  });
});

describe("bounds: a hostile expression is refused at apply time or fails its own event", () => {
  it("the largest allowed expression compiles; one character more is refused", () => {
    const head = 'data.s == "';
    const largest = `${head}${"x".repeat(FILTER_MAX_LENGTH - head.length - 1)}"`;
    expect(largest).toHaveLength(FILTER_MAX_LENGTH);
    expect(compiled(largest).run(event({ s: "x" }))).toEqual({ kind: "filtered" });
    expect(refusal(`${largest} `)).toBe(`is ${FILTER_MAX_LENGTH + 1} characters long; at most ${FILTER_MAX_LENGTH}`);
  });

  it("deep nesting is refused, not a stack overflow", () => {
    const depth = (FILTER_MAX_LENGTH - 4) / 2;
    expect(refusal(`${"(".repeat(depth)}true${")".repeat(depth)}`)).toMatch(/nests deeper than|does not parse/);
    // Negations the parser folds compile to a small expression: no stack overflow either way.
    const nots = compileFilter(`${"!".repeat(FILTER_MAX_LENGTH - 4)}true`);
    if (nots.ok) expect(nots.filter.run(event({})).kind).toMatch(/^(matched|filtered)$/);
    else expect(nots.message).toMatch(/nests deeper than|does not parse/);
    expect(refusal(`${"[".repeat(depth)}${"]".repeat(depth)}`)).toMatch(/nests deeper than|does not parse/);
  });

  it("many parts are refused", () => {
    const many = `data.a in [${Array.from({ length: 1500 }, () => "1").join(",")}]`;
    expect(many.length).toBeLessThanOrEqual(FILTER_MAX_LENGTH);
    expect(refusal(many)).toMatch(/^has more than \d+ parts/);
  });

  it("comprehensions nested three deep are refused, naming the position", () => {
    expect(refusal("data.l.all(a, data.l.all(b, data.l.all(c, a == b && b == c)))")).toMatch(/^nests more than 2 comprehensions .* at 1:\d+$/);
    expect(compiled("data.l.all(a, data.l.exists(b, a == b))").run(event({ l: [1, 2] }))).toEqual({ kind: "matched" });
  });

  it("a regex that backtracks for ever in JavaScript is linear here (RE2)", () => {
    const f = compiled('data.s.matches("^(a+)+$")');
    expect(f.run(event({ s: `${"a".repeat(100_000)}!` }))).toEqual({ kind: "filtered" });
    expect(f.run(event({ s: "aaaa" }))).toEqual({ kind: "matched" });
    // A pattern RE2 refuses fails its own event with a message.
    expect(compiled('data.s.matches("(?<=a)b")').run(event({ s: "ab" }))).toMatchObject({ kind: "error" });
  });

  it("an evaluation over the cost budget fails its own event without running: nested loops over a big list, big strings in a loop", () => {
    const items = Array.from({ length: 10_000 }, (_, i) => ({ sku: `sku-${i}` }));
    const nested = compiled("data.items.all(a, data.items.exists(b, b.sku == a.sku))");
    const r = nested.run(event({ items }));
    expect(r).toMatchObject({ kind: "error", reason: "cost" });
    expect(r.kind === "error" && r.message).toContain(`budget of ${FILTER_COST_BUDGET}`);
    // The same filter on a small list runs.
    expect(nested.run(event({ items: items.slice(0, 10) }))).toEqual({ kind: "matched" });
    const big = "x".repeat(200_000);
    const concat = compiled("data.items.map(i, data.big + data.big + i.sku).size() > 0");
    expect(concat.run(event({ big, items: items.slice(0, 1000) }))).toMatchObject({ kind: "error", reason: "cost" });
  });

  it("the cost is an upper bound that grows with the data's shape, never with time", () => {
    fc.assert(
      fc.property(fc.nat(10_000), fc.nat(10_000), fc.nat(1_000_000), (a, b, s) => {
        const f = compiled("data.l.all(x, data.l.exists(y, x == y)) && data.s.contains('z')");
        const small = f.cost({ maxElements: Math.min(a, b), maxString: s });
        const large = f.cost({ maxElements: Math.max(a, b), maxString: s });
        expect(large).toBeGreaterThanOrEqual(small);
      }),
    );
  });

  it("whatever JSON the event carries, a run gives a result and never throws", () => {
    const filters = ["data.a.b > 1", "has(data.a) && data.a == 'x'", "data.l.exists(i, i == 1)", "size(data) > 0", "data.s.matches('^(a|b)*c$')"].map(compiled);
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), (data) => {
        for (const f of filters) expect(["matched", "filtered", "error"]).toContain(f.run(event(data)).kind);
      }),
      { numRuns: 300 },
    );
  });
});

describe("dataShape", () => {
  it("the longest list or map and the longest string or key, without recursion", () => {
    expect(dataShape({ a: [1, 2, 3], bb: "hello" })).toEqual({ maxElements: 3, maxString: 5 });
    let deep: unknown = "leaf";
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(dataShape(deep)).toEqual({ maxElements: 1, maxString: 4 });
  });
});

describe("applyFilter", () => {
  it("no filter matches; a filter that does not compile is invalid, with the field named", () => {
    expect(applyFilter(undefined, event({}))).toEqual({ kind: "matched" });
    expect(applyFilter("data.a >", event({}))).toMatchObject({ kind: "invalid", message: expect.stringMatching(/^spec\.filter does not parse/) });
  });
});

describe("rememberedBySource", () => {
  it("compiles a source once while it is among the most recently used, and forgets the least recently used past its bound", () => {
    const calls: string[] = [];
    const get = rememberedBySource((s: string) => (calls.push(s), s.length));
    expect([get("a"), get("a"), get("bb")]).toEqual([1, 1, 2]);
    expect(calls).toEqual(["a", "bb"]);
    for (let i = 0; i < 1024; i++) get(`x${i}`);
    get("a");
    expect(calls.filter((c) => c === "a")).toHaveLength(2);
  });
});
