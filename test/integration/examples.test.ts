// examples/ as a new user meets it: `kubectl apply -f examples/` against a cluster with the
// CRDs, nothing edited. 03-subscription-full.yaml shows every field of the spec.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { subscriptionCrd } from "../../src/api/crd.js";
import { createNamespace, deleteNamespace, kubectl, kubectlOk, waitFor } from "../helpers/cluster.js";
import { at, schemaNode } from "../helpers/crd-cases.js";
import type { SchemaNode } from "../helpers/crd-cases.js";
import { getObj } from "../helpers/kube.js";

const EXAMPLES = fileURLToPath(new URL("../../examples", import.meta.url));
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
  it("holds a Namespace, a Secret, a minimal and a full subscription, and a delivery, all in namespace shop", () => {
    expect(files).toEqual([
      "00-namespace.yaml",
      "01-secret.yaml",
      "02-subscription-minimal.yaml",
      "03-subscription-full.yaml",
      "04-delivery.yaml",
    ]);
    expect(allDocs.map((d) => d.kind)).toEqual(["Namespace", "Secret", "WebhookSubscription", "WebhookSubscription", "WebhookDelivery"]);
    expect(allDocs.filter((d) => d.kind !== "Namespace").every((d) => d.metadata.namespace === NAMESPACE)).toBe(true);
    expect(allDocs[0]!.metadata.name).toBe(NAMESPACE);
  });

  it("03-subscription-full.yaml sets every field of the spec, and nothing the schema does not know", () => {
    const full = docsOf("03-subscription-full.yaml")[0]!;
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
    // The full example comes back exactly as written: it leaves nothing to the defaults.
    const full = docsOf("03-subscription-full.yaml")[0]!;
    expect((await getObj("whsub", ns, full.metadata.name))!.spec).toEqual(full.spec);
  });
});
