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

  it("never holds a new object back for a write to an old one of the same name (the final write's answer came after the watch dropped it)", () => {
    const e = new Expectations(60_000, () => 0);
    // A delivery's final status write: the field-selected watch drops it before the answer comes.
    expect(e.observe("shop/evt-1", undefined)).toBe(false);
    e.expect("shop/evt-1", "12", "uid-old");
    // The namespace is deleted (the finished object leaves no event here) and a delivery of the same name created.
    expect(e.observe("shop/evt-1", "20", "uid-new")).toBe(false);
    expect(e.check("shop/evt-1", "20", "uid-new")).toBe("ok");
    expect(e.size).toBe(0);
    // Checked before any event (a reconcile of the key queued otherwise): the same.
    e.expect("shop/evt-2", "12", "uid-old");
    expect(e.check("shop/evt-2", "21", "uid-new")).toBe("ok");
    expect(e.size).toBe(0);
    // The same object still waits for our write.
    e.expect("shop/evt-3", "12", "uid-3");
    expect(e.check("shop/evt-3", "11", "uid-3")).toBe("wait");
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

  it("a relist that started after the write meets its expectation, and names the keys that waited", () => {
    let now = 1_000;
    const e = new Expectations(60_000, () => now);
    e.expect("ns/a", "7"); // written at 1000, the watch then missed it
    now = 1_500;
    e.expect("ns/b", "9"); // written at 1500
    expect(e.check("ns/a", "5")).toBe("wait"); // a reconcile waited for ns/a
    // A relist that started at 1200 shows ns/a's write (or newer); not ns/b's.
    expect(e.relisted(1_200)).toEqual(["ns/a"]);
    expect(e.check("ns/a", "12")).toBe("ok"); // "12": a newer version, the relist skipped "7"
    expect(e.check("ns/b", "8")).toBe("wait");
    expect(e.relisted(1_600)).toEqual(["ns/b"]);
    expect(e.size).toBe(0);
  });

  it("a relist meets expectations nobody waited for without naming them", () => {
    const e = new Expectations(60_000, () => 10);
    e.expect("ns/a", "7");
    expect(e.relisted(20)).toEqual([]);
    expect(e.check("ns/a", "3")).toBe("ok");
  });

  it("untilExpiry: when a waiting reconcile looks again at the latest", () => {
    let now = 0;
    const e = new Expectations(1_000, () => now);
    expect(e.untilExpiry("ns/a")).toBe(0);
    e.expect("ns/a", "7");
    now = 400;
    expect(e.untilExpiry("ns/a")).toBe(600);
    now = 2_000;
    expect(e.untilExpiry("ns/a")).toBe(0);
  });
});
