// WEBHOOK_MAX_FINISHED_DELIVERIES against the real API server: above the budget, the oldest
// finished deliveries are deleted, Succeeded before Discarded before DeadLettered, with a
// Warning Event on the subscription, a counter by phase and a gauge of stored deliveries. The
// budget (and WEBHOOK_DLQ_MAX_ENTRIES, the dead-letter cap) is shared fairly between namespaces:
// one namespace's flood costs that namespace only (src/finished/fair-share.ts).
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it, inject } from "vitest";
import { CONTENT_TYPE, KubeClient } from "../../src/kube/client.js";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { apply, delivery, events, listObjs, secret, subscription, waitForPhase } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";
import { publishEvent, waitForConsumer } from "../helpers/stream.js";
import { deliveryName } from "../../src/publish/naming.js";
import type { StreamConnection } from "../../src/jetstream/jetstream.js";

const BUDGET = 20;
const DELIVERIES = "/apis/hookline.dev/v1alpha1/namespaces";

/** A finished delivery of `sub` in `ns`, `minutesAgo` old, created and given its final status directly. */
async function createFinished(client: KubeClient, ns: string, sub: string, name: string, phase: "Succeeded" | "Discarded" | "DeadLettered", minutesAgo: number): Promise<void> {
  await client.request({ method: "POST", path: `${DELIVERIES}/${ns}/webhookdeliveries`, body: delivery(ns, name, sub) });
  const at = new Date(Date.now() - minutesAgo * 60_000).toISOString().replace(/\.\d+Z$/, "Z");
  const status: Record<string, unknown> = { phase, attempts: 1, finishedAt: at };
  if (phase === "DeadLettered") status.deadLetter = { at, reason: "Exhausted" };
  await client.request({ method: "PATCH", path: `${DELIVERIES}/${ns}/webhookdeliveries/${name}/status`, contentType: CONTENT_TYPE.merge, body: { status } });
}

async function testClient(): Promise<KubeClient> {
  const kc = new KubeConfig();
  kc.loadFromFile(inject("kubeconfig"));
  return KubeClient.create(kc);
}

const names = async (ns: string) => new Set((await listObjs("whdel", ns)).map((d) => d.metadata.name));
/** Paused: nothing is sent; long retention: nothing is deleted for its age. */
const idle = (ns: string, name: string) => subscription(ns, name, { url: "http://127.0.0.1:9/", secretRef: { name: "signing" }, paused: true, retention: { succeeded: "24h", deadLettered: "720h" } });

describe("storage budget: WEBHOOK_MAX_FINISHED_DELIVERIES", () => {
  let ns: string;
  let op: TestOperator | undefined;
  let client: KubeClient;

  beforeAll(async () => {
    ns = await createNamespace("budget");
    client = await testClient();
    await apply([secret(ns, "signing"), idle(ns, "acme")]);
  });
  afterAll(async () => {
    await op?.stop();
    await client?.destroy();
    await deleteNamespace(ns);
  });

  const finished = (name: string, phase: "Succeeded" | "Discarded" | "DeadLettered", minutesAgo: number) => createFinished(client, ns, "acme", name, phase, minutesAgo);
  const stored = (phase: string) => op!.metric("webhook_deliveries_stored", { phase });
  const evicted = (phase: string) => op!.metric("webhook_deliveries_evicted_total", { phase });

  it("deletes the oldest finished deliveries above the budget, Succeeded before Discarded before DeadLettered", async () => {
    // 30 finished: the dead letters are the oldest, the Succeeded ones the newest.
    for (let i = 0; i < 10; i++) await finished(`dl-${i}`, "DeadLettered", 300 - i);
    for (let i = 0; i < 8; i++) await finished(`dis-${i}`, "Discarded", 200 - i);
    for (let i = 0; i < 12; i++) await finished(`ok-${i}`, "Succeeded", 100 - i);
    await client.request({ method: "POST", path: `${DELIVERIES}/${ns}/webhookdeliveries`, body: delivery(ns, "waiting", "acme") });

    op = await startOperator({ namespaces: [ns], env: { WEBHOOK_MAX_FINISHED_DELIVERIES: String(BUDGET) } });

    // 10 over: the 10 oldest Succeeded go, although every dead letter and Discarded is older.
    await waitFor(async () => (await names(ns)).size === BUDGET + 1, { description: "20 finished + 1 pending left", timeoutMs: 60_000 });
    let left = await names(ns);
    expect([...left].filter((n) => n.startsWith("ok-")).sort()).toEqual(["ok-10", "ok-11"]);
    expect([...left].filter((n) => n.startsWith("dis-"))).toHaveLength(8);
    expect([...left].filter((n) => n.startsWith("dl-"))).toHaveLength(10);
    expect(left.has("waiting")).toBe(true);
    await waitFor(async () => (await evicted("Succeeded")) === 10, { description: "evicted counter Succeeded 10" });

    // 6 more dead letters: the 2 Succeeded left, then the 4 oldest Discarded.
    for (let i = 10; i < 16; i++) await finished(`dl-${i}`, "DeadLettered", 1);
    await waitFor(async () => (await names(ns)).size === BUDGET + 1 && !(await names(ns)).has("ok-11"), { description: "Succeeded gone, Discarded next", timeoutMs: 60_000 });
    left = await names(ns);
    expect([...left].filter((n) => n.startsWith("dis-")).sort()).toEqual(["dis-4", "dis-5", "dis-6", "dis-7"]);

    // 5 more: the 4 Discarded left, then the oldest dead letter.
    for (let i = 16; i < 21; i++) await finished(`dl-${i}`, "DeadLettered", 1);
    await waitFor(async () => (await names(ns)).size === BUDGET + 1 && !(await names(ns)).has("dl-0"), { description: "Discarded gone, oldest dead letter next", timeoutMs: 60_000 });
    left = await names(ns);
    expect([...left].filter((n) => !n.startsWith("dl-")).sort()).toEqual(["waiting"]);
    expect(left.has("dl-1")).toBe(true);

    await waitFor(async () => (await evicted("Succeeded")) === 12 && (await evicted("Discarded")) === 8 && (await evicted("DeadLettered")) === 1, { description: "evicted counters 12 / 8 / 1" });
    await waitFor(async () => (await stored("DeadLettered")) === 20 && (await stored("Succeeded")) === 0 && (await stored("Discarded")) === 0 && (await stored("Pending")) === 1, {
      description: "stored gauge: 20 dead letters, 1 pending",
    });
    expect(await op.metric("webhook_finished_deliveries_budget")).toBe(BUDGET);
    const ev = await waitFor(async () => (await events(ns, "acme")).find((e) => e.reason === "FinishedDeliveriesEvicted"), { description: "Event on the subscription" });
    expect(ev.type).toBe("Warning");
    expect(ev.message).toContain("WEBHOOK_MAX_FINISHED_DELIVERIES=20");
  });
});

describe("storage budget: fair shares between namespaces", () => {
  let quiet: string;
  let noisy: string;
  let op: TestOperator | undefined;
  let client: KubeClient;

  beforeAll(async () => {
    [quiet, noisy] = await Promise.all([createNamespace("budget-quiet"), createNamespace("budget-noisy")]);
    client = await testClient();
    for (const ns of [quiet, noisy]) await apply([secret(ns, "signing"), idle(ns, "acme")]);
  });
  afterAll(async () => {
    await op?.stop();
    await client?.destroy();
    await Promise.all([deleteNamespace(quiet), deleteNamespace(noisy)]);
  });

  it("a namespace flooding dead letters loses its own oldest; a namespace under its share loses nothing, not even its Succeeded ones", async () => {
    // quiet: 8 finished, the oldest dead letters of the cluster. noisy: 32, newer.
    for (let i = 0; i < 5; i++) await createFinished(client, quiet, "acme", `dl-${i}`, "DeadLettered", 300 - i);
    for (let i = 0; i < 3; i++) await createFinished(client, quiet, "acme", `ok-${i}`, "Succeeded", 50 - i);
    for (let i = 0; i < 30; i++) await createFinished(client, noisy, "acme", `dl-${i}`, "DeadLettered", 200 - i);
    for (let i = 0; i < 2; i++) await createFinished(client, noisy, "acme", `ok-${i}`, "Succeeded", 10 - i);

    op = await startOperator({ namespaces: [quiet, noisy], env: { WEBHOOK_MAX_FINISHED_DELIVERIES: String(BUDGET) } });

    // 40 held, 20 allowed: fair shares quiet 8 (all it holds), noisy 12. noisy loses 20, its
    // Succeeded first, then its 18 oldest dead letters.
    await waitFor(async () => (await names(noisy)).size + (await names(quiet)).size === BUDGET, { description: "20 finished left", timeoutMs: 60_000 });
    expect([...(await names(quiet))].sort()).toEqual(["dl-0", "dl-1", "dl-2", "dl-3", "dl-4", "ok-0", "ok-1", "ok-2"]);
    expect([...(await names(noisy))].sort()).toEqual(Array.from({ length: 12 }, (_, i) => `dl-${i + 18}`).sort());

    const nsMetric = (name: string, labels: Record<string, string>) => op!.metric(name, labels);
    await waitFor(async () => (await nsMetric("webhook_namespace_finished_deliveries", { namespace: noisy })) === 12 && (await nsMetric("webhook_namespace_finished_deliveries", { namespace: quiet })) === 8, {
      description: "held per namespace: quiet 8, noisy 12",
    });
    expect(await nsMetric("webhook_namespace_finished_deliveries", { namespace: quiet, phase: "DeadLettered" })).toBe(5);
    expect(await nsMetric("webhook_namespace_evictions_total", { namespace: noisy, phase: "Succeeded", limit: "max_finished_deliveries" })).toBe(2);
    expect(await nsMetric("webhook_namespace_evictions_total", { namespace: noisy, phase: "DeadLettered", limit: "max_finished_deliveries" })).toBe(18);
    expect(await nsMetric("webhook_namespace_evictions_total", { namespace: quiet })).toBe(0);
    const ev = await waitFor(async () => (await events(noisy, "acme")).find((e) => e.reason === "FinishedDeliveriesEvicted"), { description: "Event on noisy's subscription" });
    expect(ev.message).toContain("fair share");
    expect((await events(quiet, "acme")).filter((e) => e.reason === "FinishedDeliveriesEvicted")).toEqual([]);

    // The flood goes on: still only noisy's oldest go.
    for (let i = 30; i < 40; i++) await createFinished(client, noisy, "acme", `dl-${i}`, "DeadLettered", 1);
    await waitFor(async () => (await names(noisy)).size === 12 && !(await names(noisy)).has("dl-27"), { description: "noisy's 10 oldest go", timeoutMs: 60_000 });
    expect((await names(quiet)).size).toBe(8);
  });
});

describe("WEBHOOK_DLQ_MAX_ENTRIES: fair shares between namespaces", () => {
  let quiet: string;
  let noisy: string;
  let op: TestOperator | undefined;
  let client: KubeClient;
  let failing: Receiver | undefined;

  beforeAll(async () => {
    [quiet, noisy] = await Promise.all([createNamespace("dlq-quiet"), createNamespace("dlq-noisy")]);
    client = await testClient();
  });
  afterAll(async () => {
    await op?.stop();
    await failing?.close();
    await client?.destroy();
    await Promise.all([deleteNamespace(quiet), deleteNamespace(noisy)]);
  });

  it("the dead letters of a namespace under its share are never deleted to make room for another namespace's", async () => {
    failing = await Receiver.start(() => 500);
    await apply([secret(quiet, "signing"), idle(quiet, "acme"), subscription(noisy, "flood", { url: failing.url(), retry: { maxAttempts: 1 }, circuitBreaker: { failureThreshold: 100 } })]);
    // quiet: the 3 oldest dead letters of the cluster.
    for (let i = 0; i < 3; i++) await createFinished(client, quiet, "acme", `dl-${i}`, "DeadLettered", 300 - i);
    op = await startOperator({ namespaces: [quiet, noisy], env: { WEBHOOK_DLQ_MAX_ENTRIES: "8", WEBHOOK_HEALTH_PROBE_INTERVAL_MS: "1000" } });

    // noisy dead-letters 10, one after the other: past 8 in all, its own oldest make the room.
    for (let i = 0; i < 10; i++) {
      await apply(delivery(noisy, `d-${i}`, "flood"));
      await waitForPhase(noisy, `d-${i}`, "DeadLettered");
    }
    await waitFor(async () => (await names(noisy)).size + (await names(quiet)).size === 8, { description: "8 dead letters left", timeoutMs: 30_000 });
    expect([...(await names(quiet))].sort()).toEqual(["dl-0", "dl-1", "dl-2"]);
    expect([...(await names(noisy))].sort()).toEqual(["d-5", "d-6", "d-7", "d-8", "d-9"]);
    expect(await op.metric("webhook_namespace_evictions_total", { namespace: noisy, phase: "DeadLettered", limit: "dlq_max_entries" })).toBe(5);
    expect(await op.metric("webhook_namespace_evictions_total", { namespace: quiet })).toBe(0);
    const dropped = (await events(noisy, "flood")).filter((e) => e.reason === "DeadLetterDropped");
    expect(dropped.length).toBeGreaterThan(0);
    expect(dropped[0]!.message).toContain("fair share");
  });
});

describe("WEBHOOK_DLQ_MAX_ENTRIES in stream mode: fair shares between namespaces", () => {
  let quiet: string;
  let noisy: string;
  let op: TestOperator | undefined;
  let client: KubeClient;
  let failing: Receiver | undefined;
  let nats: TestNats;
  let conn: StreamConnection;

  beforeAll(async () => {
    [quiet, noisy] = await Promise.all([createNamespace("dlqs-quiet"), createNamespace("dlqs-noisy")]);
    client = await testClient();
    nats = await startNats("dlq-cap");
    conn = await connectStream(nats.url);
  });
  afterAll(async () => {
    await op?.stop();
    await failing?.close();
    await conn?.close();
    await nats?.close();
    await client?.destroy();
    await Promise.all([deleteNamespace(quiet), deleteNamespace(noisy)]);
  });

  it("the dead letters stream mode creates count against the cap, and make room in their own namespace only", async () => {
    failing = await Receiver.start(() => 500);
    await apply([secret(quiet, "signing"), idle(quiet, "acme"), subscription(noisy, "flood", { url: failing.url(), retry: { maxAttempts: 1 }, circuitBreaker: { failureThreshold: 100 } })]);
    for (let i = 0; i < 3; i++) await createFinished(client, quiet, "acme", `dl-${i}`, "DeadLettered", 300 - i);
    op = await startOperator({ namespaces: [quiet, noisy], env: { HOOKLINE_NATS_URL: nats.url, WEBHOOK_DLQ_MAX_ENTRIES: "8", WEBHOOK_HEALTH_PROBE_INTERVAL_MS: "1000" } });
    await waitForConsumer(await conn.jetstreamManager(), noisy, "flood");

    for (let i = 0; i < 10; i++) {
      await publishEvent(conn, noisy, "order.paid", `evt-${i}`, { i });
      await waitForPhase(noisy, deliveryName(`evt-${i}`, "flood"), "DeadLettered");
    }
    await waitFor(async () => (await names(noisy)).size + (await names(quiet)).size === 8, { description: "8 dead letters left", timeoutMs: 30_000 });
    expect([...(await names(quiet))].sort()).toEqual(["dl-0", "dl-1", "dl-2"]);
    expect([...(await names(noisy))].sort()).toEqual([5, 6, 7, 8, 9].map((i) => deliveryName(`evt-${i}`, "flood")).sort());
    expect(await op.metric("webhook_namespace_evictions_total", { namespace: noisy, phase: "DeadLettered", limit: "dlq_max_entries" })).toBe(5);
  });
});
