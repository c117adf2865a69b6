// WEBHOOK_MAX_FINISHED_DELIVERIES against the real API server: above the budget, the oldest
// finished deliveries are deleted, Succeeded before Discarded before DeadLettered, with a
// Warning Event on the subscription, a counter by phase and a gauge of stored deliveries.
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it, inject } from "vitest";
import { CONTENT_TYPE, KubeClient } from "../../src/kube/client.js";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { apply, delivery, events, listObjs, secret, subscription } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";

const BUDGET = 20;
const DELIVERIES = "/apis/hookline.dev/v1alpha1/namespaces";

describe("storage budget: WEBHOOK_MAX_FINISHED_DELIVERIES", () => {
  let ns: string;
  let op: TestOperator | undefined;
  let client: KubeClient;

  beforeAll(async () => {
    ns = await createNamespace("budget");
    const kc = new KubeConfig();
    kc.loadFromFile(inject("kubeconfig"));
    client = await KubeClient.create(kc);
    // Paused: nothing is sent; long retention: nothing is deleted for its age.
    await apply([secret(ns, "signing"), subscription(ns, "acme", { url: "http://127.0.0.1:9/", secretRef: { name: "signing" }, paused: true, retention: { succeeded: "24h", deadLettered: "720h" } })]);
  });
  afterAll(async () => {
    await op?.stop();
    await client?.destroy();
    await deleteNamespace(ns);
  });

  /** A finished delivery, `minutesAgo` old, created and given its final status directly. */
  const finished = async (name: string, phase: "Succeeded" | "Discarded" | "DeadLettered", minutesAgo: number) => {
    await client.request({ method: "POST", path: `${DELIVERIES}/${ns}/webhookdeliveries`, body: delivery(ns, name, "acme") });
    const at = new Date(Date.now() - minutesAgo * 60_000).toISOString().replace(/\.\d+Z$/, "Z");
    const status: Record<string, unknown> = { phase, attempts: 1, finishedAt: at };
    if (phase === "DeadLettered") status.deadLetter = { at, reason: "Exhausted" };
    await client.request({ method: "PATCH", path: `${DELIVERIES}/${ns}/webhookdeliveries/${name}/status`, contentType: CONTENT_TYPE.merge, body: { status } });
  };
  const names = async () => new Set((await listObjs("whdel", ns)).map((d) => d.metadata.name));
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
    await waitFor(async () => (await names()).size === BUDGET + 1, { description: "20 finished + 1 pending left", timeoutMs: 60_000 });
    let left = await names();
    expect([...left].filter((n) => n.startsWith("ok-")).sort()).toEqual(["ok-10", "ok-11"]);
    expect([...left].filter((n) => n.startsWith("dis-"))).toHaveLength(8);
    expect([...left].filter((n) => n.startsWith("dl-"))).toHaveLength(10);
    expect(left.has("waiting")).toBe(true);
    await waitFor(async () => (await evicted("Succeeded")) === 10, { description: "evicted counter Succeeded 10" });

    // 6 more dead letters: the 2 Succeeded left, then the 4 oldest Discarded.
    for (let i = 10; i < 16; i++) await finished(`dl-${i}`, "DeadLettered", 1);
    await waitFor(async () => (await names()).size === BUDGET + 1 && !(await names()).has("ok-11"), { description: "Succeeded gone, Discarded next", timeoutMs: 60_000 });
    left = await names();
    expect([...left].filter((n) => n.startsWith("dis-")).sort()).toEqual(["dis-4", "dis-5", "dis-6", "dis-7"]);

    // 5 more: the 4 Discarded left, then the oldest dead letter.
    for (let i = 16; i < 21; i++) await finished(`dl-${i}`, "DeadLettered", 1);
    await waitFor(async () => (await names()).size === BUDGET + 1 && !(await names()).has("dl-0"), { description: "Discarded gone, oldest dead letter next", timeoutMs: 60_000 });
    left = await names();
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
