// Vitest global setup of the `integration` project: every tool the tests need, built once from
// the Go module proxy before any test's timeout starts (test/helpers/tools.ts), then one real
// etcd + kube-apiserver + kube-controller-manager for the whole run, with the CRDs from crds/
// installed.
//
// HOOKLINE_TEST_KUBECONFIG=path   use an existing cluster instead (for example the one from
//                                 `hookline cluster up --dir .hookline/cluster`, whose
//                                 kubeconfig-unprivileged and state.json are picked up too).
import { existsSync, readdirSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import type { TestProject } from "vitest/node";
import { readState, startControlPlane, stopControlPlane } from "../../src/cluster/control-plane.js";
import { execKubectl } from "./exec.js";
import { sharedReleaseDir } from "./release-dir.js";
import { buildTestTools } from "./tools.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** Admin kubeconfig (system:masters). */
    kubeconfig: string;
    /** Kubeconfig of the `unprivileged` user (authenticated, no RBAC grants); "" if unknown. */
    unprivilegedKubeconfig: string;
    /** https://127.0.0.1:PORT */
    server: string;
    adminToken: string;
    /** "" if unknown (external cluster without kubeconfig-unprivileged). */
    unprivilegedToken: string;
    /** The control plane directory (logs in clusterDir/logs). */
    clusterDir: string;
    /** Where this run's files share what test/helpers/release.ts builds (new for each run). */
    releaseDir: string;
  }
}

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const CRD_DIR = join(ROOT, "crds");
const TAG = "[hookline tests]";

async function kubectlOk(kubeconfig: string, args: string[]): Promise<string> {
  const r = await execKubectl(kubeconfig, args);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")} exited ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

interface CrdInfo {
  name: string;
  group: string;
  plural: string;
  versions: string[];
}

/** Applies crds/ (if it holds manifests), waits for Established and for discovery. */
async function installCrds(kubeconfig: string): Promise<number> {
  const manifests = existsSync(CRD_DIR) ? readdirSync(CRD_DIR).filter((f) => /\.(ya?ml|json)$/.test(f)) : [];
  if (manifests.length === 0) return 0;
  await kubectlOk(kubeconfig, ["apply", "-f", CRD_DIR]);
  await kubectlOk(kubeconfig, ["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
  const list = JSON.parse(await kubectlOk(kubeconfig, ["get", "-f", CRD_DIR, "-o", "json"])) as {
    items?: { metadata: { name: string }; spec: { group: string; names: { plural: string }; versions: { name: string; served: boolean }[] } }[];
  };
  const crds: CrdInfo[] = (list.items ?? []).map((c) => ({
    name: c.metadata.name,
    group: c.spec.group,
    plural: c.spec.names.plural,
    versions: c.spec.versions.filter((v) => v.served).map((v) => v.name),
  }));
  // Established is not quite enough: the plural must be in discovery before clients use it.
  const deadline = Date.now() + 30_000;
  for (const crd of crds) {
    for (const version of crd.versions) {
      for (;;) {
        const r = await execKubectl(kubeconfig, ["get", "--raw", `/apis/${crd.group}/${version}`]);
        const served =
          r.code === 0 && (JSON.parse(r.stdout) as { resources?: { name: string }[] }).resources?.some((x) => x.name === crd.plural);
        if (served) break;
        if (Date.now() > deadline) throw new Error(`${crd.plural}.${crd.group}/${version} did not appear in discovery: ${r.stderr.trim()}`);
        await delay(100);
      }
    }
  }
  return crds.length;
}

interface Cluster {
  kubeconfig: string;
  unprivilegedKubeconfig: string;
  server: string;
  adminToken: string;
  unprivilegedToken: string;
  clusterDir: string;
  version: string;
  etcdVersion: string;
}

async function externalCluster(kubeconfigPath: string): Promise<Cluster> {
  const kubeconfig = resolve(kubeconfigPath);
  const dir = dirname(kubeconfig);
  const state = existsSync(join(dir, "state.json")) ? readState(dir) : undefined;
  const unprivilegedKubeconfig =
    process.env.HOOKLINE_TEST_UNPRIVILEGED_KUBECONFIG ??
    (existsSync(join(dir, "kubeconfig-unprivileged")) ? join(dir, "kubeconfig-unprivileged") : "");
  const jsonpath = async (path: string): Promise<string> =>
    (await kubectlOk(kubeconfig, ["config", "view", "--minify", "--raw", "-o", `jsonpath=${path}`])).trim();
  const versionJson = JSON.parse(await kubectlOk(kubeconfig, ["version", "-o", "json"])) as {
    serverVersion?: { gitVersion?: string };
  };
  let unprivilegedToken = state?.unprivilegedToken ?? "";
  if (!unprivilegedToken && unprivilegedKubeconfig) {
    unprivilegedToken = (
      await kubectlOk(unprivilegedKubeconfig, ["config", "view", "--minify", "--raw", "-o", "jsonpath={.users[0].user.token}"])
    ).trim();
  }
  if (!unprivilegedKubeconfig) {
    process.stderr.write(`${TAG} warning: no unprivileged kubeconfig (set HOOKLINE_TEST_UNPRIVILEGED_KUBECONFIG); RBAC tests will fail\n`);
  }
  return {
    kubeconfig,
    unprivilegedKubeconfig,
    server: state?.server ?? (await jsonpath("{.clusters[0].cluster.server}")),
    adminToken: state?.adminToken ?? (await jsonpath("{.users[0].user.token}")),
    unprivilegedToken,
    clusterDir: dir,
    version: versionJson.serverVersion?.gitVersion ?? "unknown",
    etcdVersion: state?.versions.etcd ?? "unknown",
  };
}

interface Started {
  tools: Awaited<ReturnType<typeof buildTestTools>>;
  cluster: Cluster;
  releaseDir: string;
  stop: () => Promise<void>;
}

/**
 * One control plane for every project that names this file as its global setup (`integration`
 * and `alone`, vitest.config.ts): vitest sets up each project's global setup in the same
 * process, so the first starts it, the others share it, and the last teardown stops it.
 */
const SHARED = Symbol.for("hookline.tests.control-plane");
type Shared = { ready: Promise<Started>; users: number };
const registry = globalThis as { [SHARED]?: Shared };

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const shared = (registry[SHARED] ??= { ready: start(), users: 0 });
  shared.users++;
  const { tools, cluster, releaseDir } = await shared.ready;
  project.provide("tools", tools);
  project.provide("kubeconfig", cluster.kubeconfig);
  project.provide("unprivilegedKubeconfig", cluster.unprivilegedKubeconfig);
  project.provide("server", cluster.server);
  project.provide("adminToken", cluster.adminToken);
  project.provide("unprivilegedToken", cluster.unprivilegedToken);
  project.provide("clusterDir", cluster.clusterDir);
  project.provide("releaseDir", releaseDir);
  return async () => {
    if (--shared.users > 0) return;
    delete registry[SHARED];
    await (await shared.ready).stop();
  };
}

async function start(): Promise<Started> {
  const started = Date.now();
  const external = process.env.HOOKLINE_TEST_KUBECONFIG;
  let cluster: Cluster;
  let crdCount: number;
  let ownedDir: string | undefined;

  const tools = await buildTestTools((line) => process.stderr.write(`${TAG} ${line}\n`));
  const toolsReady = Date.now();

  if (external) {
    cluster = await externalCluster(external);
    crdCount = await installCrds(cluster.kubeconfig);
  } else {
    const binDir = tools.controlPlaneBinDir;
    ownedDir = await mkdtemp(join(tmpdir(), "hookline-test-"));
    crdCount = 0;
    try {
      const info = await startControlPlane({
        dir: ownedDir,
        binDir,
        attachToParent: true,
        env: process.env,
        // Before KCM starts, so its garbage collector knows the CRDs from the beginning
        // (otherwise it notices them only on its 30 s discovery resync).
        beforeControllerManager: async (i) => {
          crdCount = await installCrds(i.kubeconfig);
        },
      });
      cluster = { ...info, clusterDir: ownedDir };
    } catch (err) {
      await stopControlPlane(ownedDir).catch(() => undefined);
      throw err;
    }
  }

  const seconds = ((Date.now() - toolsReady) / 1000).toFixed(1);
  const toolSeconds = ((toolsReady - started) / 1000).toFixed(1);
  process.stdout.write(
    `${TAG} tools ready in ${toolSeconds}s; kube-apiserver ${cluster.version} at ${cluster.server} (etcd ${cluster.etcdVersion}), ` +
      `${crdCount} CRDs, dir ${cluster.clusterDir}${external ? " (HOOKLINE_TEST_KUBECONFIG)" : ""}, ready in ${seconds}s\n`,
  );

  // Named for this run, not for the control plane alone: an external cluster's directory is the
  // same from run to run, and a run that crashed before its teardown would leave its release for
  // the next run to take as built.
  const releaseDir = sharedReleaseDir(`${cluster.clusterDir}\0${process.pid}\0${started}`);
  const stop = async () => {
    // What test/helpers/release.ts built for this run's files.
    await rm(releaseDir, { recursive: true, force: true });
    if (!ownedDir) return;
    await stopControlPlane(ownedDir);
    await rm(ownedDir, { recursive: true, force: true });
  };
  return { tools, cluster, releaseDir, stop };
}
