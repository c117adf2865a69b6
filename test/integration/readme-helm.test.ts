// README.md's "Install on a cluster (Helm)" block and the commands the chart's NOTES.txt prints
// after `helm install`, typed as written into one bash session (test/helpers/shell.ts) against a
// control plane of this test's own (it starts without Hookline's CRDs: the chart installs them)
// with the real helm and kubectl. Each command must exit 0; the example delivery and the NOTES'
// delivery must reach a receiver and verify.
//
// What stands in for the parts a real cluster has and this machine does not:
// - the image: `docker build` needs a Docker engine (dockerfile.test.ts checks the image's
//   layout without one), so that block is not run, and no image is ever pulled;
// - the kubelet and the deployment controller: there are none, so this test plays them (see
//   PlayedKubelet below): for a Deployment the chart created, it runs the pod template's
//   container as processes (this checkout's bin/hookline.js, the container's args and env, the
//   ServiceAccount's token as its credentials, its Secret volumes written to a directory of the
//   pod's and the variables that name files under a mount pointed there), probes /readyz as the
//   readinessProbe would, and writes the Deployment's status, which `kubectl rollout status`
//   waits on;
// - RECEIVER, the README's and NOTES' placeholder for the user's own HTTPS host: an HTTPS
//   receiver on 127.0.0.1 with a certificate from a test CA, which the played pods trust
//   (NODE_EXTRA_CA_CERTS) and may reach (WEBHOOK_ALLOWED_NETWORKS gets 127.0.0.1/32 added:
//   the chart's default, public addresses only, is what a real RECEIVER passes);
// - kube-prometheus-stack's CRDs (ServiceMonitor, PrometheusRule), which the README's values
//   need: test/helpers/monitoring-crds.ts.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startControlPlane, stopControlPlane, type ControlPlaneInfo } from "../../src/cluster/control-plane.js";
import { freePorts } from "../../src/cluster/ports.js";
import { waitFor } from "../helpers/cluster.js";
import { runBlock } from "../helpers/documented.js";
import { execKubectl } from "../helpers/exec.js";
import { ROOT } from "../helpers/helm.js";
import { readBlocks, sectionBlocks, shellCommands, type Block } from "../helpers/markdown.js";
import { MONITORING_CRDS } from "../helpers/monitoring-crds.js";
import { TestCa } from "../helpers/pki.js";
import { Receiver } from "../helpers/receiver.js";
import { ShellSession } from "../helpers/shell.js";
import { testTools } from "../helpers/tools.js";

const blocks = readBlocks(join(ROOT, "README.md"));

interface Container {
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }>;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
}
interface Deployment {
  metadata: { name: string; namespace: string; generation: number };
  spec: { replicas: number; template: { spec: { serviceAccountName: string; containers: Container[]; volumes?: Volume[] } } };
}

interface Volume {
  name: string;
  secret?: { secretName: string; items?: Array<{ key: string; path: string }> };
}

/** Plays the kubelet and the deployment controller for the chart's Deployment (see the header). */
class PlayedKubelet {
  readonly pods: Array<{ name: string; child: ChildProcess; health: number; log: string }> = [];
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  private started = new Set<string>();

  constructor(
    private readonly cp: ControlPlaneInfo,
    private readonly dir: string,
    private readonly extraEnv: Record<string, string>,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      if (this.busy) return;
      this.busy = true;
      this.tick()
        .catch((err: Error) => process.stderr.write(`[played kubelet] ${err.message}\n`))
        .finally(() => (this.busy = false));
    }, 500);
  }

  private async kubectl(args: string[], input?: string): Promise<string> {
    const r = await execKubectl(this.cp.kubeconfig, args, input === undefined ? {} : { input });
    if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
    return r.stdout;
  }

  private async tick(): Promise<void> {
    const list = JSON.parse(await this.kubectl(["get", "deployments", "-A", "-l", "app.kubernetes.io/name=hookline", "-o", "json"])) as { items: Deployment[] };
    for (const d of list.items) {
      const key = `${d.metadata.namespace}/${d.metadata.name}`;
      if (!this.started.has(key)) {
        this.started.add(key);
        for (let i = 0; i < d.spec.replicas; i++) await this.runPod(d);
      }
      let ready = 0;
      for (const p of this.pods) {
        try {
          if ((await fetch(`http://127.0.0.1:${p.health}/readyz`)).status === 200) ready++;
        } catch {
          // not listening yet
        }
      }
      const status = { observedGeneration: d.metadata.generation, replicas: this.pods.length, updatedReplicas: this.pods.length, readyReplicas: ready, availableReplicas: ready };
      await this.kubectl(["-n", d.metadata.namespace, "patch", "deployment", d.metadata.name, "--subresource=status", "--type=merge", "-p", JSON.stringify({ status })]);
    }
  }

  /** One pod of the Deployment: the container as a process, with the ServiceAccount's token. */
  private async runPod(d: Deployment): Promise<void> {
    const ns = d.metadata.namespace;
    const pod = d.spec.template.spec;
    const name = `${d.metadata.name}-${randomBytes(3).toString("hex")}`;
    const token = (await this.kubectl(["create", "token", pod.serviceAccountName, "-n", ns, "--duration=1h"])).trim();
    const admin = JSON.parse(await this.kubectl(["config", "view", "--raw", "--minify", "-o", "json"])) as { clusters: Array<{ cluster: Record<string, unknown> }> };
    const kubeconfig = join(this.dir, `${name}.kubeconfig`);
    await writeFile(kubeconfig, JSON.stringify({ apiVersion: "v1", kind: "Config", clusters: [{ name: "c", cluster: admin.clusters[0]!.cluster }], users: [{ name: "sa", user: { token } }], contexts: [{ name: "sa", context: { cluster: "c", user: "sa", namespace: ns } }], "current-context": "sa" }));
    const c = pod.containers[0]!;
    const env: Record<string, string> = { PATH: process.env.PATH ?? "" };
    for (const e of c.env ?? []) {
      const field = e.valueFrom?.fieldRef?.fieldPath;
      env[e.name] = field === "metadata.name" ? name : field === "metadata.namespace" ? ns : (e.value ?? "");
    }
    // Secret volumes, as the kubelet mounts them: each item a file; a variable naming a file under
    // the mount path names the pod's copy (the metrics server's certificate, METRICS_TLS_*).
    for (const m of c.volumeMounts ?? []) {
      const v = (pod.volumes ?? []).find((x) => x.name === m.name);
      if (!v?.secret) continue;
      const secret = JSON.parse(await this.kubectl(["get", "secret", v.secret.secretName, "-n", ns, "-o", "json"])) as { data: Record<string, string> };
      const local = join(this.dir, `${name}-${m.name}`);
      await mkdir(local, { recursive: true });
      for (const item of v.secret.items ?? Object.keys(secret.data).map((key) => ({ key, path: key }))) await writeFile(join(local, item.path), Buffer.from(secret.data[item.key]!, "base64"));
      for (const [k, value] of Object.entries(env)) if (value.startsWith(`${m.mountPath}/`)) env[k] = local + value.slice(m.mountPath.length);
    }
    const [metrics, health] = await freePorts(2);
    Object.assign(env, { METRICS_PORT: String(metrics), HEALTH_PORT: String(health), ...this.extraEnv });
    env.WEBHOOK_ALLOWED_NETWORKS = [env.WEBHOOK_ALLOWED_NETWORKS, "127.0.0.1/32"].filter(Boolean).join(",");
    // The image's ENTRYPOINT is node /app/bin/hookline.js operator (dockerfile.test.ts).
    const child = spawn(process.execPath, [join(ROOT, "bin/hookline.js"), "operator", "--kubeconfig", kubeconfig, ...(c.args ?? [])], { env, stdio: ["ignore", "pipe", "pipe"] });
    const entry = { name, child, health: health!, log: "" };
    child.stdout.setEncoding("utf8").on("data", (s: string) => (entry.log += s));
    child.stderr.setEncoding("utf8").on("data", (s: string) => (entry.log += s));
    this.pods.push(entry);
  }

  /** The played pods' last log lines, for a failure message. */
  logs(lines = 40): string {
    return this.pods.map((p) => `--- pod ${p.name} ---\n${p.log.trimEnd().split("\n").slice(-lines).join("\n")}`).join("\n");
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all(
      this.pods.map(
        (p) =>
          new Promise<void>((resolve) => {
            if (p.child.exitCode !== null) return resolve();
            p.child.once("exit", () => resolve());
            p.child.kill("SIGKILL");
          }),
      ),
    );
  }
}

/** The commands NOTES.txt shows: each `kubectl` and `helm` line, with its heredoc. */
function notesCommands(notes: string): string[] {
  return shellCommands(notes).filter((c) => /^(kubectl|helm) /.test(c));
}

describe("README: Install on a cluster (Helm), and the chart's NOTES.txt, as written", () => {
  let dir: string;
  let cp: ControlPlaneInfo;
  let ca: TestCa;
  let receiver: Receiver;
  let kubelet: PlayedKubelet;
  let session: ShellSession;
  let installOutput = "";
  const section = sectionBlocks(blocks, "Install on a cluster (Helm)");
  const receiverHost = () => `127.0.0.1:${receiver.port}`;
  const substitute = (b: Block): Block => ({ ...b, text: b.text.replaceAll("RECEIVER", receiverHost()) });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "hookline-readme-helm-"));
    cp = await startControlPlane({ dir: join(dir, "cp"), binDir: testTools().controlPlaneBinDir, attachToParent: true, env: process.env });
    await execKubectl(cp.kubeconfig, ["apply", "-f", "-"], { input: JSON.stringify({ apiVersion: "v1", kind: "List", items: MONITORING_CRDS }) });
    ca = await TestCa.create("RECEIVER's CA");
    const serving = await ca.issue("receiver", "server");
    receiver = await Receiver.startHttps({ cert: serving.cert, key: serving.key });
    const caFile = join(dir, "receiver-ca.crt");
    await writeFile(caFile, ca.cert);
    kubelet = new PlayedKubelet(cp, dir, { NODE_EXTRA_CA_CERTS: caFile });
    kubelet.start();
    session = new ShellSession({
      cwd: ROOT,
      env: {
        PATH: `${dirname(testTools().helm)}:${process.env.PATH ?? ""}`,
        HOME: dir,
        KUBECONFIG: cp.kubeconfig,
        HELM_CACHE_HOME: join(dir, "helm-cache"),
        HELM_CONFIG_HOME: join(dir, "helm-config"),
        HELM_DATA_HOME: join(dir, "helm-data"),
      },
    });
  }, 180_000);

  afterAll(async () => {
    session?.close();
    await kubelet?.stop();
    await receiver?.close();
    await ca?.close();
    if (cp) await stopControlPlane(join(dir, "cp"));
    if (dir) await rm(dir, { recursive: true, force: true });
  }, 120_000);

  it("helm install, rollout status, the examples, acme pointed at RECEIVER: the example delivery Succeeded, signed", async () => {
    const sh = section.filter((b) => b.lang === "sh");
    expect(sh.length).toBe(2);
    // The image block: no Docker engine here (dockerfile.test.ts checks the image's layout).
    expect(sh[0]!.text).toMatch(/^docker build -t REGISTRY\/hookline:\S+ \. && docker push REGISTRY\/hookline:\S+$/);
    expect(sh[1]!.text).toContain("RECEIVER");
    const run = await runBlock(session, ROOT, substitute(sh[1]!), undefined, { timeoutMs: 180_000, context: () => kubelet.logs() });
    installOutput = run.output;
    expect(installOutput).toMatch(/STATUS: deployed/);
    // The played pods: one leads.
    const holder = (await execKubectl(cp.kubeconfig, ["-n", "hookline-system", "get", "lease", "-o", "jsonpath={.items[*].spec.holderIdentity}"])).stdout;
    expect(kubelet.pods.map((p) => p.name)).toContain(holder.trim());
    // The README's reader binding gives kube-prometheus-stack's Prometheus the right to read /metrics, and nobody else.
    const canGet = async (who: string) => (await execKubectl(cp.kubeconfig, ["auth", "can-i", "get", "/metrics", `--as=${who}`])).stdout.trim();
    expect(await canGet("system:serviceaccount:monitoring:kube-prometheus-stack-prometheus")).toBe("yes");
    expect(await canGet("system:serviceaccount:monitoring:someone-else")).toBe("no");
    // The played pods serve it over HTTPS with the certificate the chart made (they logged it).
    expect(kubelet.logs(400)).toContain('"msg":"metrics server serves HTTPS"');
    const got = receiver.requests.filter((r) => r.path === "/orders");
    expect(got.length).toBeGreaterThanOrEqual(1);
    const body = new Webhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").verify(got[0]!.body, got[0]!.headers as Record<string, string>) as { id: string; type: string };
    expect(body).toMatchObject({ id: "evt-1001", type: "order.paid" });
  }, 300_000);

  it("the NOTES.txt helm install printed: every command works as printed, on a cluster without shop yet", async () => {
    expect(installOutput, "the Helm block ran first").toContain("NOTES:");
    const notes = installOutput.slice(installOutput.indexOf("NOTES:")).replaceAll("RECEIVER", receiverHost());
    const commands = notesCommands(notes);
    expect(commands.length).toBeGreaterThanOrEqual(12);
    expect(commands.at(-1)).toMatch(/^helm upgrade hookline charts\/hookline -n hookline-system --reset-then-reuse-values$/);
    expect(commands.join("\n")).toContain(`url: https://${receiverHost()}/orders`);
    // The NOTES start from a cluster where the README's shop does not exist yet.
    const del = await execKubectl(cp.kubeconfig, ["delete", "namespace", "shop", "--wait=true", "--timeout=120s"], { timeoutMs: 150_000 });
    expect(del.code, del.stderr).toBe(0);
    const before = receiver.requests.length;
    for (const command of commands) {
      const r = await session.run(command, { timeoutMs: 120_000 });
      expect(r.code, `NOTES: ${command}\n${r.output}\n${kubelet.logs()}`).toBe(0);
    }
    await waitFor(() => receiver.requests.length > before, { description: "the NOTES' delivery at RECEIVER" });
    const last = receiver.requests.at(-1)!;
    expect(JSON.parse(last.body)).toMatchObject({ type: "order.paid", data: { order: 1001 } });
  }, 300_000);
});
