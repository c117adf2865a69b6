// `hookline operator` and `hookline dev`: run the operator until SIGTERM/SIGINT, then drain and
// exit 0. A second signal exits at once. Usage errors are thrown (parseArgs's, UsageError):
// main() turns them into exit code 2.
//
// The operator, the Kubernetes client and its kubeconfig loader are imported once the arguments
// are checked: --help and a usage error answer in a tenth of the time (they took 0.7 s).
import { parseArgs } from "node:util";
import { resolve } from "node:path";
import { ensureBinaries, ensureNatsServer } from "../cluster/build.js";
import { runningControlPlane, startControlPlane, startNatsBeside, stopControlPlane, stopNatsBeside, type ControlPlaneInfo } from "../cluster/control-plane.js";
import { ConfigError, loadConfig, type Config } from "../config/config.js";
import { parseNatsNodes } from "./cluster.js";
import { EXIT, UsageError } from "./exit-codes.js";
import type { Operator } from "./operator.js";
import { STREAM_AUTH_POLICY } from "../jetstream/permissions.js";

const OPERATOR_USAGE = `usage: hookline operator [--kubeconfig PATH] [--leader-elect=false]

Runs the controller against the current kubeconfig (KUBECONFIG, ~/.kube/config, or in-cluster
credentials in a pod). Configuration comes from the environment: see docs/configuration.md.

  --kubeconfig PATH            default: KUBECONFIG, ~/.kube/config, or in-cluster credentials
  --leader-elect=true|false    leader election on a Lease (default: LEADER_ELECT, else true);
                               false only with a single replica
`;

function parseBool(name: string, value: string | undefined): boolean | undefined {
  if (value === undefined) return undefined;
  if (value === "true" || value === "") return true;
  if (value === "false") return false;
  throw new UsageError(`--${name} must be true or false, got "${value}"`);
}

function configFrom(env: NodeJS.ProcessEnv, leaderElect: boolean | undefined): Config | number {
  try {
    return loadConfig(env, leaderElect === undefined ? {} : { leaderElect });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`hookline: ${err.message}\n`);
      return EXIT.config;
    }
    throw err;
  }
}

/** Runs `op` until a signal; resolves with the exit code. `onStarted` runs once it serves. */
async function runUntilSignal(op: Operator, cleanup?: () => Promise<void>, onStarted?: () => void): Promise<number> {
  let signals = 0;
  const stopping = new Promise<number>((resolveExit) => {
    const onSignal = (sig: NodeJS.Signals) => {
      signals++;
      if (signals > 1) {
        process.stderr.write(`hookline: second ${sig}, exiting at once\n`);
        process.exit(1);
      }
      op.log.info({ signal: sig }, "signal received, shutting down");
      op.stop()
        .then(() => cleanup?.())
        .then(
          () => resolveExit(0),
          (err: Error) => {
            op.log.error({ err: err.message }, "shutdown failed");
            resolveExit(1);
          },
        );
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
  });
  try {
    await op.start();
    onStarted?.();
  } catch (err) {
    op.log.error({ err: (err as Error).message }, "operator failed to start");
    await op.stop().catch(() => undefined);
    await cleanup?.();
    return 1;
  }
  return stopping;
}

export async function operatorCommand(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { kubeconfig: { type: "string" }, "leader-elect": { type: "string" }, help: { type: "boolean", short: "h" } }, allowPositionals: false });
  if (values.help) {
    process.stdout.write(OPERATOR_USAGE);
    return 0;
  }
  const leaderElect = parseBool("leader-elect", values["leader-elect"]);
  const config = configFrom(process.env, leaderElect);
  if (typeof config === "number") return config;
  const { Operator } = await import("./operator.js");
  const op = new Operator({ config, ...(values.kubeconfig ? { kubeconfig: values.kubeconfig } : {}) });
  return runUntilSignal(op);
}

/** The publish door's port under `hookline dev` unless PUBLISH_PORT says otherwise (empty: off). */
export const DEV_PUBLISH_PORT = "8090";
/** What `hookline dev`'s metrics, health and publish servers listen on: this machine alone. */
export const DEV_LISTEN_HOST = "127.0.0.1";

const DEV_USAGE = `usage: hookline dev [--dir DIR] [--keep-cluster] [--nats [--nats-nodes N]]

A first run with no cluster at all: starts a local etcd + kube-apiserver (built once from Go
modules), installs the CRDs and runs the operator against it, with loopback addresses allowed
(WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8,::1/128) so receivers on this machine can be used, and
the HTTP publish door on port ${DEV_PUBLISH_PORT} (PUBLISH_PORT; set it empty to turn the door off).
The metrics, health and publish servers listen on ${DEV_LISTEN_HOST} only.
Ctrl-C stops the operator and the control plane (--keep-cluster leaves the control plane up).
A control plane already running in DIR (hookline cluster up --dir DIR) is used as it is.

  --dir DIR        state directory of the control plane (default .hookline/dev)
  --keep-cluster   leave the control plane running when the operator stops
  --nats           also start nats-server with JetStream (built once from Go modules), which
                   lets in only its users, and run the operator with HOOKLINE_NATS_URL set to it
                   and its own NATS user (stream mode); publishers: hookline cluster
                   nats-publisher --dir DIR NAMESPACE
  --nats-nodes N   with --nats: a JetStream cluster of N nodes (1, 3 or 5), the operator given
                   every node's URL and HOOKLINE_STREAM_REPLICAS=3 (the stream at R3)
`;

/** The operator's config for the local NATS of `info` (its URL list, user and replicas), said on stderr. */
function natsConfig(info: ControlPlaneInfo & { natsUrl: string }, env: NodeJS.ProcessEnv, dir: string, say: (line: string) => void): Config | number {
  if (process.env.HOOKLINE_NATS_URL && process.env.HOOKLINE_NATS_URL !== info.natsUrl) say(`--nats: using the local ${info.natsUrl}, not HOOKLINE_NATS_URL=${process.env.HOOKLINE_NATS_URL}`);
  const auth = info.natsUser && info.natsPasswordFile ? { HOOKLINE_NATS_USER: info.natsUser, HOOKLINE_NATS_PASSWORD_FILE: info.natsPasswordFile } : {};
  // A cluster's stream and buckets at its replicas (R3), as production runs them.
  const replicas = info.natsStreamReplicas !== undefined ? { HOOKLINE_STREAM_REPLICAS: String(info.natsStreamReplicas) } : {};
  const config = configFrom({ ...env, HOOKLINE_NATS_URL: info.natsUrl, ...auth, ...replicas }, undefined);
  if (typeof config === "number") return config;
  const cluster = (info.natsNodes ?? 1) > 1 ? ` (a cluster of ${info.natsNodes} nodes; HOOKLINE_STREAM_REPLICAS=${info.natsStreamReplicas})` : "";
  say(`nats-server ${info.natsVersion ?? ""} with JetStream at ${info.natsUrl}${cluster}; the operator runs with HOOKLINE_NATS_URL=${info.natsUrl} as NATS user ${info.natsUser ?? "(none)"}`);
  say(`publish to it:     hookline publish --nats "$(hookline cluster nats-publisher --dir ${dir} shop)" -n shop -t order.paid -d '{"order": 1}'`);
  return config;
}

export async function devCommand(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { dir: { type: "string" }, "keep-cluster": { type: "boolean" }, nats: { type: "boolean" }, "nats-nodes": { type: "string" }, help: { type: "boolean", short: "h" } }, allowPositionals: false });
  if (values.help) {
    process.stdout.write(DEV_USAGE);
    return 0;
  }
  // resolve("") is the working directory: a control plane must not land there by mistake.
  if (values.dir === "") throw new UsageError("--dir must not be empty");
  const natsNodes = parseNatsNodes(values["nats-nodes"], values.nats);
  const dir = resolve(values.dir ?? ".hookline/dev");
  const env = {
    ...process.env,
    WEBHOOK_ALLOWED_NETWORKS: process.env.WEBHOOK_ALLOWED_NETWORKS ?? "127.0.0.0/8,::1/128",
    LEADER_ELECT: process.env.LEADER_ELECT ?? "false",
    PUBLISH_PORT: process.env.PUBLISH_PORT ?? DEV_PUBLISH_PORT,
  };
  // Checked before anything starts; with --nats loaded again below with the local URL.
  let config = configFrom(env, undefined);
  if (typeof config === "number") return config;
  const [{ loadKubeconfig }, { KubeClient }, { installCrds }, { Operator }] = await Promise.all([
    import("../kube/kubeconfig.js"),
    import("../kube/client.js"),
    import("./crds.js"),
    import("./operator.js"),
  ]);
  const say = (line: string) => process.stderr.write(`[dev] ${line}\n`);
  const nats = values.nats ? await ensureNatsServer({ env: process.env, onProgress: (l) => process.stderr.write(`${l}\n`) }) : undefined;
  let info: ControlPlaneInfo | undefined = runningControlPlane(dir);
  const startedHere = !info;
  let natsStartedHere = false;
  const natsOptions = nats && { binary: nats.binary, auth: STREAM_AUTH_POLICY, ...(natsNodes !== undefined ? { nodes: natsNodes } : {}) };
  if (info?.natsUrl && natsNodes !== undefined && natsNodes !== info.natsNodes) throw new Error(`the local NATS in ${dir} runs ${info.natsNodes} node(s), not ${natsNodes}: stop it first with hookline cluster down --dir ${dir}`);
  if (info && natsOptions && !info.natsUrl) {
    natsStartedHere = true;
    info = await startNatsBeside(dir, { ...natsOptions, env: process.env });
  }
  if (!info) {
    const { binDir } = await ensureBinaries({ env: process.env, onProgress: (l) => process.stderr.write(`${l}\n`) });
    say(`starting a local control plane in ${dir}...`);
    info = await startControlPlane({
      dir,
      binDir,
      ...(natsOptions ? { nats: natsOptions } : {}),
      onProgress: (l) => say(l),
      beforeControllerManager: async (cp) => {
        const client = await KubeClient.create((await loadKubeconfig({ file: cp.kubeconfig, env: process.env })).credentials);
        await installCrds(client);
        await client.destroy();
      },
    });
  } else {
    const client = await KubeClient.create((await loadKubeconfig({ file: info.kubeconfig, env: process.env })).credentials);
    await installCrds(client);
    await client.destroy();
  }
  say(`kube-apiserver ${info.version} at ${info.server}; CRDs installed`);
  if (nats && info.natsUrl) {
    config = natsConfig({ ...info, natsUrl: info.natsUrl }, env, dir, say);
    if (typeof config === "number") return config;
  }
  say(`in another shell:  export KUBECONFIG=${info.kubeconfig}`);
  say(`then:              kubectl apply -f examples/ && kubectl get whdel -n shop -w`);
  // Loopback only: a developer's machine is on a network, and the probes (and /metrics, unless
  // METRICS_AUTH=kubernetes) answer anyone.
  const op = new Operator({ config, kubeconfig: info.kubeconfig, listenHost: DEV_LISTEN_HOST });
  const cleanup = async () => {
    if (values["keep-cluster"]) return;
    if (startedHere) {
      say("stopping the local control plane...");
      await stopControlPlane(dir);
    } else if (natsStartedHere) {
      say("stopping the local nats-server...");
      await stopNatsBeside(dir);
    }
  };
  const door = config.publishPort === undefined ? "" : `, the publish door on http://127.0.0.1:${config.publishPort}/v1/namespaces/NS/events`;
  return runUntilSignal(op, cleanup, () => say(`ready: the operator runs${door} (Ctrl-C stops it)`));
}
