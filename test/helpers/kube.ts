// Typed access to Hookline's resources from tests, through kubectl (what users use).
import { kubectl, kubectlOk, waitFor } from "./cluster.js";

export interface Obj {
  metadata: { name: string; namespace: string; uid: string; resourceVersion: string; annotations?: Record<string, string>; generation?: number };
  spec: Record<string, unknown>;
  status?: Record<string, any>;
}

export async function apply(manifest: unknown | unknown[]): Promise<void> {
  const docs = Array.isArray(manifest) ? manifest : [manifest];
  await kubectlOk(["apply", "-f", "-"], { input: JSON.stringify({ apiVersion: "v1", kind: "List", items: docs }) });
}

/** kubectl create (no last-applied annotation: works for payloads near the size limit). */
export async function create(manifest: unknown | unknown[]): Promise<void> {
  const docs = Array.isArray(manifest) ? manifest : [manifest];
  await kubectlOk(["create", "-f", "-"], { input: JSON.stringify({ apiVersion: "v1", kind: "List", items: docs }) });
}

export async function getObj(kind: "whsub" | "whdel" | string, namespace: string, name: string): Promise<Obj | undefined> {
  const r = await kubectl(["get", kind, name, "-n", namespace, "-o", "json"]);
  if (r.code !== 0) {
    if (/NotFound|not found/.test(r.stderr)) return undefined;
    throw new Error(r.stderr);
  }
  return JSON.parse(r.stdout) as Obj;
}

export async function listObjs(kind: string, namespace: string, extra: string[] = []): Promise<Obj[]> {
  return (JSON.parse(await kubectlOk(["get", kind, "-n", namespace, "-o", "json", ...extra])) as { items: Obj[] }).items;
}

/**
 * A WebhookSubscription. A spec without secretRef (and without a chosen scheme) is given
 * signature.scheme None, as a user must write it to send unsigned requests; rawSubscription
 * leaves the spec as it is.
 */
export function subscription(namespace: string, name: string, spec: Record<string, unknown>): unknown {
  const signature = spec.signature as Record<string, unknown> | undefined;
  const unsigned = spec.secretRef === undefined && signature?.scheme === undefined;
  return rawSubscription(namespace, name, unsigned ? { ...spec, signature: { ...signature, scheme: "None" } } : spec);
}

export function rawSubscription(namespace: string, name: string, spec: Record<string, unknown>): unknown {
  return { apiVersion: "hookline.dev/v1alpha1", kind: "WebhookSubscription", metadata: { name, namespace }, spec };
}

export function delivery(namespace: string, name: string, subscriptionName: string, extra: Record<string, unknown> = {}): unknown {
  return {
    apiVersion: "hookline.dev/v1alpha1",
    kind: "WebhookDelivery",
    metadata: { name, namespace },
    spec: { subscriptionRef: { name: subscriptionName }, eventType: "order.paid", payload: { order: name }, ...extra },
  };
}

export const TEST_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

export function secret(namespace: string, name: string, data: Record<string, string> = { secret: TEST_SECRET }): unknown {
  return { apiVersion: "v1", kind: "Secret", metadata: { name, namespace }, type: "Opaque", stringData: data };
}

export async function events(namespace: string, name?: string): Promise<Array<{ reason: string; message: string; type: string; involvedObject: { name: string; kind: string } }>> {
  const items = (JSON.parse(await kubectlOk(["get", "events", "-n", namespace, "-o", "json"])) as { items: any[] }).items;
  return items.filter((e) => !name || e.involvedObject?.name === name);
}

/** Waits until every named delivery is in `phase`; returns them. */
export async function waitForPhase(namespace: string, names: string | string[], phase: string, timeoutMs = 30_000): Promise<Obj[]> {
  const list = Array.isArray(names) ? names : [names];
  return waitFor(
    async () => {
      const objs = await Promise.all(list.map((n) => getObj("whdel", namespace, n)));
      return objs.every((o) => o?.status?.phase === phase) ? (objs as Obj[]) : undefined;
    },
    { description: `${list.length === 1 ? list[0] : `${list.length} deliveries`} ${phase}`, timeoutMs },
  );
}

/**
 * A ServiceAccount `name` in `namespace` that may create deliveries in each of `publishTo`
 * (default: its own namespace), and a token for it: issued for the publish door's audience
 * (`hookline`) unless `audience` says another, or `null` for the API server's own (what
 * `kubectl create token` gives without --audience).
 */
export async function publisherToken(namespace: string, name: string, opts: { publishTo?: string[]; audience?: string | null; duration?: string } = {}): Promise<string> {
  const targets = opts.publishTo ?? [namespace];
  await apply([
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace } },
    ...targets.flatMap((ns) => [
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", metadata: { name: `${name}-publishes`, namespace: ns }, rules: [{ apiGroups: ["hookline.dev"], resources: ["webhookdeliveries"], verbs: ["create"] }] },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: `${name}-publishes`, namespace: ns },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: `${name}-publishes` },
        subjects: [{ kind: "ServiceAccount", name, namespace }],
      },
    ]),
  ]);
  return serviceAccountToken(namespace, name, opts);
}

/** `kubectl create token`: for the publish door's audience (`hookline`) by default; `audience: null` for the API server's own. */
export async function serviceAccountToken(namespace: string, name: string, opts: { audience?: string | null; duration?: string } = {}): Promise<string> {
  const audience = opts.audience === undefined ? "hookline" : opts.audience;
  return (await kubectlOk(["create", "token", name, "-n", namespace, `--duration=${opts.duration ?? "10m"}`, ...(audience === null ? [] : ["--audience", audience])])).trim();
}
