import { describe, expect, it } from "vitest";
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
});
