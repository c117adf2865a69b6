// A payload nested deeper than the operator can serialize, but accepted by the API server: the
// delivery is Discarded (InvalidPayload) with a Warning Event, at once and once, and the
// deliveries created after it are delivered as usual.
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { KubeClient } from "../../src/kube/client.js";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { apply, delivery, events, getObj, subscription } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";

/**
 * The deepest nesting the API server stores (found by creating deliveries of growing depth: its
 * JSON decoder refuses a document nested deeper than 10,000 levels, and the
 * delivery itself takes two). JSON.stringify overflows the stack at ~4,000.
 */
export const DEEPEST_ACCEPTED = 9_998;

/** {"a":{"a":...{"a":1}}} nested `depth` objects deep, as a JSON text. */
export function nestedJson(depth: number): string {
  return `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
}

describe("a deeply nested payload", () => {
  let ns: string;
  let op: TestOperator;
  let client: KubeClient;
  let r: Receiver;

  beforeAll(async () => {
    ns = await createNamespace("nested");
    r = await Receiver.start(() => 200);
    op = await startOperator({ namespaces: [ns] });
    const kc = new KubeConfig();
    kc.loadFromFile(inject("kubeconfig"));
    client = await KubeClient.create(kc);
  });
  afterAll(async () => {
    await op?.stop();
    await client?.destroy();
    await r?.close();
    await deleteNamespace(ns);
  });

  it(`is Discarded (InvalidPayload) with a Warning Event, and the next delivery succeeds`, async () => {
    await apply(subscription(ns, "ok", { url: r.url() }));
    await waitFor(async () => (await getObj("whsub", ns, "ok"))?.status?.conditions?.some((c: { type: string; status: string }) => c.type === "Ready" && c.status === "True"), { description: "subscription Ready" });

    // Sent as text: this process could not JSON.stringify such an object either.
    const manifest = JSON.stringify(delivery(ns, "deep", "ok", { payload: "PAYLOAD" })).replace('"PAYLOAD"', nestedJson(DEEPEST_ACCEPTED));
    const path = `/apis/hookline.dev/v1alpha1/namespaces/${ns}/webhookdeliveries`;
    await client.request({ method: "POST", path, body: manifest });

    // Read with our client: kubectl takes seconds to decode an object this deep.
    const deep = await waitFor(async () => {
      const d = await client.request<{ status?: { phase?: string; discard?: { reason: string; message: string } } }>({ method: "GET", path: `${path}/deep` });
      return d.status?.phase === "Discarded" ? d : undefined;
    }, { description: "deep Discarded", timeoutMs: 30_000 });
    expect(deep.status?.discard?.reason).toBe("InvalidPayload");
    expect(deep.status?.discard?.message).toMatch(/nested deeper than 1000 levels/);
    const ev = await waitFor(async () => (await events(ns, "deep")).find((e) => e.reason === "Discarded"), { description: "Discarded Event" });
    expect(ev.type).toBe("Warning");
    expect(ev.message).toMatch(/nested deeper than 1000 levels/);

    await apply(delivery(ns, "after", "ok", { eventId: "evt-after" }));
    await waitFor(async () => (await getObj("whdel", ns, "after"))?.status?.phase === "Succeeded", { description: "after Succeeded", timeoutMs: 30_000 });
    expect(r.requests.map((q) => q.headers["webhook-id"])).toEqual(["evt-after"]);
    // Handled once, never thrown: no reconcile of it failed.
    expect(op.logs.filter((l) => l.includes("reconcile failed") && l.includes(`${ns}/deep`))).toEqual([]);
  });
});
