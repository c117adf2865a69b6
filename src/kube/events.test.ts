import { Writable } from "node:stream";
import { describe, expect, it, vi } from "vitest";
import { createLogger } from "../observability/logger.js";
import type { KubeClient } from "./client.js";
import { EVENT_BUDGET, EventRecorder } from "./events.js";
import type { ObjectRef } from "./types.js";

/** A client that takes every Event it is given, by namespace. */
function recording(): { client: KubeClient; written: Map<string, number> } {
  const written = new Map<string, number>();
  const client = {
    request: (req: { path: string }) => {
      const ns = /\/namespaces\/([^/]+)\//.exec(req.path)![1]!;
      written.set(ns, (written.get(ns) ?? 0) + 1);
      return Promise.resolve({});
    },
  } as unknown as KubeClient;
  return { client, written };
}

const ref = (namespace: string, name: string): ObjectRef => ({ apiVersion: "hookline.dev/v1alpha1", kind: "WebhookDelivery", namespace, name, uid: `uid-${name}` });

describe("EventRecorder's per-namespace budget", () => {
  it("one namespace flooding writes its burst, then its rate; another namespace's Events are all written", async () => {
    const { client, written } = recording();
    let now = 1_000_000;
    const dropped = new Map<string, number>();
    const rec = new EventRecorder(client, createLogger({ level: "silent" }), { component: "hookline", now: () => now, onDropped: (ns) => dropped.set(ns, (dropped.get(ns) ?? 0) + 1) });
    for (let i = 0; i < 5_000; i++) rec.record(ref("a", `d-${i}`), "Warning", "DeadLettered", `dead letter ${i}`);
    for (let i = 0; i < 50; i++) rec.record(ref("b", `d-${i}`), "Warning", "DeadLettered", `dead letter ${i}`);
    await rec.flush();
    expect(written.get("a")).toBe(EVENT_BUDGET.burst);
    expect(dropped.get("a")).toBe(5_000 - EVENT_BUDGET.burst);
    expect(written.get("b")).toBe(50);
    expect(dropped.has("b")).toBe(false);

    // Ten seconds on, A may write its rate for them, and no more.
    now += 10_000;
    for (let i = 5_000; i < 6_000; i++) rec.record(ref("a", `d-${i}`), "Warning", "DeadLettered", `dead letter ${i}`);
    await rec.flush();
    expect(written.get("a")).toBe(EVENT_BUDGET.burst + 10 * EVENT_BUDGET.perSecond);
  });

  it("a repeat folded by the dedupe window costs nothing; a dropped Event is written when it comes again with budget left", async () => {
    const { client, written } = recording();
    let now = 0;
    const rec = new EventRecorder(client, createLogger({ level: "silent" }), { component: "hookline", now: () => now, budget: { burst: 2, perSecond: 1 } });
    for (let i = 0; i < 10; i++) rec.record(ref("a", "same"), "Warning", "Retrying", "the same message");
    rec.record(ref("a", "other"), "Warning", "Retrying", "another");
    rec.record(ref("a", "third"), "Warning", "Retrying", "a third");
    await rec.flush();
    expect(written.get("a")).toBe(2); // "same" once, "other"; "third" dropped
    now += 1_000;
    rec.record(ref("a", "third"), "Warning", "Retrying", "a third");
    await rec.flush();
    expect(written.get("a")).toBe(3);
  });

  it("a namespace past its budget gets one events_dropped line a minute at most, with the count since the last", async () => {
    const { client } = recording();
    let now = 0;
    const lines: Array<Record<string, unknown>> = [];
    const destination = new Writable({ write: (chunk: Buffer, _enc, cb) => (lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>), cb()) });
    const rec = new EventRecorder(client, createLogger({ destination }), { component: "hookline", now: () => now, budget: { burst: 2, perSecond: 1 } });
    const dropLines = () => lines.filter((l) => l.msg === "events_dropped");
    for (let i = 0; i < 12; i++) rec.record(ref("a", `d-${i}`), "Warning", "DeadLettered", `dead letter ${i}`);
    await rec.flush();
    expect(dropLines()).toEqual([expect.objectContaining({ level: "warn", namespace: "a", dropped: 1, burst: 2, perSecond: 1 })]);
    // 30 s on the bucket is full again (2): 40 Events, 38 dropped, no line yet.
    now += 30_000;
    for (let i = 12; i < 52; i++) rec.record(ref("a", `d-${i}`), "Warning", "DeadLettered", `dead letter ${i}`);
    expect(dropLines()).toHaveLength(1);
    // A minute after the first line, the next drop writes the count since it: 9 + 38 + this one.
    now += 30_000;
    for (let i = 52; i < 60; i++) rec.record(ref("a", `d-${i}`), "Warning", "DeadLettered", `dead letter ${i}`);
    await rec.flush();
    expect(dropLines()).toHaveLength(2);
    expect(dropLines()[1]).toMatchObject({ namespace: "a", dropped: 9 + 38 + 1 });
  });

  it("one namespace's flood of distinct Events forgets its own dedupe keys, not another's", async () => {
    const { client, written } = recording();
    const now = 0;
    const rec = new EventRecorder(client, createLogger({ level: "silent" }), { component: "hookline", now: () => now, budget: { burst: 1e9, perSecond: 1 } });
    rec.record(ref("b", "x"), "Warning", "Retrying", "b's");
    rec.record(ref("a", "first"), "Warning", "Retrying", "a's first");
    for (let i = 0; i < 20_000; i++) rec.record(ref("a", `d-${i}`), "Warning", "Retrying", `flood ${i}`);
    await rec.flush();
    expect(written.get("a")).toBe(20_001);
    rec.record(ref("b", "x"), "Warning", "Retrying", "b's");
    rec.record(ref("a", "first"), "Warning", "Retrying", "a's first");
    await rec.flush();
    expect(written.get("b"), "B's repeat still folded").toBe(1);
    expect(written.get("a"), "A's first key was forgotten: its own flood pushed it out").toBe(20_002);
  });

  it("many namespaces with budget spent are not scanned at every Event", async () => {
    const { client, written } = recording();
    const rec = new EventRecorder(client, createLogger({ level: "silent" }), { component: "hookline", now: () => 0 });
    const iterations = vi.spyOn(Map.prototype, Symbol.iterator);
    try {
      // 30,000 namespaces, each one Event: none is back to a full bucket, so none is forgotten.
      for (let i = 0; i < 30_000; i++) rec.record(ref(`ns-${i}`, "d"), "Warning", "Retrying", "one");
      expect(iterations.mock.calls.length, "Map scans while recording 30,000 Events").toBeLessThan(100);
    } finally {
      iterations.mockRestore();
    }
    await rec.flush();
    expect(written.size).toBe(30_000);
  });
});
