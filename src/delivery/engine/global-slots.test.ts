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
