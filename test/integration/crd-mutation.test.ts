// Each rule of the invalid-spec table is what refuses its case: for every rule, a private copy
// of the generated CRD (its own API group, kind and plural; no short names or category, so
// other test files sharing this API server never see it) first refuses the case, then, with
// exactly that rule deleted from its schema, accepts the very same write. The hookline.dev CRDs
// are never touched.
//
// The writes go over HTTP (one connection pool), not through kubectl: ~500 kubectl starts made
// this file CPU-bound. What kubectl would print is the API server's Status, whose causes are
// checked here (test/integration/crds.test.ts checks the same table through kubectl itself).
import { randomBytes } from "node:crypto";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { deliveryCrd, subscriptionCrd } from "../../src/api/crd.js";
import { ApiError, KubeClient } from "../../src/kube/client.js";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { INVALID_SPEC_CASES, asCrd, caseObject, describeEnforcer, findEnforcer, openApiSchema, submittedSpec, withoutEnforcer } from "../helpers/crd-cases.js";
import type { CaseKind, CaseTarget, CrdObject, Enforcer, InvalidSpecCase } from "../helpers/crd-cases.js";

const RUN = randomBytes(3).toString("hex");
const RUN_LABEL = "hookline.dev/test-run";
const GROUP_DOMAIN = "hookline-mutation.dev";
const CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
/** The API server's note that CEL rules were skipped because of other errors: it refuses nothing by itself. */
const CEL_SKIPPED = /some validation rules were not checked because the object was invalid/;

interface Status {
  message?: string;
  details?: { causes?: { field?: string; message?: string }[] };
}

/** A refusal's causes as kubectl prints them (`field: message`), from the API server's Status. */
function causesOf(err: ApiError): string[] {
  const causes = (err.body as Status | undefined)?.details?.causes ?? [];
  return causes.map((c) => `${c.field ?? "<nil>"}: ${c.message ?? ""}`).filter((c) => !CEL_SKIPPED.test(c));
}

/** The generated CRD of `kind`, moved to `group` under names nothing else uses. */
function privateCrd(kind: CaseKind, group: string): CrdObject {
  const crd = asCrd(structuredClone(kind === "subscription" ? subscriptionCrd() : deliveryCrd()));
  const names = crd.spec.names;
  const mutantKind = `Mutant${names.kind}`;
  crd.spec.group = group;
  crd.spec.names = {
    kind: mutantKind,
    listKind: `${mutantKind}List`,
    plural: `mutant${names.plural}`,
    singular: `mutant${names.singular}`,
  };
  crd.metadata = { name: `${crd.spec.names.plural}.${group}`, labels: { "hookline.dev/test": "crd-mutation", [RUN_LABEL]: RUN } };
  return crd;
}

interface RuleGroup {
  index: number;
  title: string;
  kind: CaseKind;
  enforcedBy: Enforcer;
  cases: InvalidSpecCase[];
}

/** Cases refused by the same rule share one mutated CRD: it still lacks only that rule. */
function ruleGroups(): RuleGroup[] {
  const byRule = new Map<string, RuleGroup>();
  for (const c of INVALID_SPEC_CASES) {
    const key = `${c.kind} ${describeEnforcer(c.enforcedBy)}`;
    let g = byRule.get(key);
    if (!g) {
      g = { index: byRule.size, title: key, kind: c.kind, enforcedBy: c.enforcedBy, cases: [] };
      byRule.set(key, g);
    }
    g.cases.push(c);
  }
  return [...byRule.values()];
}

describe("each rule of the invalid-spec table is what refuses its case", () => {
  let ns: string;
  let api: KubeClient;
  const runCrds = { labelSelector: `${RUN_LABEL}=${RUN}` };

  /** The object path of a case (its collection for a create). */
  const casePath = (plural: string, t: CaseTarget, named: boolean) => `/apis/${t.apiVersion}/namespaces/${t.namespace}/${plural}${named ? `/${t.name}` : ""}`;
  /**
   * For an update case, creates the valid object the refused update is written over and returns
   * its resourceVersion (a replace names it, as kubectl replace does).
   */
  const prepare = async (c: InvalidSpecCase, plural: string, t: CaseTarget): Promise<string | undefined> => {
    if (!c.update) return undefined;
    const created = await api.request<{ metadata: { resourceVersion: string } }>({ method: "POST", path: casePath(plural, t, false), body: caseObject(t, c.spec) });
    return created.metadata.resourceVersion;
  };
  /** The write that must be refused (a server dry run): a create of the spec, or a replace with the update. */
  const submit = (c: InvalidSpecCase, plural: string, t: CaseTarget, resourceVersion: string | undefined) => {
    const body = caseObject(t, submittedSpec(c)) as { metadata: Record<string, unknown> };
    if (resourceVersion) body.metadata.resourceVersion = resourceVersion;
    return api.request<{ spec: Record<string, unknown> }>({ method: c.update ? "PUT" : "POST", path: casePath(plural, t, !!c.update), query: { dryRun: "All" }, body });
  };

  beforeAll(async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(inject("kubeconfig"));
    api = await KubeClient.create(kc, { connections: 16 });
    ns = await createNamespace("crd-mutation");
  });

  afterAll(async () => {
    // Also when a test failed midway: no private CRD outlives this file.
    if (api) {
      await api.request({ method: "DELETE", path: CRDS, query: runCrds });
      await waitFor(async () => (await api.request<{ items: unknown[] }>({ method: "GET", path: CRDS, query: runCrds })).items.length === 0, {
        description: "the mutation CRDs to be deleted",
        timeoutMs: 60_000,
      });
      await api.close();
    }
    if (ns) await deleteNamespace(ns);
  });

  const groups = ruleGroups();

  it("every case of the table is covered", () => {
    expect(groups.flatMap((g) => g.cases)).toHaveLength(INVALID_SPEC_CASES.length);
    expect(groups.length).toBeGreaterThanOrEqual(20);
  });

  it.concurrent.for(groups)("$title", async (g, { expect, onTestFinished }) => {
    const group = `m${g.index}-${RUN}.${GROUP_DOMAIN}`;
    const original = privateCrd(g.kind, group);
    const { kind, plural } = original.spec.names;
    const crdName = original.metadata.name;
    const crdPath = `${CRDS}/${crdName}`;
    onTestFinished(async () => {
      await api.request({ method: "DELETE", path: crdPath }).catch((err: unknown) => {
        if (!(err instanceof ApiError && err.isNotFound)) throw err;
      });
    });

    await api.request({ method: "POST", path: CRDS, body: original });
    await waitFor(
      async () => {
        const crd = await api.request<CrdObject>({ method: "GET", path: crdPath });
        return (crd.status?.conditions ?? []).some((c) => c.type === "Established" && c.status === "True");
      },
      { description: `${crdName} Established` },
    );
    await waitFor(
      async () => (await api.request<{ resources: { name: string }[] }>({ method: "GET", path: `/apis/${group}/v1alpha1` })).resources.some((x) => x.name === plural),
      { description: `${plural}.${group} in discovery` },
    );
    const before = await api.request<CrdObject>({ method: "GET", path: crdPath });
    findEnforcer(before, g.enforcedBy); // the rule is there to delete

    const targets: CaseTarget[] = g.cases.map((_, i) => ({ apiVersion: `${group}/v1alpha1`, kind, namespace: ns, name: `case-${i}` }));

    // The unmodified schema, in the same private group, refuses each case, naming the field.
    const versions: Array<string | undefined> = [];
    for (const [i, c] of g.cases.entries()) {
      versions[i] = await prepare(c, plural, targets[i]!);
      const refused = await submit(c, plural, targets[i]!, versions[i]).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused, `${c.name}: accepted before the mutation`).toBeInstanceOf(ApiError);
      const err = refused as ApiError;
      expect(err.status, err.message).toBe(422);
      const causes = causesOf(err);
      expect(causes, err.message).toHaveLength(1);
      expect(causes[0]!.startsWith(`${c.field}: `), causes[0]).toBe(true);
      expect(causes[0]).toContain(c.message);
    }

    // Delete exactly this rule.
    const mutated = withoutEnforcer(original, g.enforcedBy);
    mutated.metadata.resourceVersion = before.metadata.resourceVersion;
    await api.request({ method: "PUT", path: crdPath, body: mutated });
    const after = await api.request<CrdObject>({ method: "GET", path: crdPath });
    expect(() => findEnforcer(after, g.enforcedBy)).toThrow();
    // ... and nothing else: the stored schema is the one before, minus the rule.
    expect(openApiSchema(after)).toEqual(openApiSchema(withoutEnforcer(before, g.enforcedBy)));

    // Now the API server accepts the same write (a dry run: nothing is stored). It takes a
    // moment to pick up the new schema; until then the old one refuses.
    for (const [i, c] of g.cases.entries()) {
      const accepted = await waitFor(
        () => submit(c, plural, targets[i]!, versions[i]),
        { description: `${c.name} accepted without ${describeEnforcer(g.enforcedBy)}`, timeoutMs: 30_000 },
      );
      // Accepted as written, not pruned or rewritten into something valid.
      expect(accepted.spec, c.name).toMatchObject(submittedSpec(c));
      for (const key of Object.keys(c.spec)) {
        if (!(key in submittedSpec(c))) expect(accepted.spec, c.name).not.toHaveProperty(key);
      }
      if ("required" in g.enforcedBy) expect(accepted.spec, c.name).not.toHaveProperty(g.enforcedBy.required);
    }
  });
});
