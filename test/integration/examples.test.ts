// examples/ as a new user meets it: `kubectl apply -f examples/` against a cluster with the
// CRDs, nothing edited (the README's walkthrough runs it for real: readme-walkthrough.test.ts).
// examples/full/subscription-full.yaml shows every field of the spec; it is not applied by
// `kubectl apply -f examples/` (kubectl does not descend into folders without -R), and this test
// applies it with the five Secrets it names and sees it become Ready.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { subscriptionCrd } from "../../src/api/crd.js";
import { createNamespace, deleteNamespace, kubectl, kubectlOk, waitFor } from "../helpers/cluster.js";
import { at, schemaNode } from "../helpers/crd-cases.js";
import type { SchemaNode } from "../helpers/crd-cases.js";
import { apply, getObj, secret } from "../helpers/kube.js";
import { startOperator } from "../helpers/operator.js";
import { TestCa, tlsSecret } from "../helpers/pki.js";

const EXAMPLES = fileURLToPath(new URL("../../examples", import.meta.url));
const FULL = join(EXAMPLES, "full", "subscription-full.yaml");
const NAMESPACE = "shop";

interface Doc {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: Record<string, unknown>;
  stringData?: Record<string, string>;
}

const files = readdirSync(EXAMPLES)
  .filter((f) => /\.ya?ml$/.test(f))
  .sort();
const text = (file: string) => readFileSync(join(EXAMPLES, file), "utf8");
const docsOf = (file: string): Doc[] => parseAllDocuments(text(file)).map((d) => d.toJSON() as Doc);
const allDocs = files.flatMap(docsOf);
const fullDoc = (): Doc => parseAllDocuments(readFileSync(FULL, "utf8")).map((d) => d.toJSON() as Doc)[0]!;
const resourceName = (d: Doc) => `${d.kind === "Namespace" || d.kind === "Secret" ? d.kind.toLowerCase() : `${d.kind.toLowerCase()}.hookline.dev`}/${d.metadata.name}`;
const lines = (out: string) =>
  out
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)
    .sort();

/** Reads back every example object from `namespace` and checks that nothing was dropped. */
async function expectStoredAsWritten(namespace: string): Promise<void> {
  for (const d of allDocs) {
    if (d.kind === "Namespace") continue;
    if (d.kind === "Secret") {
      const s = JSON.parse(await kubectlOk(["get", "secret", d.metadata.name, "-n", namespace, "-o", "json"])) as { data: Record<string, string> };
      for (const [key, value] of Object.entries(d.stringData ?? {})) expect(Buffer.from(s.data[key]!, "base64").toString()).toBe(value);
      continue;
    }
    const stored = await getObj(d.kind === "WebhookSubscription" ? "whsub" : "whdel", namespace, d.metadata.name);
    // Every field as written (defaults may add more to the minimal one, but nothing is pruned).
    expect(stored?.spec, d.metadata.name).toMatchObject(d.spec!);
  }
}

describe("examples/", () => {
  it("holds a Namespace, a Secret, two subscriptions and a delivery, all in namespace shop; the full reference apart", () => {
    expect(files).toEqual([
      "00-namespace.yaml",
      "01-secret.yaml",
      "02-subscription-minimal.yaml",
      "03-subscription-acme.yaml",
      "04-delivery.yaml",
    ]);
    expect(readdirSync(join(EXAMPLES, "full"))).toEqual(["subscription-full.yaml"]);
    // The walkthrough's subscriptions name only the Secret that examples/ holds.
    const secrets = allDocs.filter((d) => d.kind === "Secret").map((d) => d.metadata.name);
    for (const d of allDocs.filter((x) => x.kind === "WebhookSubscription")) {
      expect(Object.keys(d.spec!).filter((k) => ["headersFrom", "tls", "oauth2", "proxy"].includes(k)), d.metadata.name).toEqual([]);
      expect(secrets).toContain((d.spec!.secretRef as { name: string }).name);
    }
    expect(allDocs.map((d) => d.kind)).toEqual(["Namespace", "Secret", "WebhookSubscription", "WebhookSubscription", "WebhookDelivery"]);
    expect(allDocs.filter((d) => d.kind !== "Namespace").every((d) => d.metadata.namespace === NAMESPACE)).toBe(true);
    expect(allDocs[0]!.metadata.name).toBe(NAMESPACE);
  });

  it("full/subscription-full.yaml sets every field of the spec, and nothing the schema does not know", () => {
    const full = fullDoc();
    const missing: string[] = [];
    const unknown: string[] = [];
    const compare = (schema: SchemaNode, value: unknown, path: string) => {
      if (schema.properties) {
        const obj = value as Record<string, unknown>;
        for (const [key, child] of Object.entries(schema.properties)) {
          if (obj[key] === undefined) missing.push(`${path}.${key}`);
          else compare(child, obj[key], `${path}.${key}`);
        }
        for (const key of Object.keys(obj)) if (!(key in schema.properties)) unknown.push(`${path}.${key}`);
      } else if (schema.additionalProperties) {
        // A map (headers): shown with at least one entry.
        if (Object.keys(value as object).length === 0) missing.push(`${path}.<entry>`);
      } else if (schema.type === "array") {
        if ((value as unknown[]).length === 0) missing.push(`${path}[]`);
      }
    };
    const specSchema = schemaNode(subscriptionCrd(), at("spec"));
    compare(specSchema, full.spec, "spec");
    expect(missing).toEqual([]);
    expect(unknown).toEqual([]);
    // The comparison reaches the nested fields, not only the top level.
    expect(Object.keys(schemaNode(subscriptionCrd(), at("spec.retry")).properties ?? {})).toContain("respectRetryAfter");
    expect((full.spec!.retry as Record<string, unknown>).respectRetryAfter).toBe(true);
  });

  it("kubectl apply -f examples/ applies every file as it is (into namespace shop)", async ({ onTestFinished }) => {
    // A shop left Terminating by an earlier run goes away by itself; a live one is someone else's.
    await waitFor(
      async () => {
        const r = await kubectl(["get", "namespace", NAMESPACE, "-o", "jsonpath={.status.phase}"]);
        if (r.code === 0 && r.stdout === "Active") {
          throw new Error(`namespace ${NAMESPACE} exists and is in use: this test applies examples/ into it and deletes it afterwards`);
        }
        return r.code !== 0 && /NotFound/.test(r.stderr);
      },
      { description: `namespace ${NAMESPACE} to be absent`, timeoutMs: 120_000 },
    );
    onTestFinished(() => deleteNamespace(NAMESPACE));

    const out = await kubectlOk(["apply", "-f", EXAMPLES]);
    expect(lines(out)).toEqual(lines(allDocs.map((d) => `${resourceName(d)} created`).join("\n")));
    await expectStoredAsWritten(NAMESPACE);
    expect(lines(await kubectlOk(["get", "hookline", "-n", NAMESPACE, "-o", "name"]))).toEqual([
      "webhookdelivery.hookline.dev/evt-1001-acme",
      "webhooksubscription.hookline.dev/acme",
      "webhooksubscription.hookline.dev/globex",
    ]);

    // Applying again changes nothing, for real or as a server dry run. (kubectl always reports a
    // Secret written with stringData as "configured": stringData is never read back.)
    const again = (suffix: string) =>
      lines(allDocs.map((d) => `${resourceName(d)} ${d.kind === "Secret" ? "configured" : "unchanged"}${suffix}`).join("\n"));
    expect(lines(await kubectlOk(["apply", "-f", EXAMPLES]))).toEqual(again(""));
    expect(lines(await kubectlOk(["apply", "-f", EXAMPLES, "--dry-run=server"]))).toEqual(again(" (server dry run)"));
  });

  it("every example passes a server dry run, then applies, in a fresh namespace (the namespace rewritten)", async ({ onTestFinished }) => {
    const ns = await createNamespace("examples");
    onTestFinished(() => deleteNamespace(ns));
    let replaced = 0;
    const manifest = files
      .map((f) =>
        text(f).replace(/^(\s*)(namespace|name): shop\s*$/gm, (_m, indent: string, key: string) => {
          replaced++;
          return `${indent}${key}: ${ns}`;
        }),
      )
      .join("\n---\n");
    // Each namespaced object's namespace, and the Namespace's name.
    expect(replaced).toBe(allDocs.length);

    const dry = await kubectlOk(["apply", "--dry-run=server", "-f", "-"], { input: manifest });
    for (const d of allDocs.filter((x) => x.kind !== "Namespace")) expect(dry).toContain(`${resourceName(d)} created (server dry run)`);
    expect(await kubectlOk(["get", "hookline,secrets", "-n", ns, "-o", "name"])).toBe("");

    const out = await kubectlOk(["apply", "-f", "-"], { input: manifest });
    for (const d of allDocs.filter((x) => x.kind !== "Namespace")) expect(out).toContain(`${resourceName(d)} created`);
    await expectStoredAsWritten(ns);
  });

  it("full/subscription-full.yaml, with the five Secrets it names, applies as written and becomes Ready", async ({ onTestFinished }) => {
    const ns = await createNamespace("examples-full");
    onTestFinished(() => deleteNamespace(ns));
    const full = fullDoc();
    // The Secrets, as its header comment says to create them (real PEM for the two TLS ones).
    const ca = await TestCa.create("Acme Receiver CA");
    onTestFinished(() => ca.close());
    const client = await ca.issue("hookline", "client");
    const header = readFileSync(FULL, "utf8").split("\napiVersion:")[0]!;
    const named = [...header.matchAll(/create secret \S+ (acme-[a-z-]+)/g)].map((m) => m[1]);
    expect(named).toEqual(["acme-signing", "acme-api-key", "acme-client-cert", "acme-receiver-ca", "acme-oauth"]);
    await apply([
      secret(ns, "acme-signing"),
      secret(ns, "acme-api-key", { "api-key": "k-4f1c9e" }),
      tlsSecret(ns, "acme-client-cert", client),
      secret(ns, "acme-receiver-ca", { "ca.crt": ca.cert }),
      secret(ns, "acme-oauth", { "client-id": "hookline", "client-secret": "s3cret" }),
    ]);
    // Every Secret the spec references is among those (so the header's list is complete).
    const refs = new Set<string>();
    JSON.stringify(full.spec, (key, value: unknown) => {
      if (/SecretRef$|^secretKeyRef$|^secretRef$/.test(key) && value && typeof value === "object") refs.add((value as { name: string }).name);
      return value;
    });
    expect([...refs].sort()).toEqual([...named].sort());

    const manifest = readFileSync(FULL, "utf8").replace(/^(\s*)namespace: shop\s*$/m, `$1namespace: ${ns}`);
    await kubectlOk(["apply", "-f", "-"], { input: manifest });
    // It comes back exactly as written: it leaves nothing to the defaults.
    expect((await getObj("whsub", ns, full.metadata.name))!.spec).toEqual(full.spec);
    const op = await startOperator({ namespaces: [ns] });
    onTestFinished(() => op.stop());
    await waitFor(
      async () => {
        const cond = ((await getObj("whsub", ns, full.metadata.name))?.status?.conditions as Array<{ type: string; status: string; reason: string; message: string }> | undefined)?.find((c) => c.type === "Ready");
        if (cond?.status === "False") throw new Error(`Ready=False ${cond.reason}: ${cond.message}`);
        return cond?.status === "True";
      },
      { description: `${full.metadata.name} Ready`, timeoutMs: 30_000 },
    );
  });
});
