// The Helm chart, with the real helm (hack/build-helm.sh) and the real API server: lint and
// template with the default values and the variants in charts/hookline/ci/, every rendered
// manifest accepted by `kubectl apply --dry-run=server --validate=strict`, what the manifests
// say (replicas, leader election, drain derived from the grace period, probes, restricted
// security context, every operator variable, least-privilege rules), and the schema refusing
// bad values at `helm template` time.
import { X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpsServer } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { INT_VARS } from "../../src/config/config.js";
import { createNamespace, deleteNamespace, kubectl, kubectlOk, waitFor } from "../helpers/cluster.js";
import { CHART, ROOT, find, helm, render, templateArgs, type K8sObject, type RenderOptions } from "../helpers/helm.js";
import { MONITORING_CRDS } from "../helpers/monitoring-crds.js";

const VARIANTS = readdirSync(`${CHART}/ci`).filter((f) => f.endsWith("-values.yaml")).sort();

function env(deploy: K8sObject): Record<string, { value?: string; valueFrom?: unknown }> {
  const c = deploy.spec.template.spec.containers[0];
  return Object.fromEntries((c.env as Array<{ name: string; value?: string; valueFrom?: unknown }>).map((e) => [e.name, e]));
}

/** Every variable the operator reads (src/config/config.ts). */
const OPERATOR_VARS = [
  ...Object.values(INT_VARS).map((v) => v.name),
  "WEBHOOK_DRAIN_TIMEOUT_ACTION",
  "WEBHOOK_ALLOWED_NETWORKS",
  "WATCH_NAMESPACES",
  "PUBLISH_PORT",
  "LEADER_ELECT",
  "LEADER_ELECTION_LEASE_NAME",
  "LEADER_ELECTION_NAMESPACE",
  "POD_NAME",
  "POD_NAMESPACE",
  "LOG_LEVEL",
  "HTTPS_PROXY",
  "HTTP_PROXY",
  "NO_PROXY",
];

describe("helm chart", () => {
  let ns: string;
  const teams: string[] = [];

  beforeAll(async () => {
    ns = await createNamespace("chart");
    teams.push(await createNamespace("chart-team-a"), await createNamespace("chart-team-b"));
    // ServiceMonitor / PrometheusRule: minimal typed CRDs (see monitoring-crds.ts).
    await kubectlOk(["apply", "-f", "-"], { input: JSON.stringify({ apiVersion: "v1", kind: "List", items: MONITORING_CRDS }) });
    await kubectlOk(["wait", "--for=condition=Established", "crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com", "--timeout=60s"]);
  });
  afterAll(async () => {
    for (const n of [ns, ...teams]) if (n) await deleteNamespace(n);
  });

  /** Values of a variant, with the namespaced variant pointed at namespaces that exist. */
  function variant(file: string | undefined, release: string): RenderOptions {
    return {
      release,
      namespace: ns,
      valuesFiles: file ? [`${CHART}/ci/${file}`] : [],
      setJson: file === "namespaced-values.yaml" ? { watchNamespaces: teams } : {},
      includeCrds: !file,
    };
  }

  it("has at least four variant values files", () => {
    expect(VARIANTS).toEqual(expect.arrayContaining(["namespaced-values.yaml", "monitoring-values.yaml", "networkpolicy-values.yaml", "resources-values.yaml"]));
  });

  it("ships the same CRDs as crds/", () => {
    const top = readdirSync(`${ROOT}crds`).filter((f) => f.endsWith(".yaml")).sort();
    expect(readdirSync(`${CHART}/crds`).sort()).toEqual(top);
    for (const f of top) expect(readFileSync(`${CHART}/crds/${f}`, "utf8"), f).toBe(readFileSync(`${ROOT}crds/${f}`, "utf8"));
  });

  it.each([undefined, ...VARIANTS])("helm lint --strict passes with %s", async (file) => {
    const r = await helm(["lint", "--strict", CHART, ...(file ? ["--values", `${CHART}/ci/${file}`] : [])]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain("0 chart(s) failed");
    expect(r.stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
  });

  it.each([undefined, ...VARIANTS])("every manifest rendered with %s is accepted by the API server (dry-run=server, strict)", async (file) => {
    const release = `hl-${(file ?? "default").replace(/-values\.yaml$/, "")}`;
    const { objects, yaml } = await render(variant(file, release));
    expect(objects.length).toBeGreaterThan(5);
    const r = await kubectl(["apply", "--dry-run=server", "--validate=strict", "-f", "-"], { input: yaml, timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    // One line per object, each "created (server dry run)" or "configured/unchanged (server dry run)".
    const lines = r.stdout.trim().split("\n");
    expect(lines).toHaveLength(objects.length);
    for (const line of lines) expect(line).toMatch(/\((server dry run)\)$/);
  });

  it("default values: 2 replicas, leader election, drain derived from the grace period, probes, restricted pods", async () => {
    const { objects } = await render({ release: "hl", namespace: ns });
    const kinds = objects.map((o) => o.kind).sort();
    // The operator's ClusterRole, the three user roles (view, edit, admin), the replayer role, the
    // metrics server's reviews (bound to the operator) and the metrics-reader role; the metrics
    // server's certificate; API Priority and Fairness for the operator and for producers.
    expect(kinds).toEqual(["ClusterRole", "ClusterRole", "ClusterRole", "ClusterRole", "ClusterRole", "ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "ConfigMap", "Deployment", "FlowSchema", "FlowSchema", "PodDisruptionBudget", "PriorityLevelConfiguration", "PriorityLevelConfiguration", "Role", "RoleBinding", "Secret", "Service", "ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]);
    const deploy = find(objects, "Deployment");
    const pod = deploy.spec.template.spec;
    expect(deploy.spec.replicas).toBe(2);
    expect(pod.terminationGracePeriodSeconds).toBe(30);
    const e = env(deploy);
    for (const name of OPERATOR_VARS) expect(e, name).toHaveProperty(name);
    expect(e.LEADER_ELECT!.value).toBe("true");
    expect(e.WEBHOOK_DRAIN_TIMEOUT_MS!.value).toBe("25000");
    expect(e.LEADER_ELECTION_LEASE_NAME!.value).toBe("hl-hookline-leader");
    expect(e.LEADER_ELECTION_NAMESPACE!.value).toBe(ns);
    expect(e.POD_NAME!.valueFrom).toEqual({ fieldRef: { fieldPath: "metadata.name" } });
    expect(e.POD_NAMESPACE!.valueFrom).toEqual({ fieldRef: { fieldPath: "metadata.namespace" } });
    // Numbers stay integers the operator accepts (not 1.8e+06).
    for (const name of Object.values(INT_VARS).map((v) => v.name)) expect(e[name]!.value, name).toMatch(/^\d+$/);
    const c = pod.containers[0];
    expect(c.livenessProbe.httpGet).toEqual({ path: "/healthz", port: "health" });
    expect(c.readinessProbe.httpGet).toEqual({ path: "/readyz", port: "health" });
    expect(c.ports.map((p: { name: string; containerPort: number }) => `${p.name}:${p.containerPort}`)).toEqual(["metrics:8080", "health:8081"]);
    expect(c.resources.requests).toEqual({ cpu: "100m", memory: "128Mi" });
    expect(c.resources.limits.memory).toBe("512Mi");
    expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ["ALL"] }, seccompProfile: { type: "RuntimeDefault" } });
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } });
    expect(pod.serviceAccountName).toBe("hl-hookline");
    expect(c.image).toBe("ghcr.io/hookline/hookline:0.1.0");
    const svc = find(objects, "Service");
    expect(svc.spec.ports).toEqual([{ name: "metrics", port: 8080, targetPort: "metrics", protocol: "TCP" }]);
    expect(svc.spec.selector).toEqual(deploy.spec.selector.matchLabels);
    expect(find(objects, "PodDisruptionBudget").spec.maxUnavailable).toBe(1);
    const dash = find(objects, "ConfigMap");
    expect(dash.metadata.labels).toMatchObject({ grafana_dashboard: "1" });
    expect(JSON.parse(dash.data["hookline.json"])).toEqual(JSON.parse(readFileSync(`${CHART}/dashboards/hookline.json`, "utf8")));
  });

  it("RBAC: a ClusterRole with only the verbs the operator uses; the Lease by name in the release namespace", async () => {
    const { objects } = await render({ release: "hl", namespace: ns });
    const rules = (o: K8sObject) => (o.rules as Array<{ apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] }>).flatMap((r) => r.resources.flatMap((res) => r.verbs.map((v) => `${r.apiGroups[0] || "core"}/${res}:${v}${r.resourceNames ? `@${r.resourceNames.join(",")}` : ""}`))).sort();
    expect(rules(find(objects, "ClusterRole"))).toEqual(
      [
        "hookline.dev/webhooksubscriptions:list", "hookline.dev/webhooksubscriptions:watch", "hookline.dev/webhooksubscriptions:patch",
        "hookline.dev/webhooksubscriptions/status:patch",
        "hookline.dev/webhookdeliveries:get", "hookline.dev/webhookdeliveries:list", "hookline.dev/webhookdeliveries:watch", "hookline.dev/webhookdeliveries:patch", "hookline.dev/webhookdeliveries:delete",
        "hookline.dev/webhookdeliveries/status:patch",
        "hookline.dev/webhookreplays:list", "hookline.dev/webhookreplays:watch",
        "hookline.dev/webhookreplays/status:patch",
        "core/secrets:get",
        "core/events:create",
      ].sort(),
    );
    const lease = find(objects, "Role");
    expect(lease.metadata.namespace).toBe(ns);
    expect(rules(lease)).toEqual(["coordination.k8s.io/leases:create", "coordination.k8s.io/leases:get@hl-hookline-leader", "coordination.k8s.io/leases:update@hl-hookline-leader"]);
    expect(find(objects, "ClusterRoleBinding").subjects).toEqual([{ kind: "ServiceAccount", name: "hl-hookline", namespace: ns }]);
    // Stream mode creates its dead letters: create on webhookdeliveries with a NATS URL in either
    // form, without the publish door (rbac.test.ts runs the operator with it).
    for (const stream of [{ natsUrl: "nats://nats.nats.svc:4222" }, { natsUrlSecret: { name: "hookline-nats", key: "url" } }]) {
      const streamed = await render({ release: "hl", namespace: ns, setJson: { stream }, showOnly: ["templates/rbac.yaml"] });
      expect(rules(find(streamed.objects, "ClusterRole")), JSON.stringify(stream)).toContain("hookline.dev/webhookdeliveries:create");
    }
    expect(rules(find(objects, "ClusterRole"))).not.toContain("hookline.dev/webhookdeliveries:create");
  });

  it("user roles: aggregated into the default view, edit and admin roles on the real API server", async () => {
    const release = `agg-${Math.random().toString(36).slice(2, 8)}`;
    const { objects, yaml } = await render({ release, namespace: ns, showOnly: ["templates/user-roles.yaml"] });
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([`ClusterRole/${release}-hookline-view`, `ClusterRole/${release}-hookline-edit`, `ClusterRole/${release}-hookline-admin`, `ClusterRole/${release}-hookline-replayer`]);
    await kubectlOk(["create", "serviceaccount", "reader", "-n", ns]);
    await kubectlOk(["create", "serviceaccount", "oncall", "-n", ns]);
    await kubectlOk(["create", "serviceaccount", "replayer", "-n", ns]);
    await kubectlOk(["create", "rolebinding", "replayer", "-n", ns, `--clusterrole=${release}-hookline-replayer`, `--serviceaccount=${ns}:replayer`]);
    await kubectlOk(["create", "rolebinding", "reader-view", "-n", ns, "--clusterrole=view", `--serviceaccount=${ns}:reader`]);
    await kubectlOk(["create", "rolebinding", "oncall-edit", "-n", ns, "--clusterrole=edit", `--serviceaccount=${ns}:oncall`]);
    const can = async (sa: string, verb: string, resource: string, ...extra: string[]) => (await kubectl(["auth", "can-i", verb, resource, ...extra, "-n", ns, `--as=system:serviceaccount:${ns}:${sa}`])).stdout.trim();
    expect(await can("reader", "list", "webhooksubscriptions.hookline.dev")).toBe("no");
    await kubectlOk(["apply", "-f", "-"], { input: yaml });
    try {
      // kube-controller-manager's aggregation controller copies the rules into view, edit and admin.
      await waitFor(async () => (await can("reader", "list", "webhooksubscriptions.hookline.dev")) === "yes" && (await can("oncall", "patch", "webhookdeliveries.hookline.dev")) === "yes", {
        description: "hookline rules aggregated into view and edit",
      });
      expect(await can("reader", "get", "webhookdeliveries.hookline.dev")).toBe("yes");
      expect(await can("reader", "patch", "webhooksubscriptions.hookline.dev")).toBe("no");
      expect(await can("reader", "create", "webhookdeliveries.hookline.dev")).toBe("no");
      expect(await can("oncall", "create", "webhookdeliveries.hookline.dev")).toBe("yes");
      // Status is the operator's alone.
      expect(await can("oncall", "patch", "webhooksubscriptions.hookline.dev", "--subresource=status")).toBe("no");
      // WebhookReplays: view reads them, edit creates them; the replayer role replays without any write on deliveries.
      expect(await can("reader", "get", "webhookreplays.hookline.dev")).toBe("yes");
      expect(await can("reader", "create", "webhookreplays.hookline.dev")).toBe("no");
      expect(await can("oncall", "create", "webhookreplays.hookline.dev")).toBe("yes");
      expect(await can("replayer", "create", "webhookreplays.hookline.dev")).toBe("yes");
      expect(await can("replayer", "get", "webhookdeliveries.hookline.dev")).toBe("yes");
      for (const verb of ["patch", "update", "delete", "create"]) {
        expect(await can("replayer", verb, "webhookdeliveries.hookline.dev"), verb).toBe("no");
        expect(await can("replayer", verb, "webhooksubscriptions.hookline.dev"), verb).toBe("no");
      }
      expect(await can("replayer", "patch", "webhookreplays.hookline.dev", "--subresource=status")).toBe("no");
      const admin = JSON.parse(await kubectlOk(["get", "clusterrole", "admin", "-o", "json"])) as { rules: Array<{ apiGroups?: string[]; verbs: string[] }> };
      expect(admin.rules.some((r) => r.apiGroups?.includes("hookline.dev") && r.verbs.includes("delete"))).toBe(true);
    } finally {
      await kubectl(["delete", "clusterrole", `${release}-hookline-view`, `${release}-hookline-edit`, `${release}-hookline-admin`, `${release}-hookline-replayer`, "--ignore-not-found"]);
    }
  });

  it("namespaced mode: a Role per watched namespace and no cluster-wide access to hookline objects or Secrets", async () => {
    const { objects } = await render(variant("namespaced-values.yaml", "hl"));
    const deploy = find(objects, "Deployment");
    expect(env(deploy).WATCH_NAMESPACES!.value).toBe(teams.join(","));
    expect(env(deploy).PUBLISH_PORT!.value).toBe("8090");
    const roles = objects.filter((o) => o.kind === "Role" && o.metadata.name === "hl-hookline");
    expect(roles.map((r) => r.metadata.namespace).sort()).toEqual([...teams].sort());
    for (const r of roles) expect(JSON.stringify(r.rules)).toContain('"create"'); // publish door creates deliveries
    expect(objects.filter((o) => o.kind === "RoleBinding" && o.metadata.name === "hl-hookline").map((b) => b.metadata.namespace).sort()).toEqual([...teams].sort());
    // The only ClusterRoles bound to the operator are the publish door's (TokenReviews,
    // SubjectAccessReviews, namespaces get) and the metrics server's (TokenReviews,
    // SubjectAccessReviews). (The user roles, the replayer role among them, grant through namespace
    // bindings; the metrics-reader role is for scrapers.)
    const clusterRoles = objects.filter((o) => o.kind === "ClusterRole" && !/-(view|edit|admin|replayer|metrics-reader)$/.test(o.metadata.name));
    expect(clusterRoles.map((o) => o.metadata.name).sort()).toEqual(["hl-hookline-metrics-auth", "hl-hookline-publish"]);
    for (const r of clusterRoles) expect(JSON.stringify(r.rules)).not.toMatch(/secrets|hookline\.dev/);
    expect(find(objects, "Role", "hl-hookline-leader-election").rules[1].resourceNames).toEqual(["hookline-team-leader"]);
  });

  it("monitoring: ServiceMonitor keeps the metrics' namespace label; PrometheusRule has the eleven alerts with runbooks", async () => {
    const { objects } = await render(variant("monitoring-values.yaml", "hl"));
    const sm = find(objects, "ServiceMonitor");
    expect(sm.spec.endpoints[0]).toMatchObject({ port: "metrics", honorLabels: true, interval: "15s" });
    expect(sm.spec.selector.matchLabels).toEqual({ ...find(objects, "Deployment").spec.selector.matchLabels, "app.kubernetes.io/component": "metrics" });
    expect(find(objects, "Service").metadata.labels!["app.kubernetes.io/component"]).toBe("metrics");
    const rules = find(objects, "PrometheusRule").spec.groups[0].rules as Array<{ alert: string; expr: string; annotations: Record<string, string>; for?: string }>;
    expect(rules.map((r) => r.alert)).toEqual(["HooklineCircuitBreakerOpen", "HooklineBacklogAge", "HooklineOperatorStalled", "HooklineDeadLettersGrowing", "HooklineLowSuccessRatio", "HooklineNoLeader", "HooklineDrainTimeout", "HooklineStorageBudgetNearlyFull", "HooklineStreamQuotaNearlyFull", "HooklineStreamEventsAging", "HooklineDeadLettersEvicted", "HooklineLeaseAnswersLate"]);
    const ops = readFileSync(`${ROOT}docs/operations.md`, "utf8");
    for (const r of rules) {
      expect(r.annotations.summary, r.alert).toBeTruthy();
      expect(r.expr, r.alert).toContain('job="hl-hookline-metrics"');
      const anchor = r.annotations.runbook_url!.split("#")[1]!;
      expect(r.annotations.runbook_url).toMatch(/docs\/operations\.md#/);
      // The anchor GitHub makes of the alert's heading in docs/operations.md.
      expect(ops, `heading for #${anchor}`).toMatch(new RegExp(`^#+ ${r.alert}$`, "m"));
      expect(anchor).toBe(r.alert.toLowerCase());
    }
    expect(rules[0]!.for).toBe("5s");
  });

  it("custom resources and tuning: values reach the pod, drain follows the grace period", async () => {
    const { objects } = await render(variant("resources-values.yaml", "hl"));
    const deploy = find(objects, "Deployment");
    const c = deploy.spec.template.spec.containers[0];
    expect(deploy.spec.replicas).toBe(3);
    expect(c.resources).toEqual({ requests: { cpu: "250m", memory: "256Mi" }, limits: { cpu: "2", memory: "1Gi" } });
    expect(deploy.spec.template.spec.terminationGracePeriodSeconds).toBe(120);
    const e = env(deploy);
    expect(e.WEBHOOK_DRAIN_TIMEOUT_MS!.value).toBe("110000");
    expect(e.WEBHOOK_DRAIN_TIMEOUT_ACTION!.value).toBe("dead-letter");
    expect(e.WEBHOOK_ALLOWED_NETWORKS!.value).toBe("10.0.0.0/8,fd00::/8");
    expect(e.WEBHOOK_MAX_IN_FLIGHT!.value).toBe("500");
    expect(e.WEBHOOK_HEALTH_PROBE_INTERVAL_MS!.value).toBe("600000");
    expect(e.WEBHOOK_CB_FAILURE_THRESHOLD!.value).toBe("10");
    expect(e.NODE_OPTIONS!.value).toBe("--max-old-space-size=768");
    expect(e.WEBHOOK_SECRET_REFRESH_MS!.value).toBe("10000");
    expect(e.HTTPS_PROXY!.value).toBe("http://egress-proxy.infra.svc:3128");
    expect(e.HTTP_PROXY!.value).toBe("");
    expect(e.NO_PROXY!.value).toBe(".svc,.cluster.local,10.0.0.0/8");
    expect(c.image).toBe("ghcr.io/hookline/hookline:0.1.0-rc.1");
    expect(find(objects, "PodDisruptionBudget").spec).toMatchObject({ minAvailable: 2 });
    expect(find(objects, "PodDisruptionBudget").spec).not.toHaveProperty("maxUnavailable");
  });

  it("derives Node's heap limit (NODE_OPTIONS) from the memory limit: 75% in MiB, any suffix; none without a limit; extraEnv wins", async () => {
    const heap = async (setJson: Record<string, unknown>, valuesFiles: string[] = []) => {
      const { objects } = await render({ namespace: ns, setJson, valuesFiles, showOnly: ["templates/deployment.yaml"] });
      const c = find(objects, "Deployment").spec.template.spec.containers[0];
      return (c.env as Array<{ name: string; value?: string }>).filter((e) => e.name === "NODE_OPTIONS").map((e) => e.value);
    };
    expect(await heap({})).toEqual(["--max-old-space-size=384"]); // the default 512Mi
    for (const [memory, mib] of [["1Gi", 768], ["1.5Gi", 1152], ["1G", 715], ["300M", 214], ["2048Ki", 1], [536870912, 384], ["536870912", 384]] as const) {
      expect(await heap({ "resources.limits.memory": memory }), String(memory)).toEqual([`--max-old-space-size=${mib}`]);
    }
    expect(await heap({ "resources.limits": null })).toEqual([]);
    expect(await heap({}, [`${CHART}/ci/resources-values.yaml`])).toEqual(["--max-old-space-size=768"]);
    expect(await heap({ extraEnv: [{ name: "NODE_OPTIONS", value: "--max-old-space-size=100" }] })).toEqual(["--max-old-space-size=100"]);
    const bad = await helm(templateArgs({ namespace: ns, setJson: { "resources.limits.memory": "lots" } }));
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/resources.limits.memory "lots": expected a number of bytes with an optional suffix/);
  });

  it("network policy: ingress to metrics/health/publish only; egress to DNS, the API server and public webhook addresses", async () => {
    const { objects } = await render(variant("networkpolicy-values.yaml", "hl"));
    const np = find(objects, "NetworkPolicy");
    expect(np.spec.policyTypes).toEqual(["Ingress", "Egress"]);
    expect(np.spec.ingress.map((r: { ports: Array<{ port: string }> }) => r.ports[0]!.port)).toEqual(["metrics", "health", "publish"]);
    expect(np.spec.ingress[0].from).toEqual([{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }]);
    const [dns, api, hooks] = np.spec.egress;
    expect(dns.ports).toContainEqual({ port: 53, protocol: "UDP" });
    expect(api.to).toEqual([{ ipBlock: { cidr: "10.0.0.1/32" } }]);
    expect(hooks.ports).toEqual([{ port: 443, protocol: "TCP" }]);
    // IPv4 exceptions on the IPv4 block, IPv6 ones on the IPv6 block (mixing is refused).
    expect(hooks.to[0].ipBlock.except).toEqual(["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"]);
    expect(hooks.to[1].ipBlock).toEqual({ cidr: "::/0", except: ["fd00::/8"] });
  });

  it("stream mode: HOOKLINE_NATS_URL from a Secret or as a plain URL, egress to NATS in the NetworkPolicy; absent by default", async () => {
    const { objects } = await render(variant("stream-values.yaml", "hl"));
    expect(env(find(objects, "Deployment")).HOOKLINE_NATS_URL).toEqual({ name: "HOOKLINE_NATS_URL", valueFrom: { secretKeyRef: { name: "hookline-nats", key: "url" } } });
    expect(env(find(objects, "Deployment")).HOOKLINE_STREAM_REPLICAS).toMatchObject({ value: "3" });
    // Stream mode's bounds: the defaults, and values passed as they are.
    expect(["HOOKLINE_STREAM_MAX_HELD_BYTES", "HOOKLINE_STREAM_MAX_AGE_MS", "HOOKLINE_STREAM_NAMESPACE_MAX_MESSAGES", "HOOKLINE_STREAM_NAMESPACE_MAX_BYTES"].map((k) => env(find(objects, "Deployment"))[k]?.value)).toEqual(["33554432", "604800000", "1000000", "268435456"]);
    const bounded = await render({ ...variant("stream-values.yaml", "hl"), setJson: { stream: { maxHeldBytes: 268435456, maxAgeMs: 86400000, namespaceQuota: { messages: 5000, bytes: 10737418240 } } } });
    expect(["HOOKLINE_STREAM_MAX_HELD_BYTES", "HOOKLINE_STREAM_MAX_AGE_MS", "HOOKLINE_STREAM_NAMESPACE_MAX_MESSAGES", "HOOKLINE_STREAM_NAMESPACE_MAX_BYTES"].map((k) => env(find(bounded.objects, "Deployment"))[k]?.value)).toEqual(["268435456", "86400000", "5000", "10737418240"]);
    expect(find(objects, "NetworkPolicy").spec.egress.at(-1)).toEqual({ ports: [{ port: 4222, protocol: "TCP" }], to: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "nats" } } }] });
    const plain = await render({ ...variant(undefined, "hl"), setJson: { stream: { natsUrl: "nats://nats.nats.svc:4222" } } });
    expect(env(find(plain.objects, "Deployment")).HOOKLINE_NATS_URL).toMatchObject({ value: "nats://nats.nats.svc:4222" });
    expect(env(find((await render(variant(undefined, "hl"))).objects, "Deployment"))).not.toHaveProperty("HOOKLINE_NATS_URL");
  });

  it("stream mode with NATS authentication: the user from a Secret, its password and the NATS CA as mounted files, the files where the variables say; the operator accepts what is rendered", async () => {
    const { objects } = await render(variant("stream-auth-values.yaml", "hl"));
    const deploy = find(objects, "Deployment");
    const e = env(deploy);
    expect(e.HOOKLINE_NATS_URL).toMatchObject({ value: "tls://nats.nats.svc:4222" });
    expect(e.HOOKLINE_NATS_USER).toEqual({ name: "HOOKLINE_NATS_USER", valueFrom: { secretKeyRef: { name: "hookline-nats-user", key: "user" } } });
    expect(e.HOOKLINE_NATS_PASSWORD_FILE!.value).toBe("/etc/hookline/nats-credentials/password");
    expect(e.HOOKLINE_NATS_TLS_CA_FILE!.value).toBe("/etc/hookline/nats-tls/ca.crt");
    for (const name of ["HOOKLINE_NATS_TLS_CERT_FILE", "HOOKLINE_NATS_TLS_KEY_FILE", "HOOKLINE_NATS_ALLOW_INSECURE", "HOOKLINE_INSTALLATION"]) expect(e, name).not.toHaveProperty(name);
    const pod = deploy.spec.template.spec;
    expect(pod.containers[0].volumeMounts).toEqual(
      expect.arrayContaining([
        { name: "nats-credentials", mountPath: "/etc/hookline/nats-credentials", readOnly: true },
        { name: "nats-tls", mountPath: "/etc/hookline/nats-tls", readOnly: true },
      ]),
    );
    expect(pod.volumes).toEqual(
      expect.arrayContaining([
        { name: "nats-credentials", secret: { secretName: "hookline-nats-user", items: [{ key: "password", path: "password" }] } },
        { name: "nats-tls", secret: { secretName: "hookline-nats-ca", items: [{ key: "ca.crt", path: "ca.crt" }] } },
      ]),
    );
    // What the chart renders, the operator accepts: its own configuration parser reads it.
    const { loadConfig } = await import("../../src/config/config.js");
    const values = Object.fromEntries(Object.entries(e).flatMap(([k, v]) => (v.value !== undefined ? [[k, v.value]] : [])));
    const config = loadConfig({ ...values, HOOKLINE_NATS_USER: "hookline-operator" });
    expect(config.natsAuth).toEqual({ allowInsecure: false, credentials: { user: "hookline-operator", passwordFile: "/etc/hookline/nats-credentials/password" }, tls: { caFile: "/etc/hookline/nats-tls/ca.crt" } });
    expect(config.installation).toBe(`${ns}/hl-hookline-leader`);

    // A client certificate, an installation name, and (for a throwaway NATS) allowInsecure.
    const more = await render({ ...variant("stream-auth-values.yaml", "hl"), setJson: { "stream.natsTls.clientCertificate": true, "stream.installation": "eu-west/prod", "stream.allowInsecure": true } });
    const m = env(find(more.objects, "Deployment"));
    expect(m.HOOKLINE_NATS_TLS_CERT_FILE!.value).toBe("/etc/hookline/nats-tls/tls.crt");
    expect(m.HOOKLINE_NATS_TLS_KEY_FILE!.value).toBe("/etc/hookline/nats-tls/tls.key");
    expect(m.HOOKLINE_NATS_ALLOW_INSECURE!.value).toBe("true");
    expect(m.HOOKLINE_INSTALLATION!.value).toBe("eu-west/prod");
    expect(find(more.objects, "Deployment").spec.template.spec.volumes.find((v: { name: string }) => v.name === "nats-tls").secret.items).toEqual([
      { key: "ca.crt", path: "ca.crt" },
      { key: "tls.crt", path: "tls.crt" },
      { key: "tls.key", path: "tls.key" },
    ]);

    // Without a NATS URL nothing of it is rendered (the operator would refuse the variables).
    const off = find((await render({ ...variant(undefined, "hl"), setJson: { stream: { natsCredentialsSecret: { name: "hookline-nats-user" }, natsTls: { secretName: "hookline-nats-ca" }, allowInsecure: true } } })).objects, "Deployment");
    expect(Object.keys(env(off)).filter((k) => k.startsWith("HOOKLINE_NATS"))).toEqual([]);
    expect((off.spec.template.spec.volumes ?? []).map((v: { name: string }) => v.name)).not.toContain("nats-credentials");

    for (const bad of ['stream.installation="a b"', 'stream.natsCredentialsSecret.userKey=""', 'stream.natsTls.clientCertificate="yes"', "stream.allowInsecure=1"]) {
      const r = await helm(["template", "hl", CHART, "--set-json", bad]);
      expect(r.code, bad).not.toBe(0);
    }
  });

  // Each bad value, and the words helm's error must contain.
  const INVALID: Array<[string, Record<string, unknown>, RegExp]> = [
    ["replicas as a string", { replicaCount: "two" }, /replicaCount/],
    ["a misspelled top-level key", { replicas: 2 }, /replicas/],
    ["a misspelled nested key", { delivery: { timeoutMS: 1000 } }, /timeoutMS/],
    ["a namespace that is not a DNS label", { watchNamespaces: ["Team_A"] }, /watchNamespaces/],
    ["an unknown drain action", { drain: { action: "explode" } }, /action/],
    ["a delivery timeout under 100 ms", { delivery: { timeoutMs: 50 } }, /timeoutMs/],
    ["a breaker threshold of 0", { circuitBreaker: { failureThreshold: 0 } }, /failureThreshold/],
    ["a CIDR with a /33", { delivery: { allowedNetworks: ["10.0.0.0/33"] } }, /allowedNetworks/],
    ["an unknown log level", { logLevel: "verbose" }, /logLevel/],
    ["a NATS URL that is not nats:// or tls://", { stream: { natsUrl: "http://nats.nats.svc:4222" } }, /natsUrl/],
    ["a held-bytes budget under 1 MiB", { stream: { maxHeldBytes: 1000 } }, /maxHeldBytes/],
    ["a held-bytes budget above half the memory limit in stream mode", { stream: { natsUrl: "nats://nats.nats.svc:4222", maxHeldBytes: 300 * 1024 * 1024 } }, /stream\.maxHeldBytes \(314572800\) must be at most half of resources\.limits\.memory \(512Mi\)/],
    ["a namespace quota of 0 messages", { stream: { namespaceQuota: { messages: 0 } } }, /messages/],
    ["an age limit past 14 days", { stream: { maxAgeMs: 1_209_600_001 } }, /maxAgeMs/],
    ["an alert duration without a unit", { prometheusRule: { alerts: { breakerOpen: { for: "5" } } } }, /for/],
    ["a success threshold above 1", { prometheusRule: { alerts: { lowSuccessRatio: { threshold: 95 } } } }, /threshold/],
    ["an image pull policy that does not exist", { image: { pullPolicy: "Sometimes" } }, /pullPolicy/],
    ["a drain timeout longer than the grace period allows", { drain: { timeoutMs: 29_000 } }, /drain\.timeoutMs \(29000\) must leave drain\.marginSeconds \(5 s\).*at most 25000/],
    ["a grace period shorter than the drain margin", { terminationGracePeriodSeconds: 3 }, /terminationGracePeriodSeconds \(3\) must be at least drain\.marginSeconds \(5\)/],
  ];

  it.each(INVALID)("refuses %s", async (_what, values, message) => {
    const args = templateArgs({ namespace: ns });
    for (const [k, v] of Object.entries(values)) args.push("--set-json", `${k}=${JSON.stringify(v)}`);
    const r = await helm(args);
    expect(r.code, r.stdout).not.toBe(0);
    expect(r.stderr).toMatch(message);
  });

  it("helm install --dry-run=server renders NOTES.txt with the next steps", async () => {
    const r = await helm(["install", "hl", CHART, "--kubeconfig", inject("kubeconfig"), "--namespace", ns, "--dry-run=server"]);
    expect(r.code, r.stderr).toBe(0);
    const notes = r.stdout.slice(r.stdout.indexOf("NOTES:"));
    expect(notes).toContain(`kubectl -n ${ns} rollout status deployment/hl-hookline`);
    expect(notes).toContain("kind: WebhookSubscription");
    expect(notes).toContain("kubectl -n shop wait --for=condition=Succeeded whdel/evt-1001-acme");
    expect(notes).toContain('hookline.dev/replay="endpoint fixed, INC-42"');
    // Heredocs a user can paste: the terminator alone at the start of a line.
    expect(notes.match(/^YAML$/gm)).toHaveLength(2);
    expect(notes).toContain("Over HTTPS, for users allowed to get /metrics: bind ClusterRole hl-hookline-metrics-reader to your Prometheus' ServiceAccount (metrics.auth.readers).");
    const bound = await helm(["install", "hl", CHART, "--kubeconfig", inject("kubeconfig"), "--namespace", ns, "--dry-run=server", "--set-json", 'metrics.auth.readers=[{"kind":"ServiceAccount","name":"prometheus","namespace":"monitoring"},{"kind":"Group","name":"sre"}]']);
    expect(bound.code, bound.stderr).toBe(0);
    expect(bound.stdout).toContain("(bound: ServiceAccount monitoring/prometheus, Group sre).");
  });

  it("metrics: METRICS_AUTH=kubernetes over HTTPS with a certificate the chart makes for the Service's name; the reader role and its bindings; a ServiceMonitor that sends Prometheus' token and checks the name; off: plain HTTP", async () => {
    const readers = [{ kind: "ServiceAccount", name: "prometheus", namespace: "monitoring" }, { kind: "Group", name: "sre" }];
    const { objects } = await render({ release: "hl", namespace: ns, setJson: { serviceMonitor: { enabled: true }, metrics: { auth: { readers } } } });
    const deploy = find(objects, "Deployment");
    const e = env(deploy);
    expect(e.METRICS_AUTH!.value).toBe("kubernetes");
    expect(e.METRICS_TLS_CERT_FILE!.value).toBe("/etc/hookline/metrics-tls/tls.crt");
    expect(e.METRICS_TLS_KEY_FILE!.value).toBe("/etc/hookline/metrics-tls/tls.key");
    const pod = deploy.spec.template.spec;
    expect(pod.containers[0].volumeMounts).toContainEqual({ name: "metrics-tls", mountPath: "/etc/hookline/metrics-tls", readOnly: true });
    expect(pod.volumes).toContainEqual({ name: "metrics-tls", secret: { secretName: "hl-hookline-metrics-tls", items: [{ key: "tls.crt", path: "tls.crt" }, { key: "tls.key", path: "tls.key" }] } });

    // The certificate: for the metrics Service's names, signed by ca.crt, its key the one given.
    const secret = find(objects, "Secret", "hl-hookline-metrics-tls");
    expect(secret.type).toBe("kubernetes.io/tls");
    const [crt, key, ca] = ["tls.crt", "tls.key", "ca.crt"].map((k) => Buffer.from(secret.data[k], "base64").toString("utf8")) as [string, string, string];
    const host = `hl-hookline-metrics.${ns}.svc`;
    const x509 = new X509Certificate(crt);
    expect(x509.subjectAltName).toContain(`DNS:${host}`);
    expect(x509.verify(new X509Certificate(ca).publicKey)).toBe(true);
    // The operator loads it (METRICS_TLS), and a client that trusts ca.crt alone verifies the Service's name.
    const dir = mkdtempSync(join(tmpdir(), "hookline-chart-metrics-"));
    try {
      writeFileSync(join(dir, "tls.crt"), crt);
      writeFileSync(join(dir, "tls.key"), key);
      const { readTlsPair, METRICS_TLS } = await import("../../src/access/tls.js");
      await readTlsPair({ certFile: join(dir, "tls.crt"), keyFile: join(dir, "tls.key") }, METRICS_TLS);
      const { loadConfig } = await import("../../src/config/config.js");
      const values = Object.fromEntries(Object.entries(e).flatMap(([k, v]) => (v.value !== undefined ? [[k, v.value]] : [])));
      expect(loadConfig(values).metrics).toEqual({ auth: "kubernetes", tls: { certFile: "/etc/hookline/metrics-tls/tls.crt", keyFile: "/etc/hookline/metrics-tls/tls.key" } });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const server = createHttpsServer({ cert: crt, key }, (_req, res) => res.end("ok"));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const port = (server.address() as { port: number }).port;
      const handshake = (servername: string) =>
        new Promise<string>((resolve) => {
          const s = tlsConnect({ host: "127.0.0.1", port, ca, servername }, () => (s.end(), resolve("ok")));
          s.on("error", (err) => resolve((err as NodeJS.ErrnoException).code ?? err.message));
        });
      expect(await handshake(host)).toBe("ok");
      expect(await handshake("elsewhere.example")).toBe("ERR_TLS_CERT_ALTNAME_INVALID");
    } finally {
      server.close();
    }

    const endpoint = find(objects, "ServiceMonitor").spec.endpoints[0];
    expect(endpoint).toMatchObject({ port: "metrics", scheme: "https", bearerTokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token", tlsConfig: { serverName: host, ca: { secret: { name: "hl-hookline-metrics-tls", key: "ca.crt" } } } });
    expect(find(objects, "ClusterRole", "hl-hookline-metrics-reader").rules).toEqual([{ nonResourceURLs: ["/metrics"], verbs: ["get"] }]);
    expect(find(objects, "ClusterRoleBinding", "hl-hookline-metrics-reader").subjects).toEqual([
      { kind: "ServiceAccount", name: "prometheus", namespace: "monitoring" },
      { kind: "Group", name: "sre", apiGroup: "rbac.authorization.k8s.io" },
    ]);
    expect(find(objects, "ClusterRoleBinding", "hl-hookline-metrics-auth").subjects).toEqual([{ kind: "ServiceAccount", name: "hl-hookline", namespace: ns }]);

    // A certificate of the user's (cert-manager): mounted, none made.
    const own = await render({ release: "hl", namespace: ns, setJson: { serviceMonitor: { enabled: true }, metrics: { tls: { secretName: "hookline-metrics-cert" } } } });
    expect(own.objects.filter((o) => o.kind === "Secret")).toEqual([]);
    expect(find(own.objects, "Deployment").spec.template.spec.volumes).toContainEqual(expect.objectContaining({ name: "metrics-tls", secret: expect.objectContaining({ secretName: "hookline-metrics-cert" }) }));
    expect(find(own.objects, "ServiceMonitor").spec.endpoints[0].tlsConfig.ca.secret.name).toBe("hookline-metrics-cert");

    // Off: plain HTTP, no reviews, no certificate.
    const off = await render({ release: "hl", namespace: ns, setJson: { serviceMonitor: { enabled: true }, metrics: { auth: { enabled: false } } } });
    const offEnv = env(find(off.objects, "Deployment"));
    for (const name of ["METRICS_AUTH", "METRICS_TLS_CERT_FILE", "METRICS_TLS_KEY_FILE"]) expect(offEnv, name).not.toHaveProperty(name);
    expect(off.objects.filter((o) => o.kind === "Secret" || /metrics-(auth|reader)$/.test(o.metadata.name))).toEqual([]);
    const offEndpoint = find(off.objects, "ServiceMonitor").spec.endpoints[0];
    expect(offEndpoint).not.toHaveProperty("scheme");
    expect(offEndpoint).not.toHaveProperty("bearerTokenFile");
  });

  it("the publish door's audiences, TLS Secret and failed-authentication limit, and tracing, reach the pod; nothing of them by default", async () => {
    const plain = env(find((await render({ release: "hl", namespace: ns, showOnly: ["templates/deployment.yaml"] })).objects, "Deployment"));
    for (const name of ["PUBLISH_TOKEN_AUDIENCES", "PUBLISH_TLS_CERT_FILE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS"]) expect(plain, name).not.toHaveProperty(name);

    const { objects } = await render(variant("namespaced-values.yaml", "hl"));
    const deploy = find(objects, "Deployment");
    const e = env(deploy);
    expect(e.PUBLISH_TOKEN_AUDIENCES!.value).toBe("hookline,hookline.example.com/publish");
    expect(e.PUBLISH_AUTH_FAILURE_BURST!.value).toBe("20");
    expect(e.PUBLISH_AUTH_FAILURE_PER_MINUTE!.value).toBe("30");
    expect(e.PUBLISH_TLS_CERT_FILE!.value).toBe("/etc/hookline/publish-tls/tls.crt");
    expect(e.PUBLISH_TLS_KEY_FILE!.value).toBe("/etc/hookline/publish-tls/tls.key");
    const pod = deploy.spec.template.spec;
    expect(pod.containers[0].volumeMounts).toContainEqual({ name: "publish-tls", mountPath: "/etc/hookline/publish-tls", readOnly: true });
    expect(pod.volumes).toContainEqual({ name: "publish-tls", secret: { secretName: "hookline-publish-tls", items: [{ key: "tls.crt", path: "tls.crt" }, { key: "tls.key", path: "tls.key" }] } });
    const door = objects.find((o) => o.kind === "Service" && o.metadata.name === "hl-hookline-publish")!;
    expect(door.spec.ports[0].appProtocol).toBe("https");

    expect(e.OTEL_EXPORTER_OTLP_ENDPOINT!.value).toBe("http://otel-collector.observability.svc:4318");
    expect(e.OTEL_SERVICE_NAME!.value).toBe("hookline-teams");
    expect(e.OTEL_TRACES_SAMPLER!.value).toBe("parentbased_traceidratio");
    expect(e.OTEL_TRACES_SAMPLER_ARG!.value).toBe("0.5");
    expect(e.OTEL_RESOURCE_ATTRIBUTES!.value).toBe("deployment.environment.name=prod,team=a%20b%2Cc%3Dd");
    expect(e.OTEL_EXPORTER_OTLP_HEADERS).toEqual({ name: "OTEL_EXPORTER_OTLP_HEADERS", valueFrom: { secretKeyRef: { name: "hookline-otlp", key: "OTEL_EXPORTER_OTLP_HEADERS" } } });

    // What the chart renders, the operator accepts: its own configuration parser reads these values.
    const { loadConfig } = await import("../../src/config/config.js");
    const values = Object.fromEntries(Object.entries(e).flatMap(([k, v]) => (v.value !== undefined ? [[k, v.value]] : [])));
    const config = loadConfig({ ...values, OTEL_EXPORTER_OTLP_HEADERS: "api-key=x" });
    expect(config.publish).toMatchObject({ audiences: ["hookline", "hookline.example.com/publish"], authFailures: { burst: 20, perMinute: 30 } });
    expect(config.tracing).toMatchObject({ url: "http://otel-collector.observability.svc:4318/v1/traces", serviceName: "hookline-teams", resourceAttributes: { "deployment.environment.name": "prod", team: "a b,c=d" } });

    // Stream mode beside tracing: both reach the pod (every replica delivers, and exports its spans).
    const streamed = env(find((await render({ ...variant("stream-values.yaml", "hl"), setJson: { tracing: { otlpEndpoint: "http://otel-collector.observability.svc:4318", headersSecret: "hookline-otlp" } } })).objects, "Deployment"));
    expect(streamed.HOOKLINE_NATS_URL).toEqual({ name: "HOOKLINE_NATS_URL", valueFrom: { secretKeyRef: { name: "hookline-nats", key: "url" } } });
    expect(streamed.OTEL_EXPORTER_OTLP_ENDPOINT!.value).toBe("http://otel-collector.observability.svc:4318");
    expect(streamed.OTEL_EXPORTER_OTLP_HEADERS!.valueFrom).toEqual({ secretKeyRef: { name: "hookline-otlp", key: "OTEL_EXPORTER_OTLP_HEADERS" } });

    for (const bad of ['publish.audiences=["a,b"]', "publish.authFailures.burst=0", 'tracing.otlpEndpoint="collector:4318"', 'tracing.sampler="sometimes"']) {
      const r = await helm(["template", "hl", CHART, "--set-json", bad]);
      expect(r.code, bad).not.toBe(0);
    }
  });

  it("proxy credentials from a Secret: HTTPS_PROXY and HTTP_PROXY from proxy.existingSecret, never in the Deployment", async () => {
    const { objects } = await render({ release: "hl", namespace: ns, setJson: { proxy: { httpsProxy: "http://ignored:3128", httpProxy: "", noProxy: [".svc"], existingSecret: "egress-proxy" } }, showOnly: ["templates/deployment.yaml"] });
    const e = env(find(objects, "Deployment"));
    for (const name of ["HTTPS_PROXY", "HTTP_PROXY"]) expect(e[name]).toEqual({ name, valueFrom: { secretKeyRef: { name: "egress-proxy", key: name, optional: true } } });
    expect(e.NO_PROXY!.value).toBe(".svc");
  });

  it("the secret reference policy: bound to the watched namespaces only; Deny and Warn together are refused", async () => {
    const { objects } = await render({ release: "hl", namespace: ns, setJson: { watchNamespaces: ["team-a", "team-b"] }, showOnly: ["templates/secret-reference-policy.yaml"] });
    const binding = find(objects, "ValidatingAdmissionPolicyBinding");
    expect(binding.spec.policyName).toBe(find(objects, "ValidatingAdmissionPolicy").metadata.name);
    expect(binding.spec.matchResources.namespaceSelector).toEqual({ matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "In", values: ["team-a", "team-b"] }] });
    const bad = await helm(["template", "hl", CHART, "--set-json", 'secretReferencePolicy.validationActions=["Deny","Warn"]']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain("secretReferencePolicy/validationActions");
  });

  it("refuses bad values the same way at helm install (schema before any API call)", async () => {
    const r = await helm(["install", "bad", CHART, "--kubeconfig", inject("kubeconfig"), "--namespace", ns, "--dry-run=server", "--set-json", 'replicaCount="two"']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/values don't meet the specifications of the schema/);
  });
});
