// The chart's RBAC is sufficient and minimal. The in-process operator runs as a ServiceAccount
// bound to the rendered ClusterRole and leader-election Role (nothing else: no admin, and the
// shared `unprivileged` user is not touched), and goes through a delivery, a retention delete,
// a dead letter, a single replay, a bulk replay, leader election on the chart's Lease name and
// Events, without one 401/403. Then each of several verbs is taken out of the role, and the
// path that needs it fails the way an operator would see it (403s on that resource and the
// user-visible effect). In stream mode without the publish door, the same for the dead letters
// the operator creates from JetStream messages (a real nats-server).
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createNamespace, deleteNamespace, kubectl, kubectlOk, waitFor } from "../helpers/cluster.js";
import { find, render, type K8sObject } from "../helpers/helm.js";
import { deliveryName } from "../../src/publish/naming.js";
import type { StreamConnection } from "../../src/jetstream/jetstream.js";
import { apply, delivery, events, getObj, secret, subscription, waitForPhase } from "../helpers/kube.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { TestCa } from "../helpers/pki.js";
import { Receiver } from "../helpers/receiver.js";
import { publishEvent, waitForConsumer } from "../helpers/stream.js";

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

const fastRetry = { initialBackoff: "50ms", multiplier: 2, maxAttempts: 1, maxBackoff: "1s", jitterPercent: 0 };

/** Requests the operator made, by resource and HTTP code (from its own counter). */
async function requestsByCode(op: TestOperator): Promise<Array<{ verb: string; resource: string; code: string; n: number }>> {
  return (await op.op.metrics.apiRequests.get()).values.map((v) => ({ ...(v.labels as { verb: string; resource: string; code: string }), n: v.value }));
}

async function forbidden(op: TestOperator, resource?: string): Promise<number> {
  return (await requestsByCode(op)).filter((r) => (r.code === "403" || r.code === "401") && (!resource || r.resource === resource)).reduce((s, r) => s + r.n, 0);
}

/** The rules without `verb` on `resource` (a rule left with no verb disappears). */
/** Deletes the cluster-scoped objects of a rendered chart (its ClusterRoles and their bindings outlive the namespace). */
async function deleteClusterScoped(objects: K8sObject[] | undefined): Promise<void> {
  for (const o of objects ?? []) {
    if (o.kind === "ClusterRole" || o.kind === "ClusterRoleBinding") await kubectlOk(["delete", o.kind.toLowerCase(), o.metadata.name, "--ignore-not-found"]);
  }
}

function without(rules: Rule[], resource: string, verb: string): Rule[] {
  let removed = false;
  const out = rules
    .map((r) => {
      if (!r.resources.includes(resource) || !r.verbs.includes(verb)) return r;
      removed = true;
      return { ...r, verbs: r.verbs.filter((v) => v !== verb) };
    })
    .filter((r) => r.verbs.length > 0);
  if (!removed) throw new Error(`no ${verb} on ${resource} in the rules`);
  return out;
}

/**
 * A kubeconfig file in `dir` for the chart's ServiceAccount (rendered in `objects`): the admin
 * kubeconfig's cluster entry (server and CA, in whatever form) with the ServiceAccount's token
 * as the only credential.
 */
async function serviceAccountKubeconfig(objects: K8sObject[], ns: string, dir: string): Promise<string> {
  const sa = find(objects, "ServiceAccount").metadata.name;
  const token = (await kubectlOk(["create", "token", sa, "-n", ns, "--duration=1h"])).trim();
  const admin = JSON.parse(await kubectlOk(["config", "view", "--raw", "--minify", "-o", "json"])) as { clusters: Array<{ name: string; cluster: Record<string, unknown> }> };
  const cluster = admin.clusters[0]!;
  expect(cluster.cluster.server).toBe(inject("server"));
  const kubeconfig = join(dir, "kubeconfig");
  await writeFile(
    kubeconfig,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "test", cluster: cluster.cluster }],
      users: [{ name: sa, user: { token } }],
      contexts: [{ name: "sa", context: { cluster: "test", user: sa, namespace: ns } }],
      "current-context": "sa",
    }),
  );
  return kubeconfig;
}

describe("RBAC of the chart, exercised by the operator", () => {
  let ns: string;
  let release: string;
  let objects: K8sObject[];
  let clusterRole: K8sObject;
  let leaseRole: K8sObject;
  let leaseName: string;
  let dir: string;
  let kubeconfig: string;
  const receivers: Receiver[] = [];
  let op: TestOperator | undefined;

  beforeAll(async () => {
    ns = await createNamespace("rbac");
    release = `rbac-${randomBytes(3).toString("hex")}`;
    ({ objects } = await render({ release, namespace: ns, showOnly: ["templates/serviceaccount.yaml", "templates/rbac.yaml"] }));
    clusterRole = find(objects, "ClusterRole");
    leaseRole = find(objects, "Role");
    leaseName = `${release}-hookline-leader`;
    await apply(objects);
    dir = await mkdtemp(join(tmpdir(), "hookline-rbac-"));
    kubeconfig = await serviceAccountKubeconfig(objects, ns, dir);
    // The identity really is restricted: it may get a Secret but not list them, and may update
    // only its own Lease.
    const canI = async (...args: string[]) => (await kubectl(["auth", "can-i", ...args, "-n", ns], { kubeconfig })).stdout.trim();
    expect(await canI("get", "secrets")).toBe("yes");
    expect(await canI("list", "secrets")).toBe("no");
    expect(await canI("update", `leases/${leaseName}`)).toBe("yes");
    expect(await canI("update", "leases/other")).toBe("no");
  });

  afterAll(async () => {
    await op?.stop();
    await Promise.all(receivers.map((r) => r.close()));
    await deleteClusterScoped(objects);
    if (ns) await deleteNamespace(ns);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function runOperator(name: string): Promise<TestOperator> {
    op = await startOperator({
      namespaces: [ns],
      kubeconfig,
      env: {
        LEADER_ELECT: "true",
        LEADER_ELECTION_LEASE_NAME: leaseName,
        POD_NAMESPACE: ns,
        POD_NAME: name,
        // Fast renewals, so a lost right to update the Lease shows within seconds.
        LEADER_ELECTION_LEASE_DURATION_MS: "3000",
        LEADER_ELECTION_RENEW_DEADLINE_MS: "2000",
        LEADER_ELECTION_RETRY_PERIOD_MS: "250",
      },
      statusIntervalMs: 200,
    });
    return op;
  }

  async function stopOperator(): Promise<void> {
    await op?.stop();
    op = undefined;
  }

  /** Replaces the rules of the ClusterRole (or the Lease Role) for one case; returns the restore. */
  async function withRules(role: K8sObject, rules: Rule[]): Promise<() => Promise<void>> {
    await apply({ ...role, rules });
    return async () => apply(role);
  }

  const phase = (name: string, want: string, timeoutMs = 20_000) =>
    waitFor(async () => {
      const d = await getObj("whdel", ns, name);
      return d?.status?.phase === want ? d : undefined;
    }, { description: `${name} ${want}`, timeoutMs });

  it("is sufficient: delivery, retention delete, dead letter, replays, leader election and Events with no 401/403", async () => {
    const ok = await Receiver.start(() => 200);
    let fixed = false;
    const flaky = await Receiver.start(() => (fixed ? 200 : 500));
    receivers.push(ok, flaky);
    await apply([
      secret(ns, "signing"),
      subscription(ns, "ok", { url: ok.url(), secretRef: { name: "signing" }, retry: fastRetry, retention: { succeeded: "2s", deadLettered: "720h" } }),
      subscription(ns, "flaky", { url: flaky.url(), secretRef: { name: "signing" }, retry: fastRetry, circuitBreaker: { failureThreshold: 100 } }),
    ]);
    const o = await runOperator("rbac-sufficient");

    // Leader election on the chart's Lease name, in the release namespace.
    await waitFor(() => o.op.isLeader, { description: "leader" });
    const lease = JSON.parse(await kubectlOk(["get", "lease", leaseName, "-n", ns, "-o", "json"])) as { spec: { holderIdentity: string } };
    expect(lease.spec.holderIdentity).toBe("rbac-sufficient");

    // A delivery (secret get, status patch), then its retention delete.
    await apply(delivery(ns, "d-ok", "ok"));
    await phase("d-ok", "Succeeded");
    expect(ok.requests).toHaveLength(1);
    await waitFor(async () => (await getObj("whdel", ns, "d-ok")) === undefined, { description: "d-ok deleted after its retention" });

    // A dead letter, then a single replay (get, status patch, annotation patch).
    await apply([delivery(ns, "d-dead", "flaky", { eventId: "evt-dead" }), delivery(ns, "d-dead-2", "flaky", { eventId: "evt-dead-2" })]);
    await phase("d-dead", "DeadLettered");
    await phase("d-dead-2", "DeadLettered");
    fixed = true;
    await kubectlOk(["annotate", "whdel", "d-dead", "-n", ns, "hookline.dev/replay=endpoint fixed, INC-42"]);
    const replayed = await phase("d-dead", "Succeeded");
    expect(replayed.status!.lastReplay.reason).toBe("endpoint fixed, INC-42");
    await waitFor(async () => (await getObj("whdel", ns, "d-dead"))?.metadata.annotations?.["hookline.dev/replay"] === undefined, { description: "replay annotation removed" });

    // A bulk replay (subscription annotation patch, subscription status patch).
    await kubectlOk(["annotate", "whsub", "flaky", "-n", ns, "hookline.dev/replay-dead-letters=outage INC-42 over"]);
    await phase("d-dead-2", "Succeeded");
    await waitFor(async () => (await getObj("whsub", ns, "flaky"))?.status?.lastReplay?.finishedAt, { description: "bulk replay finished" });
    const sub = await getObj("whsub", ns, "flaky");
    expect(sub!.metadata.annotations?.["hookline.dev/replay-dead-letters"]).toBeUndefined();

    // Events, written by the operator's identity.
    await waitFor(async () => (await events(ns)).some((e) => e.involvedObject.kind === "WebhookDelivery"), { description: "an Event about a delivery" });

    await stopOperator();
    // Released on the way out (a fresh get, then an update emptying the holder), with the rights
    // limited to this Lease's name.
    const released = JSON.parse(await kubectlOk(["get", "lease", leaseName, "-n", ns, "-o", "json"])) as { spec: { holderIdentity?: string } };
    expect(released.spec.holderIdentity ?? "", o.logs.filter((l) => /lease|leader/i.test(l)).join("\n")).toBe("");

    const codes = await requestsByCode(o);
    const denied = codes.filter((r) => r.code === "401" || r.code === "403");
    expect(denied, JSON.stringify(denied)).toEqual([]);
    // Every resource in the role was used at least once with a 2xx.
    const used = new Set(codes.filter((r) => /^2/.test(r.code)).map((r) => `${r.verb} ${r.resource}`));
    for (const path of ["list webhooksubscriptions", "watch webhooksubscriptions", "patch webhooksubscriptions", "patch webhooksubscriptions/status", "get webhookdeliveries", "list webhookdeliveries", "watch webhookdeliveries", "patch webhookdeliveries", "delete webhookdeliveries", "patch webhookdeliveries/status", "list webhookreplays", "watch webhookreplays", "get secrets", "create events", "get leases", "create leases", "update leases"]) {
      expect([...used], path).toContain(path);
    }
  });

  // [what is removed, from which role, the path, what it looks like]
  it.each([
    ["create", "events", "clusterRole", "an Event"],
    ["patch", "webhookdeliveries/status", "clusterRole", "a delivery"],
    ["get", "secrets", "clusterRole", "a signed delivery"],
    ["patch", "webhookdeliveries", "clusterRole", "a replay"],
    ["update", "leases", "leaseRole", "keeping the leadership"],
  ] as const)("is minimal: without %s on %s (%s), %s fails", async (verb, resource, which, _path) => {
    const role = which === "clusterRole" ? clusterRole : leaseRole;
    const restore = await withRules(role, without(role.rules as Rule[], resource, verb));
    const tag = `${verb}-${resource.replace(/\W/g, "-")}`;
    // For the Event path: an endpoint that fails, so the delivery dead-letters (a Warning Event).
    const rcv = await Receiver.start(() => (resource === "events" ? 500 : 200));
    receivers.push(rcv);
    try {
      if (verb === "patch" && resource === "webhookdeliveries") {
        // A dead letter made while the role was whole, then replayed without the patch right.
        await restore();
        const failing = await Receiver.start(() => 500);
        receivers.push(failing);
        await apply(subscription(ns, `s-${tag}`, { url: failing.url(), retry: fastRetry, circuitBreaker: { failureThreshold: 100 } }));
        let o = await runOperator(`rbac-${tag}-a`);
        await waitFor(() => o.op.isLeader, { description: "leader" });
        await apply(delivery(ns, `d-${tag}`, `s-${tag}`));
        await phase(`d-${tag}`, "DeadLettered");
        await stopOperator();
        await withRules(role, without(role.rules as Rule[], resource, verb));
        await apply(subscription(ns, `s-${tag}`, { url: rcv.url(), retry: fastRetry, circuitBreaker: { failureThreshold: 100 } }));
        o = await runOperator(`rbac-${tag}-b`);
        await waitFor(() => o.op.isLeader, { description: "leader" });
        await kubectlOk(["annotate", "whdel", `d-${tag}`, "-n", ns, "hookline.dev/replay=endpoint fixed, INC-43"]);
        await waitFor(async () => (await forbidden(o, resource)) > 0, { description: `a 403 on ${verb} ${resource}` });
        // The replay's annotation cannot be removed: it stays, so the user sees it was not handled.
        expect((await getObj("whdel", ns, `d-${tag}`))!.metadata.annotations?.["hookline.dev/replay"]).toBe("endpoint fixed, INC-43");
        return;
      }

      await apply(subscription(ns, `s-${tag}`, { url: rcv.url(), retry: fastRetry, ...(resource === "secrets" ? { secretRef: { name: "signing" } } : {}) }));
      if (resource === "leases") await kubectlOk(["delete", "lease", leaseName, "-n", ns, "--ignore-not-found"]);
      const o = await runOperator(`rbac-${tag}`);
      if (resource === "leases") {
        // The first term starts with a create (still allowed); the first renewal (an update) is
        // refused and the leadership is given up within the renew deadline, never to come back.
        await waitFor(() => o.op.isLeader, { description: "leader after creating the Lease" });
        await waitFor(async () => (await forbidden(o, "leases")) > 0, { description: "a 403 on update leases" });
        // isLeader turns false once the renew deadline passes; the term (and the gauge) stops when the renew loop next wakes.
        await waitFor(async () => !o.op.isLeader && (await o.metric("hookline_leader")) === 0, { description: "leadership lost, and hookline_leader 0", timeoutMs: 10_000 });
        return;
      }
      await waitFor(() => o.op.isLeader, { description: "leader" });
      await apply(delivery(ns, `d-${tag}`, `s-${tag}`));
      await waitFor(async () => (await forbidden(o, resource)) > 0, { description: `a 403 on ${verb} ${resource}`, timeoutMs: 20_000 });
      const d = await getObj("whdel", ns, `d-${tag}`);
      if (resource === "events") {
        // The delivery itself is handled; the Event about its dead letter is what is missing.
        await phase(`d-${tag}`, "DeadLettered");
        expect((await events(ns, `d-${tag}`)).filter((e) => e.involvedObject.kind === "WebhookDelivery")).toEqual([]);
      } else if (resource === "secrets") {
        // Nothing unsigned is sent: the delivery waits for a readable Secret.
        expect(rcv.requests).toHaveLength(0);
        expect(d!.status?.phase ?? "Pending").toBe("Pending");
      } else {
        // The attempt happened but its outcome cannot be recorded.
        await rcv.waitForRequests(1);
        expect(d!.status?.phase ?? "Pending").not.toBe("Succeeded");
      }
    } finally {
      await stopOperator();
      await restore();
    }
  });
});

describe("RBAC of the chart in stream mode without the publish door", () => {
  let ns: string;
  let clusterRole: K8sObject;
  let objects: K8sObject[] | undefined;
  let dir: string;
  let kubeconfig: string;
  let nats: TestNats;
  let conn: StreamConnection;
  let failing: Receiver;
  let op: TestOperator | undefined;

  beforeAll(async () => {
    ns = await createNamespace("rbac-stream");
    nats = await startNats("rbac");
    conn = await connectStream(nats.url);
    // The chart as a stream-mode install renders it: a NATS URL, publish.enabled left false.
    ({ objects } = await render({ release: `rbacs-${randomBytes(3).toString("hex")}`, namespace: ns, setJson: { "stream.natsUrl": nats.url }, showOnly: ["templates/serviceaccount.yaml", "templates/rbac.yaml"] }));
    clusterRole = find(objects, "ClusterRole");
    await apply(objects);
    dir = await mkdtemp(join(tmpdir(), "hookline-rbac-stream-"));
    kubeconfig = await serviceAccountKubeconfig(objects, ns, dir);
    failing = await Receiver.start(() => 500);
    await apply([secret(ns, "signing"), subscription(ns, "failing", { url: failing.url(), secretRef: { name: "signing" }, retry: { maxAttempts: 1 }, circuitBreaker: { failureThreshold: 100 } })]);
    op = await startOperator({ namespaces: [ns], kubeconfig, env: { HOOKLINE_NATS_URL: nats.url }, statusIntervalMs: 500 });
    await waitForConsumer(await conn.jetstreamManager(), ns, "failing");
  });
  afterAll(async () => {
    await op?.stop();
    await failing?.close();
    await conn?.close();
    await nats?.close();
    await deleteClusterScoped(objects);
    if (ns) await deleteNamespace(ns);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("is sufficient: a message that fails becomes a dead letter, with no 401/403", async () => {
    await publishEvent(conn, ns, "order.paid", "evt-rbac-1", { order: 1 });
    const [dead] = await waitForPhase(ns, deliveryName("evt-rbac-1", "failing"), "DeadLettered", 20_000);
    expect(dead!.status!.deadLetter.reason).toBe("Exhausted");
    const denied = (await requestsByCode(op!)).filter((r) => r.code === "401" || r.code === "403");
    expect(denied, JSON.stringify(denied)).toEqual([]);
  });

  it("without create on webhookdeliveries, says so loudly (Event, metric, error log naming the permission), keeps the message, and records it once the right is back", async () => {
    const restore = await apply({ ...clusterRole, rules: without(clusterRole.rules as Rule[], "webhookdeliveries", "create") }).then(() => () => apply(clusterRole));
    try {
      await publishEvent(conn, ns, "order.paid", "evt-rbac-2", { order: 2 });
      await waitFor(async () => (await forbidden(op!, "webhookdeliveries")) > 0, { description: "a 403 on create webhookdeliveries", timeoutMs: 20_000 });
      const ev = await waitFor(async () => (await events(ns, "failing")).find((e) => e.reason === "DeadLetterNotRecorded"), { description: "a DeadLetterNotRecorded Event on the subscription" });
      expect(ev.type).toBe("Warning");
      expect(ev.message).toContain("create");
      expect(ev.message).toContain("webhookdeliveries");
      expect(await op!.metric("webhook_stream_dead_letter_failures_total", { namespace: ns, subscription: "failing", reason: "forbidden" })).toBeGreaterThan(0);
      const line = op!.logs.map((l) => JSON.parse(l) as { level: string; msg: string; permission?: string }).find((l) => l.level === "error" && l.permission !== undefined);
      expect(line?.permission).toBe("create webhookdeliveries.hookline.dev");
      expect(await getObj("whdel", ns, deliveryName("evt-rbac-2", "failing"))).toBeUndefined();
    } finally {
      await restore();
    }
    // Nothing lost: the message was kept, and becomes its dead letter.
    await waitForPhase(ns, deliveryName("evt-rbac-2", "failing"), "DeadLettered", 30_000);
    expect(failing.requests.filter((r) => JSON.parse(r.body).id === "evt-rbac-2")).toHaveLength(1);
  });
});

describe("RBAC of the chart: the metrics server's reviews (metrics.auth.enabled, the default)", () => {
  let ns: string;
  let objects: K8sObject[];
  let dir: string;
  let ca: TestCa;
  let op: TestOperator | undefined;

  const scrape = (token: string): Promise<number> =>
    new Promise((resolve, reject) => {
      const req = httpsRequest({ host: "127.0.0.1", port: op!.op.metricsPort, path: "/metrics", ca: ca.cert, headers: { authorization: `Bearer ${token}` } }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode!));
      });
      req.on("error", reject);
      req.end();
    });

  beforeAll(async () => {
    ns = await createNamespace("rbac-metrics", { waitForServiceAccount: true });
    // The chart's reader binding, for a ServiceAccount standing in for Prometheus.
    ({ objects } = await render({ release: `rbacm-${randomBytes(3).toString("hex")}`, namespace: ns, setJson: { metrics: { auth: { readers: [{ kind: "ServiceAccount", name: "prometheus", namespace: ns }] } } }, showOnly: ["templates/serviceaccount.yaml", "templates/rbac.yaml"] }));
    await apply([...objects, { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "prometheus", namespace: ns } }, { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "stranger", namespace: ns } }]);
    dir = await mkdtemp(join(tmpdir(), "hookline-rbac-metrics-"));
    const kubeconfig = await serviceAccountKubeconfig(objects, ns, dir);
    ca = await TestCa.create();
    const pem = await ca.issue("hookline-metrics", "server");
    await writeFile(join(dir, "tls.crt"), pem.cert);
    await writeFile(join(dir, "tls.key"), pem.key);
    op = await startOperator({ namespaces: [ns], kubeconfig, env: { METRICS_AUTH: "kubernetes", METRICS_TLS_CERT_FILE: join(dir, "tls.crt"), METRICS_TLS_KEY_FILE: join(dir, "tls.key") } });
  });
  afterAll(async () => {
    await op?.stop();
    await ca?.close();
    await deleteClusterScoped(objects);
    if (ns) await deleteNamespace(ns);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("is sufficient: the bound reader gets 200, a stranger 403, with no 401/403 on the operator's reviews; without the reviews' role, a scrape cannot be checked (503)", async () => {
    const token = async (sa: string) => (await kubectlOk(["create", "token", sa, "-n", ns, "--duration=10m"])).trim();
    expect(await scrape(await token("prometheus"))).toBe(200);
    expect(await scrape(await token("stranger"))).toBe(403);
    const denied = (await requestsByCode(op!)).filter((r) => r.code === "401" || r.code === "403");
    expect(denied, JSON.stringify(denied)).toEqual([]);
    const reviews = find(objects, "ClusterRole", objects.find((o) => o.kind === "ClusterRole" && o.metadata.name.endsWith("-metrics-auth"))!.metadata.name);
    await apply({ ...reviews, rules: [] });
    try {
      // A token not reviewed yet (answers are kept 10 s): its TokenReview is refused.
      await waitFor(async () => (await scrape(await token("prometheus"))) === 503, { description: "a scrape answered 503 without the reviews' role", timeoutMs: 15_000 });
      expect((await requestsByCode(op!)).some((r) => r.resource === "tokenreviews" && r.code === "403")).toBe(true);
    } finally {
      await apply(reviews);
    }
  });
});
