// Backpressure to producers, against the real API server with the real operator: a subscription's
// spec.maxPending caps its backlog at the publish doors (HTTP 429 with Retry-After, the library's
// BacklogFullError, the CLI's exit code 1), deliveries to the other subscriptions are still
// created, and the chart's ResourceQuota on count/webhookdeliveries.hookline.dev caps a namespace.
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { BacklogFullError, publish as libraryPublish } from "../../src/index.js";
import { createNamespace, deleteNamespace, kubectl, kubectlOk, waitFor } from "../helpers/cluster.js";
import { exec } from "../helpers/exec.js";
import { find, render } from "../helpers/helm.js";
import { operatorFixture } from "../helpers/fixture.js";
import { apply, create, delivery, events, getObj, listObjs, secret, serviceAccountToken, subscription, waitForPhase } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";

const BIN = fileURLToPath(new URL("../../bin/hookline.js", import.meta.url));
// Connection refused, and a long backoff: the capped subscription's deliveries stay pending.
const stuck = { url: "http://127.0.0.1:9/", retry: { initialBackoff: "1h", maxBackoff: "1h", maxAttempts: 50 } };

describe("backpressure: spec.maxPending and a ResourceQuota", () => {
  let ns: string;
  let op: TestOperator;
  let receiver: Receiver;
  let token: string;
  let base: string;

  const post = async (body: unknown, namespace = ns) => {
    const res = await fetch(`${base}/v1/namespaces/${namespace}/events`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body: JSON.stringify(body) });
    return { status: res.status, retryAfter: res.headers.get("retry-after"), body: (await res.json()) as { error?: string; deliveries?: Array<{ subscription: string; result: string }>; full?: Array<{ subscription: string; reason: string; pending?: number; maxPending?: number }> } };
  };
  const deliveriesOf = async (sub: string, namespace = ns) => (await listObjs("whdel", namespace, ["--field-selector", `spec.subscriptionRef.name=${sub}`])).map((d) => d.metadata.name);

  beforeAll(async () => {
    ns = await createNamespace("backpressure", { waitForServiceAccount: true });
    receiver = await Receiver.start(() => 200);
    await apply([
      secret(ns, "signing"),
      subscription(ns, "slow", { ...stuck, secretRef: { name: "signing" }, maxPending: 3 }),
      subscription(ns, "fast", { url: receiver.url("/fast"), secretRef: { name: "signing" } }),
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "publisher", namespace: ns } },
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", metadata: { name: "publish", namespace: ns }, rules: [{ apiGroups: ["hookline.dev"], resources: ["webhookdeliveries"], verbs: ["create"] }] },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "publisher", namespace: ns },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "publish" },
        subjects: [{ kind: "ServiceAccount", name: "publisher", namespace: ns }],
      },
    ]);
    token = await serviceAccountToken(ns, "publisher");
    op = await startOperator({ namespaces: [ns], env: { PUBLISH_PORT: "0" } });
    base = `http://127.0.0.1:${op.op.publishPort}`;
    await waitFor(() => op.op.caches.subscriptions.size === 2, { description: "2 subscriptions cached" });
  });
  afterAll(async () => {
    await op?.stop();
    await receiver?.close();
    await deleteNamespace(ns);
  });

  it("the HTTP door answers 429 with Retry-After once a subscription holds maxPending, and still delivers to the others", async () => {
    for (let i = 1; i <= 3; i++) expect((await post({ type: "order.paid", id: `evt-${i}`, data: { i } })).status).toBe(202);
    // The door counts what the operator's cache holds.
    await waitFor(() => op.op.caches.deliveriesOf(`${ns}/slow`).size === 3, { description: "3 pending deliveries of slow cached" });

    const refused = await post({ type: "order.paid", id: "evt-4", data: { i: 4 } });
    expect(refused.status).toBe(429);
    expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(refused.body.error).toContain("spec.maxPending=3");
    expect(refused.body.full).toEqual([expect.objectContaining({ subscription: "slow", reason: "MaxPending", pending: 3, maxPending: 3 })]);
    expect(refused.body.deliveries).toEqual([expect.objectContaining({ subscription: "fast", result: "created" })]);
    expect(await deliveriesOf("slow")).toHaveLength(3);
    expect(await deliveriesOf("fast")).toHaveLength(4);
  });

  it("the library and the CLI report it (list-based count: no cache)", async () => {
    const err = await libraryPublish({ namespace: ns, type: "order.paid", id: "evt-lib", data: {} }, { kubeconfig: inject("kubeconfig") }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BacklogFullError);
    const full = err as BacklogFullError;
    expect(full.full).toEqual([expect.objectContaining({ subscription: "slow", reason: "MaxPending", maxPending: 3 })]);
    expect(full.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(full.message).toContain("spec.maxPending=3");

    const cli = await exec(process.execPath, [BIN, "publish", "--kubeconfig", inject("kubeconfig"), "-n", ns, "-t", "order.paid", "--id", "evt-cli", "-d", "{}"], { timeoutMs: 60_000 });
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain("spec.maxPending=3");
    expect(await deliveriesOf("slow")).toHaveLength(3);
  });

  it("the chart's ResourceQuota on count/webhookdeliveries.hookline.dev caps a namespace: the door answers 429", async () => {
    const quotaNs = await createNamespace("quota");
    try {
      await apply([secret(quotaNs, "signing"), subscription(quotaNs, "fast", { url: receiver.url("/quota"), secretRef: { name: "signing" }, retention: { succeeded: "1h" } })]);
      const { objects, yaml } = await render({ release: "hl", namespace: "hookline", setJson: { "resourceQuota.enabled": true, "resourceQuota.namespaces": [quotaNs], "resourceQuota.maxDeliveries": 2 }, showOnly: ["templates/resourcequota.yaml"] });
      expect(find(objects, "ResourceQuota").spec.hard).toEqual({ "count/webhookdeliveries.hookline.dev": "2" });
      await kubectlOk(["apply", "-f", "-"], { input: yaml });
      // The test control plane runs no resourcequota controller: write the first status it would
      // (nothing used yet); from there the API server's quota admission counts each create.
      const key = "count/webhookdeliveries.hookline.dev";
      await kubectlOk(["patch", "resourcequota", "hl-hookline-deliveries", "-n", quotaNs, "--subresource=status", "--type=merge", "-p", JSON.stringify({ status: { hard: { [key]: "2" }, used: { [key]: "0" } } })]);
      await op.stop();
      op = await startOperator({ namespaces: [ns, quotaNs], env: { PUBLISH_PORT: "0" } });
      base = `http://127.0.0.1:${op.op.publishPort}`;
      await waitFor(() => op.op.caches.subscriptions.size === 3, { description: "3 subscriptions cached" });
      await kubectlOk(["create", "rolebinding", "publisher", "-n", quotaNs, "--clusterrole=cluster-admin", `--serviceaccount=${ns}:publisher`]);
      // The API server's authorizer learns of a new binding through its own watch: under CI's
      // load the door's SubjectAccessReview right after the create was still denied (403).
      const canCreate = async () => (await kubectl(["auth", "can-i", "create", "webhookdeliveries.hookline.dev", "-n", quotaNs, `--as=system:serviceaccount:${ns}:publisher`])).stdout.trim() === "yes";
      await waitFor(canCreate, { description: "the publisher's binding in effect" });

      for (let i = 1; i <= 2; i++) expect((await post({ type: "order.paid", id: `q-${i}`, data: {} }, quotaNs)).status).toBe(202);
      const refused = await post({ type: "order.paid", id: "q-3", data: {} }, quotaNs);
      expect(refused.status).toBe(429);
      expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(refused.body.full).toEqual([expect.objectContaining({ subscription: "fast", reason: "ResourceQuota" })]);
      expect(refused.body.error).toContain("exceeded quota");
      expect(await deliveriesOf("fast", quotaNs)).toHaveLength(2);
    } finally {
      await deleteNamespace(quotaNs);
    }
  });
});

describe("backpressure: deliveries created directly past spec.maxPending", () => {
  const f = operatorFixture("backlog");

  it("the first maxPending are attempted; the others wait their turn with BacklogFull and go as places free", async () => {
    const { ns } = f;
    let hang = true;
    const r = await f.receiver(() => (hang ? "hang" : 200));
    const names = ["b0", "b1", "b2", "b3", "b4"];
    await apply(subscription(ns, "capped", { url: r.url(), maxPending: 2, maxInFlight: 5, timeout: "60s" }));
    await waitFor(async () => (await getObj("whsub", ns, "capped"))?.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True"), { description: "subscription Ready" });
    // Created one by one (kubectl, not a publish door): nothing refuses them.
    for (const n of names) await create(delivery(ns, n, "capped"));
    await r.waitForRequests(2);
    const backlogged = await waitFor(async () => {
      const objs = await Promise.all(names.map((n) => getObj("whdel", ns, n)));
      const full = objs.filter((o) => o?.status?.conditions?.some((c: any) => c.type === "Succeeded" && c.reason === "BacklogFull"));
      return full.length === 3 ? full : undefined;
    }, { description: "3 deliveries wait with BacklogFull" });
    const message = backlogged[0]!.status!.conditions.find((c: any) => c.reason === "BacklogFull").message as string;
    expect(message).toContain("spec.maxPending=2");
    // Two in flight at most, though maxInFlight would allow five.
    expect(r.requests).toHaveLength(2);
    expect((await events(ns)).some((e) => e.reason === "BacklogFull")).toBe(true);
    // The endpoint answers: every one goes, two at a time, none lost.
    hang = false;
    r.releaseHanging(200);
    await waitForPhase(ns, names, "Succeeded");
    expect(new Set(r.requests.map((q) => q.headers["webhook-id"])).size).toBe(5);
  });
});
