import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import type { HooklineConsumer } from "../src/jetstream/consumers.js";
import { Rng } from "./lib/rng.js";
import { acknowledgedDuring, answered2xx, apiServerJson, checkStream, CLUSTER_FAULT_KINDS, duplicatesByFault, DUPLICATE_WINDOW_MS, orderedBehaviour, orderViolations, STREAM_FAULT_KINDS, streamSchedule, type FaultRecord } from "./stream.js";

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

  it("S6: per type at the ordered endpoint, every request of an event before the first of the next one stored; other types and endpoints free", () => {
    const o = (id: string, seq: number, type = "order.paid") => event(id, ["ns.o", "ns.a"], { seq, type });
    const evs = [o("e1", 1), o("e2", 2), o("e3", 3), o("x1", 4, "user.created")];
    const at = (seq: string, endpoint: string, id: string, t: number) => req(seq, endpoint, id, { t });
    // e1 twice (a retry), then e2, e3; x1 (another type) in between; the unordered endpoint in any order.
    const fine = [at("1", "ns.o", "e1", 10), at("2", "ns.o", "x1", 11), at("3", "ns.o", "e1", 20), at("4", "ns.o", "e2", 30), at("5", "ns.o", "e3", 40), at("6", "ns.a", "e3", 1), at("7", "ns.a", "e1", 2)];
    expect(orderViolations(evs, fine, ["ns.o"])).toEqual([]);
    // e2 started before e1's retry: out of order (stream order, not the ids').
    const v = orderViolations(evs, [...fine, at("8", "ns.o", "e1", 35)], ["ns.o"]);
    expect(v.map((x) => `${x.invariant} ${x.key}`)).toEqual(["S6 e2"]);
    expect(v[0]!.message).toMatch(/seq 1 < 2/);
    // Stored in the other order: then e2 must go first.
    expect(orderViolations([o("e1", 2), o("e2", 1)], [at("1", "ns.o", "e1", 10), at("2", "ns.o", "e2", 20)], ["ns.o"]).map((x) => x.key)).toEqual(["e1"]);
  });

  it("S2 at the ordered endpoint: held against the data as the API server keeps it (keys in byte order), not the published bytes", () => {
    expect(JSON.stringify(apiServerJson({ z: 1, a: { y: [{ b: 2, a: 1 }], "é": 0, e: 0 }, "2": "x" }))).toBe('{"2":"x","a":{"e":0,"y":[{"a":1,"b":2}],"é":0},"z":1}');
    const viaApi = { sha: "sha-api", len: 100, body: Buffer.from("x") };
    const e = event("e1", ["ns.o", "ns.a"], { ordered: viaApi });
    const at = (seq: string, endpoint: string, sha: string) => req(seq, endpoint, "e1", { sha });
    const s2 = (requests: any[]) => checkStream([e], requests, [], [drained("a")], new Map(), undefined, ["ns.o"]).filter((v) => v.invariant === "S2").map((v) => `${v.invariant} ${v.key}`);
    expect(s2([at("1", "ns.o", "sha-api"), at("2", "ns.a", "sha-e1")])).toEqual([]);
    // The published bytes at the ordered endpoint, or the API server's at another: neither is the event's there.
    expect(s2([at("1", "ns.o", "sha-e1")])).toEqual(["S2 e1"]);
    expect(s2([at("1", "ns.a", "sha-api")])).toEqual(["S2 e1"]);
  });

  it("S6: the ordered endpoint gets no permanent failure (a 503 instead), other behaviours unchanged", () => {
    expect(orderedBehaviour({ kind: "status", status: 410 })).toEqual({ kind: "status", status: 503 });
    expect(orderedBehaviour({ kind: "redirect", status: 301 })).toEqual({ kind: "status", status: 503 });
    expect(orderedBehaviour({ kind: "status", status: 500 })).toEqual({ kind: "status", status: 500 });
    expect(orderedBehaviour({ kind: "hang" })).toEqual({ kind: "hang" });
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

  it("a cluster's quick schedule: its four faults once each; longer runs draw the operators' and receivers' faults too", () => {
    const quick = streamSchedule(new Rng(7), 60_000, true, 3);
    expect(quick.map((f) => f.kind).sort()).toEqual([...CLUSTER_FAULT_KINDS].sort());
    const long = streamSchedule(new Rng(7), 30 * 60_000, false, 3);
    expect(new Set(long.map((f) => f.kind))).toEqual(new Set([...CLUSTER_FAULT_KINDS, "operator-sigkill", "operator-sigterm", "receiver-restart"]));
    // One server: the kinds as before.
    expect(streamSchedule(new Rng(7), 40_000, true, 1).map((f) => f.kind).sort()).toEqual([...STREAM_FAULT_KINDS].sort());
  });
});

describe("stream soak: faults, what they acknowledged and what they sent twice", () => {
  const fault = (kind: FaultRecord["kind"], start: number, end: number, affected = 1): FaultRecord => ({ kind, target: "hookline-local-2", start, end, affected });
  const ok = (seq: string, endpoint: string, id: string, t: number) => req(seq, endpoint, id, { t });

  it("a duplicate counts against the latest fault under way or ended within the window, else against none", () => {
    const faults = [fault("nats-leader-sigkill", 1_000, 5_000), fault("nats-partition", 20_000, 30_000)];
    const requests = [
      // e1: second 2xx after the first fault ended, within DUPLICATE_WINDOW_MS, before the second began.
      ok("1", "ns.a", "e1", 2_000),
      ok("2", "ns.a", "e1", 15_000),
      // e2: second 2xx during the second fault (the first's window still open): the later fault.
      ok("3", "ns.a", "e2", 19_000),
      ok("4", "ns.a", "e2", 21_000),
      // e3: after every window: no fault.
      ok("5", "ns.a", "e3", 100_000),
      ok("6", "ns.a", "e3", 30_000 + DUPLICATE_WINDOW_MS + 1),
      // e4: one 2xx after a 500, not a duplicate; e5 at two subscriptions once each, not a duplicate.
      req("7", "ns.a", "e4", { t: 2_000, status: 500 }),
      ok("8", "ns.a", "e4", 3_000),
      ok("9", "ns.a", "e5", 3_000),
      ok("10", "ns.b", "e5", 3_000),
    ];
    expect(duplicatesByFault(faults, requests)).toEqual({ perFault: [1, 1], none: 1 });
  });

  it("S4: an event acknowledged during a NATS fault that never reached a subscription; not for other faults' or other times' events", () => {
    const faults = { records: [fault("nats-leader-sigkill", 1_000, 5_000), fault("operator-sigkill", 10_000, 12_000)], bound: () => 10 };
    const events = [event("e1", ["ns.a"], { ackedAt: 2_000 }), event("e2", ["ns.a"], { ackedAt: 11_000 }), event("e3", ["ns.a"], { ackedAt: 20_000 }), event("e4", ["ns.a"], { ackedAt: 3_000 })];
    const got = checkStream(events as any, [req("1", "ns.a", "e4")] as any, [], [drained("a")], new Map(), faults).map((v) => `${v.invariant} ${v.key}`);
    expect(got.filter((v) => v.startsWith("S4"))).toEqual(["S4 e1"]);
    expect(got.filter((v) => v.startsWith("S1")).sort()).toEqual(["S1 e1", "S1 e2", "S1 e3"]);
    expect(acknowledgedDuring(events as any, faults.records[0]!).map((e) => e.id)).toEqual(["e1", "e4"]);
  });

  it("S5: more events sent twice after a fault than its bound", () => {
    const records = [fault("nats-rolling-restart", 1_000, 5_000, 3)];
    const requests = ["e1", "e2", "e3"].flatMap((id, i) => [ok(`${i}a`, "ns.a", id, 2_000), ok(`${i}b`, "ns.a", id, 3_000)]);
    const events = ["e1", "e2", "e3"].map((id) => event(id, ["ns.a"], { ackedAt: 500 }));
    const s5 = (bound: number) => checkStream(events as any, requests as any, [], [drained("a")], new Map(), { records, bound: (f) => bound * f.affected }).filter((v) => v.invariant === "S5");
    expect(s5(1)).toEqual([]);
    expect(s5(0.5).map((v) => v.message)).toEqual(["3 events delivered twice after it, above the bound of 1.5"]);
  });
});
