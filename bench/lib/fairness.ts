// The fairness phase's parts: ServiceAccount identities (the admin token is in system:masters,
// which API Priority and Fairness exempts, so neither Hookline nor the other client may use it),
// the chart's FlowSchema and PriorityLevelConfiguration for the operator, and "another client":
// a loop of get / list / update on ConfigMaps, like a typical controller, timing every request.
import { readFileSync, writeFileSync } from "node:fs";
import { parse, stringify } from "yaml";
import { ApiError, type KubeClient } from "../../src/kube/client.js";
import { now, percentiles, sleep, type Percentiles } from "./util.js";

/** A ServiceAccount bound to cluster-admin (not exempt from APF), and a kubeconfig with its token. */
export async function serviceAccountKubeconfig(admin: KubeClient, adminKubeconfig: string, ns: string, name: string, file: string): Promise<string> {
  const tolerate = (p: Promise<unknown>) =>
    p.catch((err: Error) => {
      if (!(err instanceof ApiError && err.isAlreadyExists)) throw err;
    });
  await tolerate(admin.request({ method: "POST", path: "/api/v1/namespaces", body: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } } }));
  await tolerate(admin.request({ method: "POST", path: `/api/v1/namespaces/${ns}/serviceaccounts`, body: { apiVersion: "v1", kind: "ServiceAccount", metadata: { name } } }));
  await tolerate(
    admin.request({
      method: "POST",
      path: "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
      body: { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRoleBinding", metadata: { name: `${ns}-${name}` }, roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" }, subjects: [{ kind: "ServiceAccount", name, namespace: ns }] },
    }),
  );
  const tr = await admin.request<{ status: { token: string } }>({ method: "POST", path: `/api/v1/namespaces/${ns}/serviceaccounts/${name}/token`, body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds: 7200 } } });
  const kc = parse(readFileSync(adminKubeconfig, "utf8")) as { users: Array<{ name: string; user: Record<string, unknown> }> };
  for (const u of kc.users) u.user = { token: tr.status.token };
  writeFileSync(file, stringify(kc), { mode: 0o600 });
  return file;
}

/** The chart's objects (templates/flowcontrol.yaml, default values) for one ServiceAccount. */
export function flowControlObjects(name: string, sa: { namespace: string; name: string }): [unknown, unknown] {
  const plc = {
    apiVersion: "flowcontrol.apiserver.k8s.io/v1",
    kind: "PriorityLevelConfiguration",
    metadata: { name },
    spec: { type: "Limited", limited: { nominalConcurrencyShares: 20, lendablePercent: 50, borrowingLimitPercent: 0, limitResponse: { type: "Queue", queuing: { queues: 64, handSize: 6, queueLengthLimit: 50 } } } },
  };
  const fs = {
    apiVersion: "flowcontrol.apiserver.k8s.io/v1",
    kind: "FlowSchema",
    metadata: { name },
    spec: {
      priorityLevelConfiguration: { name },
      matchingPrecedence: 8000,
      distinguisherMethod: { type: "ByNamespace" },
      rules: [
        {
          subjects: [{ kind: "ServiceAccount", serviceAccount: sa }],
          resourceRules: [
            { verbs: ["*"], apiGroups: ["hookline.dev"], resources: ["*"], clusterScope: true, namespaces: ["*"] },
            { verbs: ["*"], apiGroups: ["", "events.k8s.io"], resources: ["events"], namespaces: ["*"] },
          ],
        },
      ],
    },
  };
  return [plc, fs];
}

export async function applyFlowControl(admin: KubeClient, objects: [unknown, unknown]): Promise<void> {
  const [plc, fs] = objects as Array<{ metadata: { name: string } }>;
  await admin.request({ method: "POST", path: "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations", body: plc });
  await admin.request({ method: "POST", path: "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas", body: fs });
  for (const deadline = Date.now() + 30_000; ; ) {
    const got = await admin.request<{ status?: { conditions?: Array<{ type: string; status: string }> } }>({ method: "GET", path: `/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/${fs!.metadata.name}` });
    if (got.status?.conditions?.some((c) => c.type === "Dangling" && c.status === "False")) return;
    if (Date.now() > deadline) throw new Error("the FlowSchema did not become active within 30 s");
    await sleep(200);
  }
}

export interface ClientLoopResult {
  requests: number;
  errors: number;
  perSecond: number;
  latencyMs: { all: Percentiles; get: Percentiles; list: Percentiles; update: Percentiles };
}

/** ConfigMaps the other client works on. */
export async function prepareConfigMaps(client: KubeClient, ns: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await client.request({ method: "POST", path: `/api/v1/namespaces/${ns}/configmaps`, body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: `cm-${i}` }, data: { n: "0", pad: "x".repeat(512) } } }).catch((err) => {
      if (!(err instanceof ApiError && err.isAlreadyExists)) throw err;
    });
  }
}

/**
 * Runs `workers` loops of get → list → update (read-modify-write, retried on conflict) on the
 * ConfigMaps until `stop` resolves; every request's latency is kept.
 */
export async function clientLoop(client: KubeClient, ns: string, count: number, workers: number, stop: Promise<unknown>): Promise<ClientLoopResult> {
  const lat = { get: [] as number[], list: [] as number[], update: [] as number[] };
  let errors = 0;
  let done = false;
  void stop.finally(() => (done = true));
  const timed = async <T>(kind: keyof typeof lat, fn: () => Promise<T>): Promise<T> => {
    const t0 = now();
    try {
      return await fn();
    } finally {
      lat[kind].push(now() - t0);
    }
  };
  const t0 = now();
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      for (let i = w; !done; i += workers) {
        const path = `/api/v1/namespaces/${ns}/configmaps/cm-${i % count}`;
        try {
          const cm = await timed("get", () => client.request<{ metadata: Record<string, unknown>; data: Record<string, string> }>({ method: "GET", path }));
          await timed("list", () => client.request({ method: "GET", path: `/api/v1/namespaces/${ns}/configmaps` }));
          cm.data.n = String(Number(cm.data.n) + 1);
          await timed("update", () => client.request({ method: "PUT", path, body: cm }));
        } catch (err) {
          if (!(err instanceof ApiError && err.status === 409)) errors++;
        }
      }
    }),
  );
  const seconds = (now() - t0) / 1000;
  const all = [...lat.get, ...lat.list, ...lat.update];
  return { requests: all.length, errors, perSecond: Math.round(all.length / seconds), latencyMs: { all: percentiles(all), get: percentiles(lat.get), list: percentiles(lat.list), update: percentiles(lat.update) } };
}
