import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import type { HooklineConsumer } from "../src/stream/consumers.js";
import { Rng } from "./lib/rng.js";
import { answered2xx, checkStream, STREAM_FAULT_KINDS, streamSchedule } from "./stream.js";

const event = (id: string, targets: string[], over: Record<string, unknown> = {}) => ({ id, ns: "ns", type: "order.paid", sha: `sha-${id}`, len: 100, kind: "plain", targets, acknowledged: true, publishAttempts: 1, ...over });
const req = (seq: string, endpoint: string, id: string, over: Record<string, unknown> = {}) => ({ receiver: "r0", seq, endpoint, wid: id, sha: `sha-${id}`, len: 100, utf8: true, status: 200, kind: "ok", fin: "finish", ...over });
const drained = (name: string, pending = 0, ackPending = 0): HooklineConsumer => ({ consumer: name, namespace: "ns", name, uid: "u", filterSubjects: [], pending, ackPending });
const check = (events: any[], requests: any[], dls: any[] = [], consumers = [drained("a")]) => checkStream(events, requests, dls, consumers, new Map()).map((v) => `${v.invariant} ${v.key}`);

describe("stream soak invariants", () => {
  it("holds when every event reached a 2xx or a dead letter at each target", () => {
    expect(check([event("e1", ["ns.a", "ns.b"]), event("e2", ["ns.a"])], [req("1", "ns.a", "e1", { status: 500 }), req("2", "ns.a", "e1"), req("3", "ns.b", "e1"), req("4", "ns.a", "e2", { status: 500 })], [{ ns: "ns", sub: "a", eventId: "e2", name: "dl" }])).toEqual([]);
  });

  it("S1: a target without a 2xx or a dead letter, a publish never acknowledged, a consumer not drained", () => {
    expect(check([event("e1", ["ns.a", "ns.b"])], [req("1", "ns.a", "e1"), req("2", "ns.b", "e1", { status: 503 })])).toEqual(["S1 e1"]);
    expect(check([event("e1", ["ns.a"], { acknowledged: false })], [])).toEqual(["S1 e1"]);
    expect(check([], [], [], [drained("a", 0, 1)])).toEqual(["S1 ns/a"]);
    // A 2xx whose response never went (slow headers cut by the sender's timeout) is not a delivery.
    expect(check([event("e1", ["ns.a"])], [req("1", "ns.a", "e1", { kind: "slowHeaders", fin: "close" })])).toEqual(["S1 e1"]);
  });

  it("S2: a body that is no event's, a wrong length, invalid UTF-8, a subscription that does not match", () => {
    expect(check([event("e1", ["ns.a"])], [req("1", "ns.a", "e1"), req("2", "ns.a", "e1", { sha: "other" })])).toEqual(["S2 e1"]);
    expect(check([event("e1", ["ns.a"])], [req("1", "ns.a", "e1", { len: 99 })])).toEqual(["S2 e1"]);
    expect(check([event("e1", ["ns.a"])], [req("1", "ns.a", "e1", { utf8: false })])).toEqual(["S2 e1"]);
    expect(check([event("e1", ["ns.a"])], [req("1", "ns.a", "e1"), req("2", "ns.z", "e1")])).toEqual(["S2 e1"]);
  });

  it("S3: a signature that does not verify over the webhook-id and body", () => {
    const body = Buffer.from('{"id":"e1"}');
    const wts = "1796172747";
    const wsig = new Webhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").sign("e1", new Date(Number(wts) * 1000), body.toString("utf8"));
    expect(check([event("e1", ["ns.a"], { body })], [req("1", "ns.a", "e1", { wts, wsig })])).toEqual([]);
    expect(check([event("e1", ["ns.a"], { body })], [req("1", "ns.a", "e1", { wts: "1796172748", wsig })])).toEqual(["S3 e1"]);
  });

  it("S3: an attempt with another webhook-id, a dead letter for no event", () => {
    expect(check([event("e1", ["ns.a"])], [req("1", "ns.a", "e1"), req("2", "ns.a", "e1", { wid: "e9" })])).toEqual(["S3 e1"]);
    expect(check([], [], [{ ns: "ns", sub: "a", eventId: "ghost", name: "dl" }])).toEqual(["S3 dl"]);
  });

  it("a 2xx counts when the response finished or its headers went at once", () => {
    expect(answered2xx({ status: 200, fin: "finish", kind: "ok" })).toBe(true);
    expect(answered2xx({ status: 200, fin: "close", kind: "huge" })).toBe(true);
    expect(answered2xx({ status: 200, fin: "close", kind: "slowHeaders" })).toBe(false);
    expect(answered2xx({ status: 500, fin: "finish", kind: "status" })).toBe(false);
  });

  it("quick schedule: each fault kind once, in the workload window, the same for the same seed", () => {
    const a = streamSchedule(new Rng(7), 40_000, true);
    expect(a.map((f) => f.kind).sort()).toEqual([...STREAM_FAULT_KINDS].sort());
    for (const f of a) {
      expect(f.at).toBeGreaterThan(0);
      expect(f.at).toBeLessThan(40_000);
    }
    expect(streamSchedule(new Rng(7), 40_000, true)).toEqual(a);
  });
});
