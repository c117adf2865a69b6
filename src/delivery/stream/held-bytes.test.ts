// The held-bytes budget: what a replica's subscriptions hold never passes it, idle shares are
// lent, and one subscription holding everything cannot starve another's pulls (it sheds what it
// has not started, down to its share), with shares per namespace first.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { HeldBudget, MESSAGE_ROOM_BYTES, type HeldAccount } from "./held-bytes.js";

const ROOM = MESSAGE_ROOM_BYTES;

/** A subscription's side: what it holds (message sizes, not started), and how it sheds. */
class Sub {
  readonly held: number[] = [];
  wakes = 0;
  sheds = 0;
  readonly account: HeldAccount;
  constructor(budget: HeldBudget, namespace: string) {
    this.account = budget.account(namespace, {
      wake: () => this.wakes++,
      shed: (bytes) => {
        this.sheds++;
        let freed = 0;
        while (freed < bytes && this.held.length > 0) {
          const size = this.held.pop()!;
          freed += size;
          this.account.give(size);
        }
        return freed;
      },
    });
  }

  /** Pulls as many messages costing `size` as its room allows (at most `max`), each reserved as the largest; returns how many arrived. */
  pull(size: number, max = Infinity): number {
    const n = Math.min(max, Math.floor(this.account.room() / ROOM));
    if (n < 1) return 0;
    this.account.reserve(n * ROOM);
    for (let i = 0; i < n; i++) {
      this.account.arrived(size);
      this.held.push(size);
    }
    this.account.unreserve(n * ROOM - n * size);
    return n;
  }
}

describe("HeldBudget", () => {
  it("refuses a budget that cannot hold one message", () => {
    expect(() => new HeldBudget(ROOM - 1)).toThrow(/cannot hold the largest message/);
  });

  it("lends idle shares: one subscription alone may fill the budget", () => {
    const budget = new HeldBudget(10 * ROOM);
    const a = new Sub(budget, "shop");
    expect(a.pull(1024)).toBe(10);
    // Small messages give back most of what was reserved for them: room again.
    expect(a.account.bytes).toBe(10 * 1024);
    expect(budget.heldBy("shop")).toBe(10 * 1024);
  });

  it("a subscription that holds everything sheds down to its share when another waits, and takes no more meanwhile", () => {
    const budget = new HeldBudget(10 * ROOM);
    const flood = new Sub(budget, "flood");
    const quiet = new Sub(budget, "quiet");
    // The flood fills the budget with the largest messages (parked: nothing finishes).
    expect(flood.pull(ROOM)).toBe(10);
    expect(budget.used).toBe(10 * ROOM);
    // The quiet one finds no room, but it is below its share: the flood hands back what it holds above its own.
    expect(quiet.pull(ROOM)).toBe(0);
    expect(flood.sheds).toBe(1);
    expect(flood.held).toHaveLength(9);
    expect(quiet.wakes).toBeGreaterThan(0);
    // Woken, it gets room; the flood, above its share while the quiet one waits, gets none.
    expect(quiet.pull(ROOM, 1)).toBe(1);
    expect(quiet.pull(ROOM)).toBe(0);
    expect(flood.pull(ROOM)).toBe(0);
    // Shed by shed, both end at their share of the budget: half each.
    for (let i = 0; i < 10; i++) quiet.pull(ROOM, 1);
    expect(flood.held).toHaveLength(5);
    expect(quiet.held).toHaveLength(5);
    expect(budget.used).toBeLessThanOrEqual(10 * ROOM);
  });

  it("shares by namespace first: a namespace with three subscriptions gets as much as one with one", () => {
    const budget = new HeldBudget(12 * ROOM);
    const many = [new Sub(budget, "many"), new Sub(budget, "many"), new Sub(budget, "many")];
    const one = new Sub(budget, "one");
    for (let round = 0; round < 20; round++) {
      for (const s of [...many, one]) s.pull(ROOM, 1);
    }
    expect(one.held).toHaveLength(6);
    expect(many.map((s) => s.held.length)).toEqual([2, 2, 2]);
    expect(budget.share(one.account)).toBe(6 * ROOM);
    expect(budget.share(many[0]!.account)).toBe(2 * ROOM);
  });

  it("a waiting subscription that rests (paused, nothing to fetch) no longer holds the others back", () => {
    const budget = new HeldBudget(4 * ROOM);
    const a = new Sub(budget, "a");
    const b = new Sub(budget, "b");
    a.pull(ROOM, 2);
    b.pull(ROOM, 2);
    expect(a.pull(ROOM)).toBe(0); // waits
    a.account.rest();
    b.held.splice(0).forEach((size) => b.account.give(size));
    expect(b.pull(ROOM)).toBe(2);
  });

  it("a closed account gives everything back, reserved room included", () => {
    const budget = new HeldBudget(4 * ROOM);
    const a = new Sub(budget, "a");
    a.account.reserve(2 * ROOM);
    a.account.arrived(100);
    a.account.close();
    expect(budget.used).toBe(0);
    expect(budget.heldBy("a")).toBe(0);
  });

  it("reports each namespace's held bytes (messages that arrived, not reserved room)", () => {
    const seen = new Map<string, number>();
    const budget = new HeldBudget(8 * ROOM, (ns, bytes) => seen.set(ns, bytes));
    const a = new Sub(budget, "a");
    a.account.reserve(3 * ROOM);
    expect(seen.get("a")).toBe(0);
    a.account.arrived(5000);
    a.account.unreserve(2 * ROOM);
    expect(seen.get("a")).toBe(5000);
    a.account.give(5000);
    expect(seen.get("a")).toBe(0);
  });
});

describe("HeldBudget (properties)", () => {
  const op = fc.oneof(
    fc.record({ kind: fc.constant("pull" as const), sub: fc.nat(5), size: fc.integer({ min: 1, max: ROOM }), max: fc.integer({ min: 1, max: 50 }) }),
    fc.record({ kind: fc.constant("finish" as const), sub: fc.nat(5), count: fc.integer({ min: 1, max: 20 }) }),
    fc.record({ kind: fc.constant("rest" as const), sub: fc.nat(5) }),
  );

  it("never holds more than the budget, and never counts below zero", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 40 }), fc.array(op, { maxLength: 300 }), (rooms, ops) => {
        const budget = new HeldBudget(rooms * ROOM);
        const subs = Array.from({ length: 6 }, (_, i) => new Sub(budget, `ns-${i % 3}`));
        for (const o of ops) {
          const s = subs[o.sub]!;
          if (o.kind === "pull") s.pull(o.size, o.max);
          else if (o.kind === "rest") s.account.rest();
          else for (const size of s.held.splice(0, o.count)) s.account.give(size);
          expect(budget.used).toBeLessThanOrEqual(rooms * ROOM);
          for (const x of subs) expect(x.account.bytes).toBeGreaterThanOrEqual(0);
          expect(budget.used).toBe(subs.reduce((n, x) => n + x.held.reduce((m, b) => m + b, 0), 0));
        }
      }),
    );
  });

  it("a subscription below its share that asks for room gets it, at the latest once the others shed what they hold above theirs", () => {
    fc.assert(
      fc.property(fc.integer({ min: 4, max: 40 }), fc.array(op, { maxLength: 200 }), fc.nat(5), (rooms, ops, who) => {
        const budget = new HeldBudget(rooms * ROOM);
        const subs = Array.from({ length: 6 }, (_, i) => new Sub(budget, `ns-${i % 3}`));
        for (const o of ops) {
          const s = subs[o.sub]!;
          if (o.kind === "pull") s.pull(ROOM, o.max);
          else if (o.kind === "rest") s.account.rest();
          else for (const size of s.held.splice(0, o.count)) s.account.give(size);
        }
        const asker = subs[who]!;
        // Every other subscription holds only messages it has not started: all can be shed.
        const share = budget.share(asker.account);
        if (asker.account.bytes + ROOM > share) return;
        if (asker.pull(ROOM, 1) === 1) return;
        // Refused: the others were asked to shed; asked again, it gets room.
        expect(asker.pull(ROOM, 1)).toBe(1);
      }),
    );
  });
});
