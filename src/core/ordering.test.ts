import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compareNatural, laneOrder, orderGate, streamSequenceOf, type LaneMember } from "./ordering.js";

const m = (name: string, createdAt = 0): LaneMember => ({ key: `ns/${name}`, name, createdAt });

describe("lane order", () => {
  it("oldest creation first, then names with numbers compared as numbers", () => {
    const members = [m("evt-10"), m("evt-9"), m("evt-2", 1_000), m("a", 5), m("evt-1"), m("evt-09")];
    expect(members.sort(laneOrder).map((x) => x.name)).toEqual(["evt-1", "evt-09", "evt-9", "evt-10", "a", "evt-2"]);
  });

  it("stream mode: within one second, the message's sequence decides, not the event id (an id may sort either way)", () => {
    const s = (name: string, seq: number, createdAt = 7_000): LaneMember => ({ ...m(name, createdAt), seq });
    expect([s("zeta", 3), s("alpha", 12), s("mid", 5)].sort(laneOrder).map((x) => x.name)).toEqual(["zeta", "mid", "alpha"]);
    // An older second still goes first (made one at a time, the sequence never says otherwise).
    expect([s("late", 2, 8_000), s("early", 9, 7_000)].sort(laneOrder).map((x) => x.name)).toEqual(["early", "late"]);
  });

  it("stream mode: made one at a time in publish order, a lane sorts in publish order whatever the ids (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.string({ minLength: 1, maxLength: 12 }), fc.nat(3)), { minLength: 1, maxLength: 40 }), (evts) => {
        // Creation times never go back as the sequence grows (second granularity, as the API server keeps them).
        let t = 1_000;
        const members = evts.map(([id, gap], i) => ({ key: `ns/${i}`, name: `${id}.${i}`, createdAt: (t += gap * 1_000), seq: 100 + i }));
        const shuffled = [...members].reverse();
        expect(shuffled.sort(laneOrder).map((x) => x.seq)).toEqual(members.map((x) => x.seq));
      }),
    );
  });

  it("streamSequenceOf reads <stream>/<sequence>, and nothing else", () => {
    expect(streamSequenceOf("HOOKLINE_shop/42")).toBe(42);
    expect(streamSequenceOf(undefined)).toBeUndefined();
    expect(streamSequenceOf("HOOKLINE_shop/")).toBeUndefined();
    expect(streamSequenceOf("HOOKLINE_shop/4x")).toBeUndefined();
    expect(streamSequenceOf("9".repeat(40))).toBeUndefined();
  });

  it("compareNatural", () => {
    expect(compareNatural("evt-9", "evt-10")).toBeLessThan(0);
    expect(compareNatural("evt-10", "evt-9")).toBeGreaterThan(0);
    expect(compareNatural("a2b", "a2c")).toBeLessThan(0);
    expect(compareNatural("a", "a1")).toBeLessThan(0);
    expect(compareNatural("a007", "a7")).toBe(0);
    expect(compareNatural("order-99999999999999999999", "order-100000000000000000000")).toBeLessThan(0);
    // A total order: the plain name breaks what compareNatural calls equal.
    expect(laneOrder(m("a007"), m("a7"))).not.toBe(0);
  });
});

describe("orderGate", () => {
  const base = { key: "$.customer.id", value: '"acme"', head: true, inFlight: undefined, deadLetters: [] };

  it("lets the head go when nothing of its key is in flight or dead-lettered", () => {
    expect(orderGate(base)).toBeUndefined();
    expect(orderGate(undefined)).toBeUndefined();
  });

  it("holds the others, naming the key", () => {
    expect(orderGate({ ...base, head: false })).toEqual({ reason: "OrderingWait", message: expect.stringContaining('ordering key $.customer.id = "acme"') });
    expect(orderGate({ ...base, inFlight: "evt-1" })?.reason).toBe("OrderingWait");
  });

  it("a dead letter of the key blocks everyone, the head too, naming it", () => {
    const hold = orderGate({ ...base, deadLetters: ["evt-7", "evt-8"] });
    expect(hold?.reason).toBe("OrderingBlocked");
    expect(hold?.message).toContain("dead letter evt-7 (and 1 more)");
    expect(hold?.message).toContain('$.customer.id = "acme"');
    expect(orderGate({ ...base, head: false, deadLetters: ["evt-7"] })?.reason).toBe("OrderingBlocked");
  });
});
