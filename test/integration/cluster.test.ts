// `hookline cluster up|down` as a user runs it: the built CLI (bin/hookline.js -> dist/) in a
// child process, checked with kubectl and pgrep. One up/down cycle plus the error cases.
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import type { Server } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../helpers/cluster.js";
import { exec, execKubectl } from "../helpers/exec.js";
import type { ExecResult } from "../helpers/exec.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const K8S_VERSION = /k8s\.io\/kubernetes\s+(v\d+\.\d+\.\d+)/.exec(readFileSync(join(ROOT, "hack/k8s/go.mod"), "utf8"))?.[1];

function hookline(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<ExecResult> {
  return exec(process.execPath, [join(ROOT, "bin/hookline.js"), ...args], { env, cwd: ROOT, timeoutMs: 110_000 });
}

interface State {
  pids: Record<string, number>;
  binDir: string;
  server: string;
}
const readState = (dir: string): State => JSON.parse(readFileSync(join(dir, "state.json"), "utf8")) as State;

/** Gone means no /proc entry or a zombie (PID 1 here may never reap orphans). */
function isGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return true;
  }
}

/** Processes whose command line mentions `pattern` (pgrep -f), excluding pgrep itself. */
async function pgrep(pattern: string): Promise<string> {
  const r = await exec("pgrep", ["-fa", pattern]);
  return r.code === 0 ? r.stdout.trim() : "";
}

const dirs: string[] = [];
async function tempDir(name: string): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), `hookline-cli-${name}-`));
  dirs.push(d);
  return d;
}

describe("hookline cluster (CLI)", () => {
  let dir: string;

  beforeAll(async () => {
    expect(existsSync(join(ROOT, "dist/cli/main.js")), "run `npm run build` before the integration tests").toBe(true);
    dir = await tempDir("main");
  });

  afterAll(async () => {
    // Best effort if a test failed midway; `down` is idempotent.
    for (const d of dirs) {
      if (existsSync(join(d, "state.json"))) await hookline(["cluster", "down", "--dir", d]);
      await rm(d, { recursive: true, force: true });
    }
  });

  it("cluster up starts the control plane, returns, and prints the kubeconfig", async () => {
    const t0 = Date.now();
    // --attach-to-pid (hidden): if this test process is killed, the control plane goes too.
    const r = await hookline(["cluster", "up", "--dir", dir, "--attach-to-pid", String(process.pid)]);
    expect(r.code, r.stderr).toBe(0);
    console.log(`cluster up took ${Date.now() - t0} ms`);
    expect(r.stdout).toContain(`export KUBECONFIG=${join(dir, "kubeconfig")}`);
    expect(r.stdout).toContain(`kube-apiserver ${K8S_VERSION}`);
    const state = readState(dir);
    for (const name of ["etcd", "kube-apiserver", "kube-controller-manager"]) {
      expect(isGone(state.pids[name]!), `${name} should be running`).toBe(false);
    }
  });

  it("kubectl works against DIR/kubeconfig with TLS verified", async () => {
    const kubeconfig = join(dir, "kubeconfig");
    const text = readFileSync(kubeconfig, "utf8");
    expect(text).toContain(`certificate-authority: "${join(dir, "pki", "apiserver.crt")}"`);
    expect(text).not.toContain("insecure-skip-tls-verify");

    const ns = await execKubectl(kubeconfig, ["get", "ns", "default", "-o", "name"]);
    expect(ns.code, ns.stderr).toBe(0);
    expect(ns.stdout.trim()).toBe("namespace/default");

    const version = await execKubectl(kubeconfig, ["version", "-o", "json"]);
    expect(version.code, version.stderr).toBe(0);
    expect((JSON.parse(version.stdout) as { serverVersion: { gitVersion: string } }).serverVersion.gitVersion).toBe(K8S_VERSION);
  });

  it("the unprivileged kubeconfig is authenticated but may not list namespaces", async () => {
    const kubeconfig = join(dir, "kubeconfig-unprivileged");
    const who = await execKubectl(kubeconfig, ["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]);
    expect(who.code, who.stderr).toBe(0);
    expect(who.stdout.trim()).toBe("unprivileged");

    const list = await execKubectl(kubeconfig, ["get", "namespaces"]);
    expect(list.code).not.toBe(0);
    expect(list.stderr).toContain('User "unprivileged" cannot list resource "namespaces"');
  });

  it("cluster up is a no-op while the control plane runs", async () => {
    const before = readState(dir);
    const r = await hookline(["cluster", "up", "--dir", dir]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("already running");
    expect(readState(dir).pids).toEqual(before.pids);
  });

  it("cluster up fails fast naming an explicitly requested port that is taken", async () => {
    const other = await tempDir("port");
    const server: Server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const t0 = Date.now();
      const r = await hookline(["cluster", "up", "--dir", other, "--apiserver-port", String(port)]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`port ${port} is already in use`);
      expect(Date.now() - t0).toBeLessThan(15_000);
      expect(await pgrep(other)).toBe("");
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it("cluster up without Go and without cached binaries says that Go is not installed", async () => {
    // A PATH made only of the directory that holds node (bash lives there too on Linux).
    const nodeDir = dirname(process.execPath);
    expect(existsSync(join(nodeDir, "go")), `${nodeDir} holds a go binary; cannot simulate a missing Go`).toBe(false);
    expect(existsSync(join(nodeDir, "bash")), `bash is not in ${nodeDir}`).toBe(true);
    const other = await tempDir("nogo");
    const cache = await tempDir("emptycache");
    const env = { ...process.env, PATH: [nodeDir].join(delimiter), HOOKLINE_CACHE_DIR: cache };
    const r = await hookline(["cluster", "up", "--dir", join(other, "cluster")], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("Go is not installed");
    expect(existsSync(join(other, "cluster", "state.json"))).toBe(false);
  });

  it("a control plane started with attachToParent dies with its parent, even on SIGKILL", async () => {
    const other = await tempDir("attached");
    const { binDir } = readState(dir);
    const script = `
      import { startControlPlane } from ${JSON.stringify(join(ROOT, "dist/cluster/control-plane.js"))};
      await startControlPlane({ dir: process.argv[1], binDir: process.argv[2], attachToParent: true });
      process.stdout.write("READY\\n");
      setInterval(() => {}, 60_000);`;
    const parent = spawn(process.execPath, ["--input-type=module", "-e", script, other, binDir], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    parent.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
    await waitFor(() => out.includes("READY") || parent.exitCode !== null, { timeoutMs: 60_000, description: "the attached control plane" });
    expect(out).toContain("READY");
    const pids = Object.values(readState(other).pids);
    expect(pids).toHaveLength(3);

    parent.kill("SIGKILL");
    await waitFor(() => pids.every(isGone), { timeoutMs: 15_000, description: `pids ${pids.join(", ")} to exit` });
    await waitFor(async () => (await pgrep(other)) === "", { timeoutMs: 5_000, description: `no process mentioning ${other}` });
  });

  it("cluster down stops every process and is idempotent", async () => {
    const { pids } = readState(dir);
    const r = await hookline(["cluster", "down", "--dir", dir]);
    expect(r.code, r.stderr).toBe(0);
    for (const [name, pid] of Object.entries(pids)) expect(isGone(pid), `${name} (${pid}) still running`).toBe(true);
    expect(await pgrep(dir)).toBe("");

    const again = await hookline(["cluster", "down", "--dir", dir]);
    expect(again.code, again.stderr).toBe(0);
  });
});
