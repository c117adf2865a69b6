// spec.transform: the body a CEL expression builds, as JSON, within the filter's bounds.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compileTransform, toJson, TRANSFORM_MAX_BYTES, type CompiledTransform } from "./transform.js";

const event = (data: unknown) => ({ id: "evt-1", type: "order.paid", namespace: "shop", data });
const compiled = (source: string): CompiledTransform => {
  const c = compileTransform(source);
  if (!c.ok) throw new Error(`expected ${source} to compile: ${c.message}`);
  return c.transform;
};

describe("compileTransform and run", () => {
  it("builds a Slack-style body from the event", () => {
    const t = compiled('{"text": "Order " + string(data.order) + " paid: " + string(data.amount.value) + " " + data.amount.currency, "id": event.id}');
    expect(t.run(event({ order: 1001, amount: { value: 4200, currency: "EUR" } }))).toEqual({ ok: true, body: '{"text":"Order 1001 paid: 4200 EUR","id":"evt-1"}' });
  });

  it("writes every CEL value JSON can hold: nested maps and lists from the data, ints exactly, uints, bytes as base64, non-ASCII text", () => {
    const t = compiled('{"n": 9007199254740993, "u": 3u, "d": 1.5, "b": b"hi", "l": [1, "é€😀", true, null], "m": data.m, "keys": {1: "a", true: "b"}}');
    const r = t.run(event({ m: { x: [1, { y: "z" }] } }));
    expect(r).toEqual({ ok: true, body: '{"n":9007199254740993,"u":3,"d":1.5,"b":"aGk=","l":[1,"é€😀",true,null],"m":{"x":[1,{"y":"z"}]},"keys":{"1":"a","true":"b"}}' });
  });

  it("fails the event, naming why, on a missing field, a value JSON cannot hold, a body over 256 KiB, or a cost over the budget", () => {
    expect(compiled("{'a': data.nope}").run(event({}))).toMatchObject({ ok: false, message: expect.stringContaining("nope") });
    expect(compiled("{'t': type(data)}").run(event({}))).toMatchObject({ ok: false, message: expect.stringContaining("JSON cannot") });
    expect(compiled("{'d': 1.0 / 0.0}").run(event({}))).toMatchObject({ ok: false, message: expect.stringContaining("Infinity") });
    const big = "x".repeat(100_000);
    expect(compiled("{'a': data.s + data.s + data.s}").run(event({ s: big }))).toEqual({ ok: false, message: `the body it built is ${300_000 + 8} bytes; at most ${TRANSFORM_MAX_BYTES}` });
    const items = Array.from({ length: 5_000 }, (_, i) => i);
    expect(compiled("data.l.map(a, data.l.filter(b, b == a))").run(event({ l: items }))).toMatchObject({ ok: false, message: expect.stringContaining("over the budget") });
  });

  it("refuses at compile time what a filter refuses", () => {
    expect(compileTransform("{'a': }")).toMatchObject({ ok: false, message: expect.stringMatching(/^does not parse: at 1:\d+/) });
    expect(compileTransform("{'a': payload}")).toMatchObject({ ok: false, message: expect.stringContaining('uses "payload"') });
    expect(compileTransform(" ")).toEqual({ ok: false, message: "is empty: remove spec.transform to send the event as it is" });
  });
});

describe("toJson", () => {
  it("any JSON the data holds comes out as the same JSON", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 5 }), (v) => {
        const normal = JSON.parse(JSON.stringify(v)) as unknown; // -0 becomes 0, as in JSON text
        expect(JSON.parse(toJson(normal))).toEqual(normal);
      }),
      { numRuns: 300 },
    );
  });
});
