import { describe, expect, it } from "vitest";
import { Expectations } from "./expectations.js";

describe("Expectations", () => {
  it("never waits for a version the cache already delivered (the write's answer came after its watch event and a newer one)", () => {
    const e = new Expectations(60_000, () => 0);
    expect(e.observe("ns/a", "12")).toBe(false); // our write, seen before its answer arrived
    expect(e.observe("ns/a", "13")).toBe(false); // someone else's change (an annotation)
    e.expect("ns/a", "12"); // the answer of our write, late
    expect(e.check("ns/a", "13")).toBe("ok");
    expect(e.size).toBe(0);
  });

  it("makes a key wait until the cache shows the version we wrote", () => {
    const now = 0;
    const e = new Expectations(1000, () => now);
    e.expect("ns/a", "12");
    expect(e.check("ns/a", "11")).toBe("wait");
    e.observe("ns/a", "11");
    expect(e.check("ns/a", "11")).toBe("wait");
    e.observe("ns/a", "12");
    expect(e.check("ns/a", "12")).toBe("ok");
    expect(e.size).toBe(0);
  });

  it("says our own write needs no reconcile, unless a reconcile waited for it", () => {
    const e = new Expectations();
    e.expect("ns/a", "2");
    expect(e.observe("ns/a", "2")).toBe(true);
    e.expect("ns/b", "2");
    expect(e.check("ns/b", "1")).toBe("wait");
    expect(e.observe("ns/b", "2")).toBe(false);
  });

  it("is satisfied when the object leaves the cache", () => {
    const e = new Expectations();
    e.expect("ns/a", "5");
    e.observe("ns/a", undefined);
    expect(e.check("ns/a", undefined)).toBe("ok");
  });

  it("reports expiry so the caller reads the object fresh", () => {
    let now = 0;
    const e = new Expectations(1000, () => now);
    e.expect("ns/a", "7");
    now = 1001;
    expect(e.check("ns/a", "6")).toBe("expired");
    expect(e.check("ns/a", "6")).toBe("ok");
  });

  it("compares resourceVersions for equality only (they are opaque)", () => {
    const e = new Expectations();
    e.expect("ns/a", "100");
    // "99" < "100" numerically but the cache must still wait; "101" is not our write either.
    expect(e.check("ns/a", "101")).toBe("wait");
  });

  it("keeps keys apart", () => {
    const e = new Expectations();
    e.expect("ns/a", "1");
    expect(e.check("ns/b", "0")).toBe("ok");
  });
});
