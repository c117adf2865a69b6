// Each rule of the invalid-spec table is what refuses its case: for every rule, a private copy
// of the generated CRD (its own API group, kind and plural; no short names or category, so
// other test files sharing this API server never see it) first refuses the case, then, with
// exactly that rule deleted from its schema, accepts the very same write. The hookline.dev CRDs
// are never touched.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deliveryCrd, subscriptionCrd } from "../../src/api/crd.js";
import { createNamespace, deleteNamespace, kubectl, kubectlOk, waitFor } from "../helpers/cluster.js";
import type { KubectlResult } from "../helpers/cluster.js";
import {
  INVALID_SPEC_CASES,
  asCrd,
  describeEnforcer,
  findEnforcer,
  openApiSchema,
  prepareCase,
  refusalCauses,
  submitCase,
  submittedSpec,
  withoutEnforcer,
} from "../helpers/crd-cases.js";
import type { CaseKind, CaseTarget, CrdObject, Enforcer, InvalidSpecCase } from "../helpers/crd-cases.js";

const RUN = randomBytes(3).toString("hex");
const RUN_LABEL = "hookline.dev/test-run";
const GROUP_DOMAIN = "hookline-mutation.dev";

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
  let cacheDir: string;
  // A discovery cache of this file's own: the groups it adds and removes stay out of the one
  // the other test files' kubectl shares.
  const k = (args: string[], input?: string): Promise<KubectlResult> => kubectl(["--cache-dir", cacheDir, ...args], { input });
  const kOk = (args: string[], input?: string): Promise<string> => kubectlOk(["--cache-dir", cacheDir, ...args], { input });

  beforeAll(async () => {
    cacheDir = await mkdtemp(join(tmpdir(), "hookline-crd-mutation-"));
    ns = await createNamespace("crd-mutation");
  });

  afterAll(async () => {
    // Also when a test failed midway: no private CRD outlives this file.
    await k(["delete", "crd", "-l", `${RUN_LABEL}=${RUN}`, "--ignore-not-found", "--wait=false"]);
    await waitFor(async () => (await kOk(["get", "crd", "-l", `${RUN_LABEL}=${RUN}`, "-o", "name"])).trim() === "", {
      description: "the mutation CRDs to be deleted",
      timeoutMs: 60_000,
    });
    if (ns) await deleteNamespace(ns);
    if (cacheDir) await rm(cacheDir, { recursive: true, force: true });
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
    onTestFinished(async () => {
      await k(["delete", "crd", crdName, "--ignore-not-found", "--wait=false"]);
    });

    await kOk(["create", "-f", "-"], JSON.stringify(original));
    // Polled by hand: `kubectl wait` fails outright when it reads the CRD before its first status.
    await waitFor(
      async () => {
        const crd = JSON.parse(await kOk(["get", "crd", crdName, "-o", "json"])) as CrdObject;
        return (crd.status?.conditions ?? []).some((c) => c.type === "Established" && c.status === "True");
      },
      { description: `${crdName} Established` },
    );
    await waitFor(
      async () => {
        const r = await k(["get", "--raw", `/apis/${group}/v1alpha1`]);
        return r.code === 0 && (JSON.parse(r.stdout) as { resources: { name: string }[] }).resources.some((x) => x.name === plural);
      },
      { description: `${plural}.${group} in discovery` },
    );
    const before = JSON.parse(await kOk(["get", "crd", crdName, "-o", "json"])) as CrdObject;
    findEnforcer(before, g.enforcedBy); // the rule is there to delete

    const targets: CaseTarget[] = g.cases.map((_, i) => ({ apiVersion: `${group}/v1alpha1`, kind, namespace: ns, name: `case-${i}` }));
    // --validate=false: no client-side look-up of the new group's OpenAPI document (slow while
    // the API server rebuilds it for every CRD change); the server validates the schema anyway.
    const flags = ["--cache-dir", cacheDir, "--validate=false"];
    const submit = (c: InvalidSpecCase, t: CaseTarget) => submitCase(c, t, { dryRun: true, flags });

    // The unmodified schema, in the same private group, refuses each case, naming the field.
    for (const [i, c] of g.cases.entries()) {
      await prepareCase(c, targets[i]!, flags);
      const r = await submit(c, targets[i]!);
      expect(r.code, `${c.name}: accepted before the mutation`).not.toBe(0);
      const causes = refusalCauses(r.stderr);
      expect(causes, r.stderr).toHaveLength(1);
      expect(causes[0]!.startsWith(`${c.field}: `), causes[0]).toBe(true);
      expect(causes[0]).toContain(c.message);
    }

    // Delete exactly this rule.
    const mutated = withoutEnforcer(original, g.enforcedBy);
    mutated.metadata.resourceVersion = before.metadata.resourceVersion;
    await kOk(["replace", "-f", "-"], JSON.stringify(mutated));
    const after = JSON.parse(await kOk(["get", "crd", crdName, "-o", "json"])) as CrdObject;
    expect(() => findEnforcer(after, g.enforcedBy)).toThrow();
    // ... and nothing else: the stored schema is the one before, minus the rule.
    expect(openApiSchema(after)).toEqual(openApiSchema(withoutEnforcer(before, g.enforcedBy)));

    // Now the API server accepts the same write (a dry run: nothing is stored). It takes a
    // moment to pick up the new schema; until then the old one refuses.
    for (const [i, c] of g.cases.entries()) {
      const accepted = await waitFor(
        async () => {
          const r = await submit(c, targets[i]!);
          if (r.code !== 0) throw new Error(r.stderr.trim());
          return JSON.parse(r.stdout) as { spec: Record<string, unknown> };
        },
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
