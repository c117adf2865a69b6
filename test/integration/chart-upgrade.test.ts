// `helm upgrade` of a release installed from an older chart, with the real helm and the real API
// server. With --reuse-values Helm renders the new chart with the previous release's values only
// (the previous chart's values.yaml plus the user's values), never the new chart's values.yaml,
// so a block a newer chart added is missing from .Values; the templates put the chart's defaults
// there (hookline.fillDefaults in _helpers.tpl, templates/_defaults.tpl). With
// --reset-then-reuse-values (what docs/install.md advises) Helm starts from the new chart's
// values, then the user's.
//
// "The previous chart" is this chart copied to a temp dir with top-level keys removed from its
// values.yaml, as an older chart lacks the blocks added since. Each upgrade must give the release
// exactly what a fresh install of this chart with the same user values gives: the same manifest
// (`helm get manifest`), hooks and notes. One exception, by design: a top-level key in keepAbsent
// (startupProbe, podSecurityContext...: Helm deletes a key set to null, so there absence is the
// user's removal) stays absent, as a fresh install with that key set to null has it.
import { randomBytes } from "node:crypto";
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { parse, parseDocument, stringify } from "yaml";
import { chartDefaults } from "../../scripts/chart-defaults.js";
import { createNamespace, deleteNamespace, kubectl } from "../helpers/cluster.js";
import { CHART, helm, parseManifests } from "../helpers/helm.js";

// Its own release name: the chart's cluster-scoped objects (ClusterRoles, the admission policy)
// are named after the release, and another test's `helm install hl` refuses objects this one owns.
const RELEASE = `upgrade-${randomBytes(3).toString("hex")}`;
/**
 * The loop over blocks runs in this many releases at once (`${RELEASE}-0`...): each helm call
 * mostly waits on the API server, one after the other.
 */
const LANES = 3;
const DEFAULTS = chartDefaults(CHART);
const TOP_LEVEL = Object.keys(DEFAULTS.values);
const VALUES_YAML = await readFile(`${CHART}/values.yaml`, "utf8");

/**
 * What the user set at install: settings inside blocks a previous chart may lack (flowControl,
 * publish.tls, tests.ping, as `--reuse-values --set tests.ping.subscription=acme` in
 * docs/install.md), blocks turned on, and removals (null) that must survive the upgrade. Plus
 * watchNamespaces (the test's namespace) and no aggregated roles, so that the releases installed
 * here change nobody's rights outside that namespace while other test files run: no
 * ClusterRoles aggregated into view/edit/admin, the secret reference policy bound to the
 * namespace only.
 */
const USER_VALUES = {
  rbac: { aggregateToDefaultRoles: false },
  image: { repository: "registry.example.com/platform/hookline", tag: "0.2.0" },
  flowControl: { matchingPrecedence: 7000, borrowingLimitPercent: null },
  publish: { enabled: true, tls: { secretName: "hookline-publish-tls" } },
  networkPolicy: { enabled: true },
  tests: { ping: { subscription: "acme" } },
  startupProbe: null,
};

interface Release {
  manifest: string;
  hooks?: { path: string; manifest: string }[];
  info: { status: string; notes?: string };
}

/** What a release renders: its manifest, its hooks and its notes. */
/**
 * The manifest with the metrics certificate the chart makes (templates/metrics-tls.yaml) replaced by
 * a placeholder: each render of a release that has none yet makes a new one, by design. That an
 * upgrade keeps the one made at install has its own test below.
 */
function withoutGeneratedCertificate(manifest: string): string {
  return manifest
    .split("\n---\n")
    .map((doc) => (doc.includes("# Source: hookline/templates/metrics-tls.yaml") ? doc.replace(/^( {2}(?:tls\.crt|tls\.key|ca\.crt): )\S+$/gm, "$1<generated>") : doc))
    .join("\n---\n");
}

function rendered(r: Release) {
  return { manifest: withoutGeneratedCertificate(r.manifest), hooks: (r.hooks ?? []).map((h) => `# Source: ${h.path}\n${h.manifest}`).sort(), notes: r.info.notes };
}
type Rendered = ReturnType<typeof rendered>;

/** Every top-level key, and every nested block (map) that is not a keepAbsent key's content. */
function removablePaths(): string[] {
  const paths: string[] = [];
  const walk = (node: Record<string, unknown>, prefix: string) => {
    for (const [k, v] of Object.entries(node)) {
      const path = prefix + k;
      const isMap = !!v && typeof v === "object" && !Array.isArray(v);
      if (!prefix || isMap) paths.push(path);
      if (isMap && !DEFAULTS.keepAbsent.includes(path)) walk(v as Record<string, unknown>, `${path}.`);
    }
  };
  walk(DEFAULTS.values, "");
  return paths;
}

describe("helm upgrade from an older chart", () => {
  let ns: string;
  let kubeconfig: string;
  let tmp: string;
  let userValues: string;
  /** A fresh install of this chart with USER_VALUES (helm install --dry-run=server). */
  let fresh: Rendered;

  /** helm against the test cluster, in ns; throws with helm's stderr when it fails. */
  async function helmOk(args: string[]): Promise<string> {
    const r = await helm([...args, "--kubeconfig", kubeconfig, "--namespace", ns]);
    if (r.code !== 0) throw new Error(`helm ${args.join(" ")} exited ${r.code}: ${r.stderr.trim()}`);
    return r.stdout;
  }

  /** helm install or upgrade; returns the release (-o json). */
  async function release(args: string[]): Promise<Release> {
    return JSON.parse(await helmOk([...args, "--skip-crds", "-o", "json"])) as Release;
  }

  /**
   * A fresh install of this chart with the user's values, not applied (a server dry run; the API
   * server validates `fresh`; with more --set-json pairs, only what it renders is needed).
   */
  async function freshInstall(setJson: Record<string, unknown> = {}, name = RELEASE): Promise<Rendered> {
    const extra = Object.entries(setJson).flatMap(([k, v]) => ["--set-json", `${k}=${JSON.stringify(v)}`]);
    if (extra.length) extra.push("--disable-openapi-validation");
    return rendered(await release(["install", name, CHART, "--values", userValues, ...extra, "--dry-run=server"]));
  }

  /** This chart copied to dir, its values.yaml without the top-level keys `remove`, its version older. */
  async function previousChart(dir: string, remove: string[]): Promise<string> {
    await cp(CHART, dir, { recursive: true, force: true });
    const doc = parseDocument(VALUES_YAML);
    for (const key of remove) doc.delete(key);
    await writeFile(join(dir, "values.yaml"), remove.length === TOP_LEVEL.length ? "{}\n" : String(doc));
    const chartYaml = await readFile(join(dir, "Chart.yaml"), "utf8");
    await writeFile(join(dir, "Chart.yaml"), chartYaml.replace(/^version: .*$/m, "version: 0.0.1"));
    return dir;
  }

  /** Installs `previous` with the user's values, upgrades the release to this chart with `flag`, uninstalls it. */
  async function upgradeFrom(previous: string, flag: "--reuse-values" | "--reset-then-reuse-values"): Promise<Rendered> {
    expect((await release(["install", RELEASE, previous, "--values", userValues])).info.status).toBe("deployed");
    try {
      const upgraded = await release(["upgrade", RELEASE, CHART, flag]);
      expect(upgraded.info.status).toBe("deployed");
      expect(await helmOk(["get", "manifest", RELEASE])).toBe(`${upgraded.manifest}\n`);
      return rendered(upgraded);
    } finally {
      await helmOk(["uninstall", RELEASE]);
    }
  }

  beforeAll(async () => {
    ns = await createNamespace("chart-upgrade");
    kubeconfig = inject("kubeconfig");
    tmp = await mkdtemp(join(tmpdir(), "hookline-chart-upgrade-"));
    userValues = join(tmp, "user-values.yaml");
    await writeFile(userValues, stringify({ ...USER_VALUES, watchNamespaces: [ns] }));
    fresh = await freshInstall();
  });
  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
    // A failed test can leave the release; its cluster-scoped objects outlive the namespace.
    for (const name of [RELEASE, ...Array.from({ length: LANES }, (_, i) => `${RELEASE}-${i}`)]) {
      if (ns) await helm(["uninstall", name, "--kubeconfig", kubeconfig, "--namespace", ns, "--ignore-not-found"]);
    }
    if (ns) await deleteNamespace(ns);
  });

  it("the fresh install the upgrades are compared with has the user's values and removals", () => {
    const objects = parseManifests(fresh.manifest);
    const operatorLevel = (o: { metadata: { name: string } }) => !o.metadata.name.includes("-producers-");
    expect(objects.find((o) => o.kind === "FlowSchema" && operatorLevel(o))!.spec.matchingPrecedence).toBe(7000);
    const level = objects.find((o) => o.kind === "PriorityLevelConfiguration" && operatorLevel(o))!;
    expect(level.spec.limited.lendablePercent).toBe(50);
    expect(level.spec.limited).not.toHaveProperty("borrowingLimitPercent");
    const container = objects.find((o) => o.kind === "Deployment")!.spec.template.spec.containers[0];
    expect(container.image).toBe("registry.example.com/platform/hookline:0.2.0");
    expect(container).not.toHaveProperty("startupProbe");
    expect(container.livenessProbe.httpGet.path).toBe("/healthz");
    expect(objects.map((o) => o.kind)).toEqual(expect.arrayContaining(["NetworkPolicy", "ValidatingAdmissionPolicy", "PodDisruptionBudget", "Role"]));
    expect(objects.filter((o) => o.kind === "ClusterRole").map((o) => o.metadata.name).sort()).toEqual([`${RELEASE}-hookline-metrics-auth`, `${RELEASE}-hookline-metrics-reader`, `${RELEASE}-hookline-publish`]);
    const binding = objects.find((o) => o.kind === "ValidatingAdmissionPolicyBinding")!;
    expect(binding.spec.matchResources.namespaceSelector.matchExpressions[0].values).toEqual([ns]);
    const testPod = parseManifests(fresh.hooks.join("\n---\n")).find((o) => o.kind === "Pod")!;
    expect(testPod.spec.containers[0].resources.limits.memory).toBe("256Mi");
    expect(fresh.notes).toContain(`helm upgrade ${RELEASE} charts/hookline -n ${ns} --reset-then-reuse-values`);
  });

  it("every template renders with any top-level key or block removed: a setting gets the chart's default, a keepAbsent key stays removed", async () => {
    const template = (path?: string) => helm(["template", RELEASE, CHART, "--namespace", ns, ...(path ? ["--set-json", `${path}=null`] : [])]);
    const plain = await template();
    expect(plain.code, plain.stderr).toBe(0);
    const paths = removablePaths().filter((p) => p !== "image.repository"); // required by the schema
    expect(paths).toEqual(expect.arrayContaining(["flowControl", "publish.tls", "networkPolicy.egress.nats", "tests.ping", "startupProbe"]));
    const differs: string[] = [];
    for (let i = 0; i < paths.length; i += 2) {
      const pair = paths.slice(i, i + 2);
      const results = await Promise.all(pair.map((p) => template(p)));
      pair.forEach((p, j) => {
        expect(results[j]!.code, `${p}: ${results[j]!.stderr}`).toBe(0);
        if (withoutGeneratedCertificate(results[j]!.stdout) !== withoutGeneratedCertificate(plain.stdout)) differs.push(p);
      });
    }
    // Only keepAbsent keys render differently without their value: removals that mean something
    // (no startup probe, no pod security context, no memory limit, no sidecar label), kept.
    expect(differs.filter((p) => !DEFAULTS.keepAbsent.includes(p))).toEqual([]);
    expect(differs).toEqual(expect.arrayContaining(["startupProbe", "podSecurityContext", "resources.limits", "grafanaDashboard.labels"]));
  });

  it("the metrics certificate the chart made at install is kept by upgrades (lookup)", async () => {
    const secret = async () => {
      const r = await kubectl(["get", "secret", `${RELEASE}-hookline-metrics-tls`, "-n", ns, "-o", "json"]);
      expect(r.code, r.stderr).toBe(0);
      return (JSON.parse(r.stdout) as { data: Record<string, string> }).data;
    };
    expect((await release(["install", RELEASE, CHART, "--values", userValues])).info.status).toBe("deployed");
    try {
      const made = await secret();
      expect(Object.keys(made).sort()).toEqual(["ca.crt", "tls.crt", "tls.key"]);
      for (const flag of ["--reuse-values", "--reset-then-reuse-values"]) {
        expect((await release(["upgrade", RELEASE, CHART, flag])).info.status).toBe("deployed");
        expect(await secret(), flag).toEqual(made);
      }
    } finally {
      await helmOk(["uninstall", RELEASE]);
    }
  });

  it("--reset-then-reuse-values and --reuse-values from a chart whose values.yaml is empty give what a fresh install gives", async () => {
    const previous = await previousChart(join(tmp, "empty"), TOP_LEVEL);
    expect(parse(await readFile(join(previous, "values.yaml"), "utf8"))).toEqual({});
    // The new chart's defaults, then the user's values: a fresh install.
    expect(await upgradeFrom(previous, "--reset-then-reuse-values")).toEqual(fresh);
    // The previous release's values only: every block and setting gets this chart's defaults,
    // but the top-level keepAbsent keys the previous chart lacks (pod security contexts,
    // probes...) stay absent, as if the user had removed them.
    const keptAbsent = DEFAULTS.keepAbsent.filter((k) => !k.includes("."));
    expect(keptAbsent).toEqual(expect.arrayContaining(["podSecurityContext", "securityContext", "livenessProbe", "readinessProbe"]));
    expect(await upgradeFrom(previous, "--reuse-values")).toEqual(await freshInstall(Object.fromEntries(keptAbsent.map((k) => [k, null]))));
  });

  it("--reuse-values from a previous chart lacking any one top-level block gives what a fresh install gives", async () => {
    // One release per lane, put back before each upgrade to "installed from the previous chart
    // with the user's values" by an upgrade with --reset-values: that stores the previous chart
    // and the user's values, all that --reuse-values reads from a release. The upgrade under test
    // is a server dry run; it renders exactly what a fresh install of that release renders, which
    // the API server validated. (Top-level settings that are not blocks, replicaCount,
    // logLevel..., are removed in the test above.)
    const blocks = TOP_LEVEL.filter((k) => DEFAULTS.values[k] && typeof DEFAULTS.values[k] === "object" && !Array.isArray(DEFAULTS.values[k]));
    expect(blocks).toEqual(expect.arrayContaining(["image", "flowControl", "publish", "tests", "networkPolicy", "startupProbe"]));
    const checked: string[] = [];
    const lane = async (i: number): Promise<void> => {
      const name = `${RELEASE}-${i}`;
      const dir = join(tmp, `previous-${i}`);
      const freshHere = await freshInstall({}, name);
      for (const key of blocks.filter((_, j) => j % LANES === i)) {
        const previous = await previousChart(dir, [key]);
        await release(["upgrade", "--install", name, previous, "--reset-values", "--values", userValues, "--disable-openapi-validation", "--history-max", "2"]);
        const upgraded = rendered(await release(["upgrade", name, CHART, "--reuse-values", "--dry-run=server", "--disable-openapi-validation"]));
        const expected = DEFAULTS.keepAbsent.includes(key) ? await freshInstall({ [key]: null }, name) : freshHere;
        expect.soft(upgraded, `previous chart without ${key}`).toEqual(expected);
        checked.push(key);
      }
      await helmOk(["uninstall", name]);
    };
    await Promise.all(Array.from({ length: LANES }, (_, i) => lane(i)));
    expect(checked.sort()).toEqual([...blocks].sort());
  }, 180_000);
});
