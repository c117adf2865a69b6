// The operator-wide request slots: what waits for a slot is woken when one is released.
import { describe, expect, it } from "vitest";
import { GlobalSlots } from "./global-slots.js";

describe("GlobalSlots.onFree", () => {
  it("calls a listener once, at the next release, and not again unless added again", () => {
    const slots = new GlobalSlots(2);
    slots.take("a");
    slots.take("b");
    expect(slots.mayTake("c", "c/x")).toBe(false);
    const heard: string[] = [];
    const listener = () => heard.push("woken");
    slots.onFree(listener);
    // Added twice, registered once.
    slots.onFree(listener);
    expect(heard).toEqual([]);
    slots.release("a");
    expect(heard).toEqual(["woken"]);
    // The slot it was woken for is free for it.
    expect(slots.mayTake("c", "c/x")).toBe(true);
    slots.take("c");
    slots.release("b");
    expect(heard).toEqual(["woken"]);
  });

  it("a listener taken back is never called; the others still are", () => {
    const slots = new GlobalSlots(1);
    slots.take("a");
    let gone = 0;
    let kept = 0;
    const goneListener = () => gone++;
    slots.onFree(goneListener);
    slots.onFree(() => kept++);
    slots.offFree(goneListener);
    slots.release("a");
    expect({ gone, kept }).toEqual({ gone: 0, kept: 1 });
  });

  it("a listener that registers itself again while called waits for the release after", () => {
    const slots = new GlobalSlots(1);
    let calls = 0;
    const again = () => {
      calls++;
      slots.onFree(again);
    };
    slots.take("a");
    slots.onFree(again);
    slots.release("a");
    expect(calls).toBe(1);
    slots.take("a");
    slots.release("a");
    expect(calls).toBe(2);
  });
});

describe("GlobalSlots: slots kept for the other namespaces that have subscriptions or had work lately", () => {
  const keys = (ns: string, n: number, from = 0) => Array.from({ length: n }, (_, i) => `${ns}/d-${from + i}`);
  /** Takes slots for `ns` while mayTake allows, up to `n`; how many it took. */
  const fill = (slots: GlobalSlots, ns: string, n: number, from = 0): number => {
    let took = 0;
    for (const k of keys(ns, n, from)) {
      if (!slots.mayTake(ns, k)) break;
      slots.take(ns, k);
      took++;
    }
    return took;
  };
  /** Slots whose clock the test moves, after namespace "ok" took and released one at time 0. */
  const afterOkWorked = (max: number) => {
    const clock = { now: 0 };
    const slots = new GlobalSlots(max, undefined, () => clock.now);
    slots.take("ok", "ok/a");
    slots.release("ok");
    return { slots, clock };
  };

  it("a namespace alone since the operator started may hold every slot", () => {
    const slots = new GlobalSlots(32, undefined, () => 0);
    expect(fill(slots, "hang", 40)).toBe(32);
  });

  it("with another namespace active within the last minute, one namespace holds at most 7/8 of the slots: the other gets one at once, though the first's requests hang", () => {
    // ok delivered a moment ago and holds nothing now.
    const { slots, clock } = afterOkWorked(32);
    clock.now += 20_000;
    expect(fill(slots, "hang", 40)).toBe(28);
    expect(slots.mayTake("ok", "ok/b")).toBe(true);
    // Of the 4 kept, ok may take them all (it is below its share).
    expect(fill(slots, "ok", 10, 10)).toBe(4);
    expect(slots.inFlight).toBe(32);
  });

  it("a parked delivery of a namespace at that limit is not woken for a free slot; another namespace's is", () => {
    const { slots } = afterOkWorked(8);
    expect(fill(slots, "hang", 10)).toBe(7);
    const woken: string[] = [];
    slots.park("hang", "hang/d-9", () => woken.push("hang/d-9"));
    slots.wakeNext();
    expect(woken).toEqual([]);
    slots.park("ok", "ok/b", () => woken.push("ok/b"));
    expect(woken).toEqual(["ok/b"]);
  });

  it("a minute after the other namespace's last work, the limit is gone", () => {
    const { slots, clock } = afterOkWorked(32);
    clock.now += 61_000;
    expect(fill(slots, "hang", 40)).toBe(32);
  });

  it("with another namespace that has subscriptions, the limit holds though that namespace never had work", () => {
    // ok has subscriptions and has not delivered since the operator started (or for an hour).
    const slots = new GlobalSlots(32, undefined, () => 0, () => 2);
    expect(fill(slots, "hang", 40)).toBe(28);
    expect(slots.mayTake("ok", "ok/a")).toBe(true);
    const woken: string[] = [];
    slots.park("hang", "hang/d-99", () => woken.push("hang/d-99"));
    slots.wakeNext();
    expect(woken).toEqual([]);
  });

  it("with one namespace that has subscriptions and no other at work, it may hold every slot", () => {
    const slots = new GlobalSlots(32, undefined, () => 0, () => 1);
    expect(fill(slots, "hang", 40)).toBe(32);
  });

  it("with fewer than 8 slots in all, nothing is kept back (an eighth is not one slot)", () => {
    for (const max of [1, 2, 7]) {
      const { slots } = afterOkWorked(max);
      expect(fill(slots, "hang", 8)).toBe(max);
    }
  });
});
