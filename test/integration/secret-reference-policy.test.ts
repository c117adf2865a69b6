// No confused deputy, on the real API server: the chart's ValidatingAdmissionPolicy refuses a
// WebhookSubscription that names a Secret its author may not get. Two ServiceAccounts with real
// tokens may both edit subscriptions; only `writer` may get the Secrets. Without the policy the
// `intruder` can point the operator at any Secret (shown first); with it, each Secret
// reference is checked on create and whenever an update changes one, and the refusal names the
// Secret. An update that changes only the URL is not checked again, unless
// secretReferencePolicy.recheckOnURLChange is on.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SECRET_REFERENCE_FIELDS } from "../../src/api/admission.js";
import { subscriptionCrd } from "../../src/api/crd.js";
import { createNamespace, deleteNamespace, kubectl, kubectlOk, waitFor } from "../helpers/cluster.js";
import { schemaNode, at, type SchemaNode } from "../helpers/crd-cases.js";
import { render, type K8sObject } from "../helpers/helm.js";
import { apply, getObj, secret, subscription } from "../helpers/kube.js";

const URL_OK = "https://hooks.example.com/orders";
const OAUTH2 = (id: string, sec: string) => ({ tokenURL: "https://auth.example.com/token", clientIdSecretRef: { name: id, key: "client-id" }, clientSecretSecretRef: { name: sec, key: "client-secret" } });

describe("secretReferencePolicy: a subscription may only name Secrets its author may get", () => {
  let ns: string;
  let dir: string;
  let release: string;
  let policyObjects: K8sObject[] = [];
  const kubeconfigs: Record<"writer" | "intruder", string> = { writer: "", intruder: "" };

  /** kubectl as one of the ServiceAccounts. */
  const as = (who: "writer" | "intruder", args: string[], input?: unknown) => kubectl([...args, "-n", ns], { kubeconfig: kubeconfigs[who], ...(input ? { input: JSON.stringify(input) } : {}) });
  const createAs = (who: "writer" | "intruder", name: string, spec: Record<string, unknown>) => as(who, ["create", "-f", "-"], subscription(ns, name, spec));
  const patchAs = (who: "writer" | "intruder", name: string, spec: Record<string, unknown>) => as(who, ["patch", "whsub", name, "--type=merge", "-p", JSON.stringify({ spec })]);

  const renderPolicy = async (values: Record<string, unknown> = {}) =>
    (await render({ release, namespace: ns, showOnly: ["templates/secret-reference-policy.yaml"], setJson: { watchNamespaces: [ns], ...values } })).objects;

  beforeAll(async () => {
    ns = await createNamespace("secret-policy");
    release = `vap-${randomBytes(3).toString("hex")}`;
    dir = await mkdtemp(join(tmpdir(), "hookline-vap-"));
    await apply([
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "writer", namespace: ns } },
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "intruder", namespace: ns } },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: "subscription-editor", namespace: ns },
        rules: [{ apiGroups: ["hookline.dev"], resources: ["webhooksubscriptions"], verbs: ["get", "list", "create", "update", "patch", "delete"] }],
      },
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", metadata: { name: "subscription-editors", namespace: ns }, roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "subscription-editor" }, subjects: ["writer", "intruder"].map((name) => ({ kind: "ServiceAccount", name, namespace: ns })) },
      // writer may get these Secrets, by name; nobody but the admin may get "other".
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", metadata: { name: "team-secrets", namespace: ns }, rules: [{ apiGroups: [""], resources: ["secrets"], resourceNames: ["signing", "tenant-token", "client-cert", "receiver-ca", "oauth"], verbs: ["get"] }] },
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", metadata: { name: "team-secrets", namespace: ns }, roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "team-secrets" }, subjects: [{ kind: "ServiceAccount", name: "writer", namespace: ns }] },
      ...["signing", "tenant-token", "receiver-ca", "oauth", "other"].map((name) => secret(ns, name)),
    ]);
    const admin = JSON.parse(await kubectlOk(["config", "view", "--raw", "--minify", "-o", "json"])) as { clusters: Array<{ cluster: Record<string, unknown> }> };
    for (const who of ["writer", "intruder"] as const) {
      const token = (await kubectlOk(["create", "token", who, "-n", ns, "--duration=1h"])).trim();
      kubeconfigs[who] = join(dir, who);
      await writeFile(
        kubeconfigs[who],
        JSON.stringify({ apiVersion: "v1", kind: "Config", clusters: [{ name: "test", cluster: admin.clusters[0]!.cluster }], users: [{ name: who, user: { token } }], contexts: [{ name: who, context: { cluster: "test", user: who, namespace: ns } }], "current-context": who }),
      );
    }
    // The identities really differ.
    expect((await as("writer", ["auth", "can-i", "get", "secret/signing"])).stdout.trim()).toBe("yes");
    expect((await as("intruder", ["auth", "can-i", "get", "secret/signing"])).stdout.trim()).toBe("no");
    expect((await as("intruder", ["auth", "can-i", "create", "webhooksubscriptions.hookline.dev"])).stdout.trim()).toBe("yes");
  });

  afterAll(async () => {
    for (const o of policyObjects) await kubectl(["delete", o.kind, o.metadata.name, "--ignore-not-found"]);
    if (ns) await deleteNamespace(ns);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("covers every Secret reference of the schema", () => {
    const found: string[] = [];
    const walk = (node: SchemaNode, path: string) => {
      for (const [key, child] of Object.entries(node.properties ?? {})) {
        const p = `${path}.${key}`;
        if (/secret(Key)?Ref$/i.test(key)) found.push(p);
        walk(child, p);
      }
      if (node.items) walk(node.items, `${path}[]`);
    };
    walk(schemaNode(subscriptionCrd(), at("spec")), "spec");
    expect(found.sort()).toEqual([...SECRET_REFERENCE_FIELDS].sort());
  });

  it("without the policy, the intruder can name a Secret it may not read (the hole it closes)", async () => {
    const r = await createAs("intruder", "before-policy", { url: URL_OK, secretRef: { name: "signing" } });
    expect(r.code, r.stderr).toBe(0);
    await kubectlOk(["delete", "whsub", "before-policy", "-n", ns]);
  });

  describe("with the policy", () => {
    beforeAll(async () => {
      policyObjects = await renderPolicy();
      expect(policyObjects.map((o) => o.kind).sort()).toEqual(["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]);
      await apply(policyObjects);
      // The API server loads a new policy within a moment: until then the create goes through.
      await waitFor(
        async () => {
          const r = await createAs("intruder", "probe", { url: URL_OK, secretRef: { name: "signing" } });
          if (r.code === 0) await kubectlOk(["delete", "whsub", "probe", "-n", ns]);
          return r.code !== 0 && r.stderr.includes("names Secret signing");
        },
        { description: "the policy to refuse the intruder", timeoutMs: 30_000, intervalMs: 250 },
      );
    });

    it("the writer, who may get the Secrets, creates a subscription naming them", async () => {
      const r = await createAs("writer", "team", {
        url: URL_OK,
        secretRef: { name: "signing" },
        headersFrom: [{ name: "X-Api-Key", secretKeyRef: { name: "tenant-token", key: "secret" } }],
        tls: { caBundleSecretRef: { name: "receiver-ca", key: "secret" } },
        oauth2: OAUTH2("oauth", "oauth"),
      });
      expect(r.code, r.stderr).toBe(0);
      expect(await getObj("whsub", ns, "team")).toBeDefined();
    });

    it.each<[string, Record<string, unknown>, string]>([
      ["spec.secretRef", { secretRef: { name: "signing" } }, "signing"],
      ["spec.headersFrom[0].secretKeyRef", { headersFrom: [{ name: "X-Ok", secretKeyRef: { name: "tenant-token", key: "secret" } }] }, "tenant-token"],
      ["spec.tls.clientCertificateSecretRef", { tls: { clientCertificateSecretRef: { name: "client-cert" } } }, "client-cert"],
      ["spec.tls.caBundleSecretRef", { tls: { caBundleSecretRef: { name: "receiver-ca" } } }, "receiver-ca"],
      ["spec.oauth2.clientIdSecretRef", { oauth2: OAUTH2("oauth", "oauth") }, "oauth"],
    ])("the intruder is refused a subscription naming a Secret in %s, with a message naming the field and the Secret", async (field, spec, secretName) => {
      const name = `intruder-${randomBytes(3).toString("hex")}`;
      const r = await createAs("intruder", name, { url: URL_OK, ...spec });
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(`WebhookSubscription ${name}: ${field} names Secret ${secretName}, which system:serviceaccount:${ns}:intruder may not get in namespace ${ns}`);
      expect(await getObj("whsub", ns, name)).toBeUndefined();
    });

    it.each<[string, Record<string, unknown>]>([
      ["spec.oauth2.clientSecretSecretRef", { secretRef: { name: "signing" }, oauth2: OAUTH2("oauth", "other") }],
      ["spec.headersFrom[1].secretKeyRef", { headersFrom: [{ name: "X-A", secretKeyRef: { name: "tenant-token", key: "a" } }, { name: "X-B", secretKeyRef: { name: "other", key: "b" } }] }],
    ])("the writer too is refused the one Secret it may not get (%s)", async (field, spec) => {
      const r = await createAs("writer", `writer-${randomBytes(3).toString("hex")}`, { url: URL_OK, ...spec });
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(`${field} names Secret other, which system:serviceaccount:${ns}:writer may not get`);
    });

    it("the intruder may still create a subscription that names no Secret", async () => {
      const r = await createAs("intruder", "no-secrets", { url: URL_OK, headers: { "X-Tenant": "acme" } });
      expect(r.code, r.stderr).toBe(0);
    });

    it("an update that changes only the URL (or pauses, or annotates) is not checked again", async () => {
      for (const r of [
        await patchAs("intruder", "team", { url: "https://hooks.example.com/v2" }),
        await patchAs("intruder", "team", { paused: true }),
        await as("intruder", ["annotate", "whsub", "team", "hookline.dev/reset-endpoint=endpoint fixed, INC-7"]),
      ]) {
        expect(r.code, r.stderr).toBe(0);
      }
      expect((await getObj("whsub", ns, "team"))!.spec.url).toBe("https://hooks.example.com/v2");
    });

    // Every Secret of "team" is checked again; the message names the first the intruder may not get.
    it.each<[string, Record<string, unknown>]>([
      ["a headersFrom key", { headersFrom: [{ name: "X-Api-Key", secretKeyRef: { name: "tenant-token", key: "admin-password" } }] }],
      ["the signing Secret's key", { secretRef: { name: "signing", key: "previous" } }],
      ["the OAuth2 token URL (where the client secret goes)", { oauth2: { tokenURL: "https://attacker.example/token" } }],
      ["the tls block", { tls: { clientCertificateSecretRef: { name: "client-cert" } } }],
    ])("an update by the intruder that changes %s is checked, and refused", async (_what, spec) => {
      const before = (await getObj("whsub", ns, "team"))!.spec;
      const r = await patchAs("intruder", "team", spec);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(`WebhookSubscription team: spec.secretRef names Secret signing, which system:serviceaccount:${ns}:intruder may not get`);
      expect((await getObj("whsub", ns, "team"))!.spec).toEqual(before);
    });

    it("the same update by the writer goes through", async () => {
      const r = await patchAs("writer", "team", { headersFrom: [{ name: "X-Api-Key", secretKeyRef: { name: "tenant-token", key: "rotated" } }] });
      expect(r.code, r.stderr).toBe(0);
    });

    it("recheckOnURLChange: a URL change is checked too", async () => {
      const strict = await renderPolicy({ secretReferencePolicy: { enabled: true, validationActions: ["Deny"], recheckOnURLChange: true, namespaceSelector: {} } });
      await apply(strict);
      await waitFor(
        async () => {
          const r = await patchAs("intruder", "team", { url: `https://attacker.example/${randomBytes(2).toString("hex")}` });
          return r.code !== 0 && r.stderr.includes("names Secret signing");
        },
        { description: "the URL change refused", timeoutMs: 30_000, intervalMs: 250 },
      );
      expect((await patchAs("writer", "team", { url: "https://hooks.example.com/v3" })).code).toBe(0);
      await apply(policyObjects);
    });
  });

  it("secretReferencePolicy.enabled=false renders nothing", async () => {
    const on = (await render({ release, namespace: ns })).objects;
    const off = (await render({ release, namespace: ns, setJson: { secretReferencePolicy: { enabled: false, validationActions: ["Deny"], recheckOnURLChange: false, namespaceSelector: {} } } })).objects;
    const policies = (objects: K8sObject[]) => objects.filter((o) => o.kind.startsWith("ValidatingAdmissionPolicy")).map((o) => o.kind);
    expect(policies(on).sort()).toEqual(["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]);
    expect(policies(off)).toEqual([]);
  });
});
