// The chart's `helm test` hook (templates/tests/ping.yaml), with the real helm and the real API
// server. There is no kubelet here, so the Pod never runs; what can be shown for real is: the
// hook objects render only when asked for, the API server accepts them (the Pod in a namespace
// that enforces the restricted Pod Security level), the ServiceAccount may do exactly what the
// ping needs and nothing else, and the Pod's command, run as that ServiceAccount against this
// cluster with an operator and a receiver, sends a signed hookline.ping and passes on 2xx and
// fails (exit 1, the ping deleted) on an error.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, kubectl, kubectlOk, waitFor } from "../helpers/cluster.js";
import { exec } from "../helpers/exec.js";
import { CHART, ROOT, find, helm, render, type K8sObject } from "../helpers/helm.js";
import { apply, listObjs, secret, subscription, TEST_SECRET } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";

describe("helm test: the ping hook", () => {
  let rel: string; // the release namespace: the Pod and its ServiceAccount
  let shop: string; // the subscription's namespace: the Role and RoleBinding
  let objects: K8sObject[];
  let op: TestOperator | undefined;
  let receiver: Receiver | undefined;
  let dir: string | undefined;
  const release = "hl";
  const SA = "hl-hookline-test-ping";

  beforeAll(async () => {
    rel = await createNamespace("helmtest-rel", { waitForServiceAccount: true });
    shop = await createNamespace("helmtest-shop");
    ({ objects } = await render({ release, namespace: rel, setJson: { "tests.ping.subscription": "acme", "tests.ping.namespace": shop, "tests.ping.timeout": "30s" }, showOnly: ["templates/tests/ping.yaml"] }));
  });
  afterAll(async () => {
    await op?.stop();
    await receiver?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
    for (const n of [rel, shop]) if (n) await deleteNamespace(n);
  });

  it("is rendered only when tests.ping.subscription is set, as four test hooks; the Pod runs the image's kubectl-hookline ping once", async () => {
    const plain = await render({ release, namespace: rel });
    expect(plain.objects.filter((o) => o.metadata.annotations?.["helm.sh/hook"])).toEqual([]);

    expect(objects.map((o) => `${o.kind}/${o.metadata.namespace}/${o.metadata.name}`)).toEqual([`ServiceAccount/${rel}/${SA}`, `Role/${shop}/${SA}`, `RoleBinding/${shop}/${SA}`, `Pod/${rel}/${SA}`]);
    for (const o of objects) expect(o.metadata.annotations!["helm.sh/hook"], o.kind).toBe("test");
    // RBAC before the Pod; the Pod is kept (for `helm test --logs`) until the next run.
    for (const o of objects.slice(0, 3)) expect(o.metadata.annotations!["helm.sh/hook-weight"]).toBe("-1");
    const pod = find(objects, "Pod");
    expect(pod.metadata.annotations!["helm.sh/hook-delete-policy"]).toBe("before-hook-creation");
    expect(pod.spec.restartPolicy).toBe("Never");
    expect(pod.spec.serviceAccountName).toBe(SA);
    const c = pod.spec.containers[0];
    expect(c.image).toBe("ghcr.io/hookline/hookline:0.1.0");
    expect(c.args).toEqual(["ping", "acme", "--namespace", shop, "--timeout", "30s"]);
    // The image's layout: the same node and /app/bin as the operator's ENTRYPOINT.
    const entrypoint = /^ENTRYPOINT \["([^"]+)", "\/app\/bin\/hookline\.js", "operator"\]$/m.exec(readFileSync(`${ROOT}Dockerfile`, "utf8"));
    expect(c.command).toEqual([entrypoint![1], "/app/bin/kubectl-hookline.js"]);
    expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ["ALL"] } });
    // Only the test Pod gets the token; the ServiceAccount mounts none by default.
    expect(find(objects, "ServiceAccount").automountServiceAccountToken).toBe(false);
    expect(pod.spec.automountServiceAccountToken).toBe(true);
  });

  it("passes helm lint --strict, and the schema refuses bad values", async () => {
    const lint = await helm(["lint", "--strict", CHART, "--set", "tests.ping.subscription=acme", "--set", "tests.ping.namespace=shop"]);
    expect(lint.code, lint.stdout + lint.stderr).toBe(0);
    expect(lint.stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
    for (const [key, value, message] of [
      ["tests.ping.subscription", "Acme_1", /tests\/ping\/subscription|subscription/],
      ["tests.ping.namespace", "Shop", /namespace/],
      ["tests.ping.timeout", "1 minute", /timeout/],
      ["tests.ping.timeout", "500ms", /timeout/],
      ["tests.ping.subscriptions", "acme", /subscriptions/],
    ] as const) {
      const r = await helm(["template", release, CHART, "--namespace", rel, "--set", `${key}=${value}`]);
      expect(r.code, `${key}=${value}`).not.toBe(0);
      expect(r.stderr).toMatch(message);
    }
  });

  it("the API server accepts every hook object; the Pod passes the restricted Pod Security level", async () => {
    await kubectlOk(["label", "namespace", rel, "pod-security.kubernetes.io/enforce=restricted"]);
    // The ServiceAccount and RBAC for real (admission looks the ServiceAccount up), the Pod as a dry run.
    const rbac = await kubectl(["apply", "--validate=strict", "-f", "-"], { input: JSON.stringify({ apiVersion: "v1", kind: "List", items: objects.slice(0, 3) }) });
    expect(rbac.code, rbac.stderr).toBe(0);
    const pod = await kubectl(["apply", "--dry-run=server", "--validate=strict", "-f", "-"], { input: JSON.stringify(find(objects, "Pod")) });
    expect(pod.code, pod.stderr).toBe(0);
    expect(pod.stdout.trim()).toBe(`pod/${SA} created (server dry run)`);
    // The level is enforced here: the same Pod allowed to escalate is refused.
    const loose = structuredClone(find(objects, "Pod"));
    loose.spec.containers[0].securityContext.allowPrivilegeEscalation = true;
    const refused = await kubectl(["apply", "--dry-run=server", "-f", "-"], { input: JSON.stringify(loose) });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false/);
  });

  it("its ServiceAccount may get that subscription and create, get and delete deliveries in its namespace, nothing else", async () => {
    const can = async (ns: string, ...args: string[]) => (await kubectl(["auth", "can-i", ...args, "-n", ns, `--as=system:serviceaccount:${rel}:${SA}`])).stdout.trim();
    expect(await can(shop, "get", "webhooksubscriptions.hookline.dev/acme")).toBe("yes");
    for (const verb of ["create", "get", "delete"]) expect(await can(shop, verb, "webhookdeliveries.hookline.dev"), verb).toBe("yes");
    const no: string[][] = [
      [shop, "get", "webhooksubscriptions.hookline.dev/globex"],
      [shop, "list", "webhooksubscriptions.hookline.dev"],
      [shop, "patch", "webhooksubscriptions.hookline.dev/acme"],
      [shop, "list", "webhookdeliveries.hookline.dev"],
      [shop, "patch", "webhookdeliveries.hookline.dev"],
      [shop, "patch", "webhookdeliveries.hookline.dev", "--subresource=status"],
      [shop, "get", "secrets"],
      [rel, "create", "webhookdeliveries.hookline.dev"],
      [rel, "get", "webhooksubscriptions.hookline.dev/acme"],
    ];
    for (const [ns, ...args] of no) expect(await can(ns!, ...args), `${args.join(" ")} in ${ns === shop ? "the subscription's" : "the release"} namespace`).toBe("no");
  });

  it("the Pod's command, as its ServiceAccount against this cluster: ok on 2xx (a signed hookline.ping), exit 1 and the ping deleted on an error", async () => {
    let status = 200;
    receiver = await Receiver.start(() => status);
    await apply([secret(shop, "acme-signing"), subscription(shop, "acme", { url: receiver.url(), eventTypes: ["order.paid"], secretRef: { name: "acme-signing" } })]);
    op = await startOperator({ namespaces: [shop] });

    // The kubeconfig a Pod gets from its mounted token: this cluster, the ServiceAccount's token, nothing else.
    const token = (await kubectlOk(["create", "token", SA, "-n", rel, "--duration=10m"])).trim();
    const admin = JSON.parse(await kubectlOk(["config", "view", "--raw", "--minify", "-o", "json"])) as { clusters: Array<{ cluster: Record<string, unknown> }> };
    dir = await mkdtemp(join(tmpdir(), "hookline-helm-test-"));
    const kubeconfig = join(dir, "kubeconfig");
    await writeFile(kubeconfig, JSON.stringify({ apiVersion: "v1", kind: "Config", clusters: [{ name: "c", cluster: admin.clusters[0]!.cluster }], users: [{ name: "sa", user: { token } }], contexts: [{ name: "sa", context: { cluster: "c", user: "sa", namespace: rel } }], "current-context": "sa" }));

    const c = find(objects, "Pod").spec.containers[0] as { command: string[]; args: string[] };
    const run = () => exec(process.execPath, [c.command[1]!.replace(/^\/app\//, ROOT), ...c.args], { env: { ...process.env, KUBECONFIG: kubeconfig }, timeoutMs: 60_000 });

    const ok = await run();
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(new RegExp(`^ok: HTTP 200 \\(http_2xx\\) from ${receiver.url().replace(/[.?*+]/g, "\\$&")} in \\d+ms\\n$`));
    const ping = receiver.requests.at(-1)!;
    expect(new Webhook(TEST_SECRET).verify(ping.body, ping.headers as Record<string, string>)).toMatchObject({ type: "hookline.ping", data: { subscription: "acme" } });

    status = 503;
    const failed = await run();
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(/^failed: HTTP 503 \(http_5xx\)/);
    expect(failed.stderr).toMatch(/the ping is not retried \(ping-acme-[0-9a-f]{8} deleted\)/);
    // The delete went through with the ServiceAccount's rights: no ping is left retrying.
    await waitFor(async () => (await listObjs("whdel", shop)).every((d) => d.status?.phase === "Succeeded"), { description: "only the answered ping is left" });
  });
});
