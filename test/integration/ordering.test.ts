// Ordered delivery per key (spec.ordering), against the real API server and the real operator:
// one delivery per key in flight, each key in creation order (names with numbers compared as
// numbers within the same second), other keys in parallel; a dead letter blocks its key (the
// waiting deliveries say so, naming the key and the dead letter; an Event on the subscription),
// also across an operator restart, until it is replayed; deliveries without a value at the key
// are not ordered; keys the API server refuses.
import { describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, kubectl, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, create, delivery, events, getObj, subscription, waitForPhase } from "../helpers/kube.js";
import { operatorFixture } from "../helpers/fixture.js";
import { startOperator } from "../helpers/operator.js";
import { Receiver, type ReceivedRequest } from "../helpers/receiver.js";

const dataOf = (q: ReceivedRequest) => (JSON.parse(q.body) as { data: { customer?: { id: string }; seq: number; name: string } }).data;

/** Requests of one key, with when each was open. */
function spans(r: Receiver, key: (q: ReceivedRequest) => string | undefined) {
  const out = new Map<string, Array<{ name: string; at: number }>>();
  for (const q of r.requests) {
    const k = key(q);
    if (k === undefined) continue;
    const list = out.get(k) ?? [];
    list.push({ name: dataOf(q).name, at: q.at });
    out.set(k, list);
  }
  return out;
}

describe("ordered delivery per key", () => {
  const f = operatorFixture("ordering", { statusIntervalMs: 500, env: { WEBHOOK_HEALTH_PROBE_INTERVAL_MS: "1000" } });

  it("one delivery per key in flight, in creation order (evt-9 before evt-10 in the same second), other keys in parallel", async () => {
    const { ns } = f;
    const open = new Map<string, number>();
    let overlapSameKey = 0;
    let maxOpen = 0;
    let openNow = 0;
    const r = await f.receiver(async (q) => {
      const key = dataOf(q).customer!.id;
      open.set(key, (open.get(key) ?? 0) + 1);
      if (open.get(key)! > 1) overlapSameKey++;
      maxOpen = Math.max(maxOpen, ++openNow);
      await new Promise((res) => setTimeout(res, 80));
      open.set(key, open.get(key)! - 1);
      openNow--;
      return 200;
    });
    await apply(subscription(ns, "ordered", { url: r.url(), maxInFlight: 10, ordering: { key: "$.customer.id" } }));
    const customers = ["acme", "globex", "initech", "Zoë-日本"];
    // Created in one request (kubectl create of a List): the same second, so names decide.
    const items = customers.flatMap((c, ci) => Array.from({ length: 12 }, (_, i) => delivery(ns, `c${ci}-evt-${i + 1}`, "ordered", { payload: { customer: { id: c }, seq: i + 1, name: `c${ci}-evt-${i + 1}` } })));
    await create(items);
    const names = customers.flatMap((_, ci) => Array.from({ length: 12 }, (_, i) => `c${ci}-evt-${i + 1}`));
    await waitForPhase(ns, names, "Succeeded", 90_000);
    expect(overlapSameKey).toBe(0);
    // Other keys went in parallel.
    expect(maxOpen).toBeGreaterThan(1);
    const byKey = spans(r, (q) => dataOf(q).customer?.id);
    expect([...byKey.keys()].sort()).toEqual([...customers].sort());
    for (const [ci, c] of customers.entries()) {
      expect(byKey.get(c)!.map((s) => s.name)).toEqual(Array.from({ length: 12 }, (_, i) => `c${ci}-evt-${i + 1}`));
    }
    // Each delivery records its lane.
    expect((await getObj("whdel", ns, "c3-evt-2"))!.status!.ordering).toEqual({ key: "$.customer.id", value: '"Zoë-日本"' });
  });

  it("a dead letter blocks its key (OrderingBlocked, naming the key and the dead letter; an Event), also across a restart, until it is replayed; other keys go on", async () => {
    const ns = await createNamespace("ordering-block");
    let fixed = false;
    const r = await Receiver.start((q) => (dataOf(q).name === "a-1" && !fixed ? 400 : 200));
    let op = await startOperator({ namespaces: [ns], statusIntervalMs: 500 });
    try {
      await apply(subscription(ns, "blocked", { url: r.url(), ordering: { key: "$.customer.id" }, retry: { maxAttempts: 1 } }));
      await apply(delivery(ns, "a-1", "blocked", { payload: { customer: { id: "a" }, seq: 1, name: "a-1" } }));
      await waitForPhase(ns, "a-1", "DeadLettered");
      await create(["a-2", "a-3", "b-1", "b-2"].map((n) => delivery(ns, n, "blocked", { payload: { customer: { id: n[0] }, seq: Number(n[2]), name: n } })));
      await waitForPhase(ns, ["b-1", "b-2"], "Succeeded");
      for (const n of ["a-2", "a-3"]) {
        const d = await waitFor(async () => {
          const o = await getObj("whdel", ns, n);
          return o?.status?.conditions?.find((c: { type: string; reason: string }) => c.type === "Succeeded" && c.reason === "OrderingBlocked") ? o : undefined;
        }, { description: `${n} blocked` });
        const c = d.status!.conditions.find((x: { type: string }) => x.type === "Succeeded");
        expect(c.status).toBe("Unknown");
        expect(c.message).toContain('dead letter a-1 of ordering key $.customer.id = "a"');
        expect(d.status!.phase).toBe("Pending");
        expect(d.status!.attempts ?? 0).toBe(0);
      }
      const ev = await waitFor(async () => (await events(ns, "blocked")).find((e) => e.reason === "OrderingBlocked"), { description: "OrderingBlocked Event" });
      expect(ev.message).toContain("dead letter a-1");
      expect(r.requests.filter((q) => dataOf(q).customer?.id === "a").map((q) => dataOf(q).name)).toEqual(["a-1"]);

      // A new leader knows the block from the dead letter's status alone (status.ordering).
      await op.stop();
      op = await startOperator({ namespaces: [ns], statusIntervalMs: 500 });
      await waitFor(() => op.op.isLeader, { description: "leading again" });
      await apply(delivery(ns, "a-4", "blocked", { payload: { customer: { id: "a" }, seq: 4, name: "a-4" } }));
      await waitFor(async () => (await getObj("whdel", ns, "a-4"))?.status?.conditions?.some((c: { reason: string }) => c.reason === "OrderingBlocked"), { description: "a-4 blocked after the restart" });
      expect(r.requests.filter((q) => dataOf(q).customer?.id === "a")).toHaveLength(1);

      fixed = true;
      await kubectlOk(["annotate", "whdel", "a-1", "-n", ns, "hookline.dev/replay=the receiver accepts it now"]);
      await waitForPhase(ns, ["a-1", "a-2", "a-3", "a-4"], "Succeeded");
      expect(r.requests.filter((q) => dataOf(q).customer?.id === "a").map((q) => dataOf(q).name)).toEqual(["a-1", "a-1", "a-2", "a-3", "a-4"]);
    } finally {
      await op.stop();
      await r.close();
      await deleteNamespace(ns);
    }
  });

  it("orders by eventType; a delivery without a value at a payload key is not ordered; deep and non-ASCII keys are taken", async () => {
    const { ns } = f;
    const byType = new Map<string, number>();
    let overlapSameType = 0;
    const r = await f.receiver(async (q) => {
      const t = (JSON.parse(q.body) as { type: string }).type;
      byType.set(t, (byType.get(t) ?? 0) + 1);
      if (byType.get(t)! > 1) overlapSameType++;
      await new Promise((res) => setTimeout(res, 60));
      byType.set(t, byType.get(t)! - 1);
      return 200;
    });
    await apply(subscription(ns, "by-type", { url: r.url(), maxInFlight: 10, ordering: { key: "eventType" } }));
    await create(Array.from({ length: 16 }, (_, i) => delivery(ns, `t-${i}`, "by-type", { eventType: i % 2 ? "order.paid" : "order.shipped", payload: { name: `t-${i}`, seq: i } })));
    await waitForPhase(ns, Array.from({ length: 16 }, (_, i) => `t-${i}`), "Succeeded", 60_000);
    expect(overlapSameType).toBe(0);

    let openNoKey = 0;
    let maxNoKey = 0;
    const loose = await f.receiver(async () => {
      maxNoKey = Math.max(maxNoKey, ++openNoKey);
      await new Promise((res) => setTimeout(res, 200));
      openNoKey--;
      return 200;
    });
    const deep = `$${".a".repeat(20)}['größe de-la.clé'].n[0]`;
    await apply(subscription(ns, "deep", { url: loose.url(), maxInFlight: 10, ordering: { key: deep } }));
    await create(Array.from({ length: 6 }, (_, i) => delivery(ns, `nokey-${i}`, "deep", { payload: { name: `nokey-${i}`, seq: i } })));
    await waitForPhase(ns, Array.from({ length: 6 }, (_, i) => `nokey-${i}`), "Succeeded");
    expect(maxNoKey).toBeGreaterThan(1);
    let nested: Record<string, unknown> = { "größe de-la.clé": { n: ["k"] } };
    for (let i = 0; i < 20; i++) nested = { a: nested };
    await apply(delivery(ns, "deep-1", "deep", { payload: nested }));
    const d = (await waitForPhase(ns, "deep-1", "Succeeded"))[0]!;
    expect(d.status!.ordering).toEqual({ key: deep, value: '"k"' });
  });

  it.each([
    ["$..id", "recursive descent"],
    ["$.items[*].id", "a wildcard"],
    ["customer.id", "no $"],
    ["$", "the whole payload"],
    [`$${".a".repeat(33)}`, "33 steps"],
  ])("the API server refuses ordering key %j (%s), naming the field", async (key) => {
    const r = await kubectl(["create", "--dry-run=server", "-f", "-"], { input: JSON.stringify(subscription(f.ns, "bad-key", { url: "https://hooks.example.com/x", ordering: { key } })) });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("spec.ordering.key");
    expect(r.stderr).toContain('ordering.key must be "eventType" or a JSONPath');
  });
});
