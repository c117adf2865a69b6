// `hookline cluster up|down`: a local etcd + kube-apiserver + kube-controller-manager, and with
// --nats a nats-server with JetStream beside it (stream mode; --nats-nodes 3: a JetStream cluster
// of three), which lets in only its users: the operator's, and the publishers `hookline cluster
// nats-publisher NAMESPACE...` makes.
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { ensureBinaries, ensureNatsServer } from "../cluster/build.js";
import { NATS_NODE_COUNTS } from "../cluster/nats-cluster.js";
import { addNatsPublisherBeside, runningControlPlane, startControlPlane, startNatsBeside, stopControlPlane } from "../cluster/control-plane.js";
import { STREAM_AUTH_POLICY } from "../jetstream/permissions.js";
import type { ControlPlaneInfo, ControlPlanePorts } from "../cluster/control-plane.js";
import { UsageError } from "./exit-codes.js";

const DEFAULT_DIR = ".hookline/cluster";

const USAGE = `usage: hookline cluster up [--dir DIR] [--nats [--nats-nodes N]]
       hookline cluster down [--dir DIR]
       hookline cluster nats-publisher [--dir DIR] NAMESPACE...

  up              build the binaries once (needs Go; cached in $HOOKLINE_CACHE_DIR or
                  ~/.cache/hookline), then start etcd, kube-apiserver and kube-controller-manager
                  on 127.0.0.1 in the background and write DIR/kubeconfig. Does nothing if
                  already running.
  down            stop the processes started by "up" (the data in DIR is kept).
  nats-publisher  print the URL of a NATS user that may publish the events of these namespaces
                  and nothing else (made once, kept in DIR/nats-auth), for hookline publish --nats.

options:
  --dir DIR   state directory (default ${DEFAULT_DIR})
  --nats      also start nats-server with JetStream on 127.0.0.1 (stream mode; store in
              DIR/nats), which lets in only its users (DIR/nats-auth, mode 0600), and print its
              URL and the operator's user and password file (HOOKLINE_NATS_URL,
              HOOKLINE_NATS_USER, HOOKLINE_NATS_PASSWORD_FILE). With a control plane already
              running, starts only nats-server beside it.
  --nats-nodes N
              with --nats: a JetStream cluster of N nodes (1, 3 or 5; default 1, or what DIR
              ran before), each with its own ports and store (DIR/nats-<i>), routes to the
              others and the same users; HOOKLINE_NATS_URL lists every node (clients fail
              over) and HOOKLINE_STREAM_REPLICAS is 3 (the stream and its buckets at R3).
              Nodes that stopped are started again by up.
`;

const err = (line: string): boolean => process.stderr.write(`${line}\n`);
const out = (line: string): boolean => process.stdout.write(`${line}\n`);

function parsePort(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const port = Number(value);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) throw new UsageError(`--${name} must be a port number, got "${value}"`);
  return port;
}


function printInfo(info: ControlPlaneInfo, dir: string, headline: string): void {
  out(`${headline}: kube-apiserver ${info.version} at ${info.server} (etcd ${info.etcdVersion})`);
  out(`kubeconfig:              ${info.kubeconfig}`);
  out(`unprivileged kubeconfig: ${info.unprivilegedKubeconfig}`);
  const nodes = info.natsNodes ?? 1;
  if (info.natsUrl && nodes > 1) out(`nats-server:             ${info.natsUrl} (JetStream cluster of ${nodes} nodes, nats-server ${info.natsVersion ?? "unknown"})`);
  else if (info.natsUrl) out(`nats-server:             ${info.natsUrl} (JetStream, nats-server ${info.natsVersion ?? "unknown"})`);
  out(`logs:                    ${resolve(dir, "logs")}`);
  out("");
  out(`export KUBECONFIG=${info.kubeconfig}`);
  if (info.natsUrl) out(`export HOOKLINE_NATS_URL=${info.natsUrl}`);
  if (info.natsUrl && info.natsStreamReplicas !== undefined) out(`export HOOKLINE_STREAM_REPLICAS=${info.natsStreamReplicas}`);
  if (info.natsUser && info.natsPasswordFile) {
    out(`export HOOKLINE_NATS_USER=${info.natsUser}`);
    out(`export HOOKLINE_NATS_PASSWORD_FILE=${info.natsPasswordFile}`);
    out(`publish as a publisher of a namespace: hookline publish --nats "$(hookline cluster nats-publisher --dir ${dir} NAMESPACE)" -n NAMESPACE ...`);
  } else if (info.natsUrl) {
    out(`nats-server runs without authentication (started by an earlier Hookline): the operator refuses it; restart it with hookline cluster down --dir ${dir} && hookline cluster up --dir ${dir} --nats`);
  }
  out(`stop it with: hookline cluster down --dir ${dir}`);
}

/** --nats-nodes N: 1, 3 or 5, with --nats only (cluster up, dev). */
export function parseNatsNodes(value: string | undefined, withNats: boolean | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!withNats) throw new UsageError("--nats-nodes is an option of --nats (a JetStream cluster of N nodes)");
  const n = Number(value);
  if (!NATS_NODE_COUNTS.includes(n)) throw new UsageError(`--nats-nodes must be ${NATS_NODE_COUNTS.join(", ").replace(/, (\d+)$/, " or $1")} (an odd number: a majority of the nodes must be up), got "${value}"`);
  return n;
}

async function up(dir: string, ports: ControlPlanePorts, attachToPid: number | undefined, withNats: boolean, natsNodes: number | undefined): Promise<number> {
  const running = runningControlPlane(dir);
  if (running?.natsUrl && natsNodes !== undefined && natsNodes !== running.natsNodes) {
    err(`hookline cluster up: the local NATS in ${resolve(dir)} runs ${running.natsNodes} node(s), not ${natsNodes}: stop it first with hookline cluster down --dir ${dir}`);
    return 1;
  }
  if (running && (!withNats || running.natsUrl)) {
    printInfo(running, dir, "already running");
    return 0;
  }
  const t0 = Date.now();
  const nats = withNats ? await ensureNatsServer({ env: process.env, onProgress: (line) => err(line) }) : undefined;
  if (running && nats) {
    const info = await startNatsBeside(dir, { binary: nats.binary, env: process.env, auth: STREAM_AUTH_POLICY, ...(natsNodes !== undefined ? { nodes: natsNodes } : {}) });
    printInfo(info, dir, `nats-server started beside the running control plane in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    return 0;
  }
  const { binDir } = await ensureBinaries({ env: process.env, onProgress: (line) => err(line) });
  // The processes run in their own sessions, so Ctrl-C does not reach them: stop them here.
  let interrupted = false;
  const onSignal = (): void => {
    if (interrupted) return;
    interrupted = true;
    err("[cluster] interrupted, stopping the control plane...");
    stopControlPlane(dir).then(
      () => process.exit(130),
      () => process.exit(130),
    );
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    const info = await startControlPlane({
      dir,
      binDir,
      ports,
      attachToPid,
      env: process.env,
      ...(nats ? { nats: { binary: nats.binary, auth: STREAM_AUTH_POLICY, ...(natsNodes !== undefined ? { nodes: natsNodes } : {}) } } : {}),
      onProgress: (line) => err(`[cluster] ${line}`),
    });
    printInfo(info, dir, `control plane ready in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    return 0;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

/** Prints the URL of the publisher of `namespaces` (a credential: on stdout only, for $(...)). */
async function natsPublisher(values: { dir: string; nats: boolean } & Record<string, unknown>, namespaces: string[]): Promise<number> {
  const dir = values.dir;
  if (namespaces.length === 0) throw new UsageError("nats-publisher needs one or more namespaces");
  if (!dir) throw new UsageError("--dir must not be empty");
  const upOnly = ["apiserver-port", "etcd-port", "etcd-peer-port", "attach-to-pid", "nats-nodes"].filter((k) => values[k] !== undefined);
  if (values.nats || upOnly.length) throw new UsageError("nats-publisher takes --dir and namespaces only");
  try {
    STREAM_AUTH_POLICY.publisher(namespaces);
  } catch (e) {
    throw new UsageError(`nats-publisher: ${(e as Error).message}`);
  }
  try {
    out((await addNatsPublisherBeside(dir, STREAM_AUTH_POLICY, namespaces)).url);
    return 0;
  } catch (e) {
    err(`hookline cluster nats-publisher: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
}

export async function clusterCommand(args: string[]): Promise<number> {
  // Usage errors are thrown (parseArgs's, UsageError): main() turns them into exit code 2.
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    strict: true,
    options: {
      dir: { type: "string", default: DEFAULT_DIR },
      nats: { type: "boolean", default: false },
      "nats-nodes": { type: "string" },
      help: { type: "boolean", short: "h" },
      // Hidden: fixed ports (tests, or a stable URL). Free ports are picked otherwise.
      "apiserver-port": { type: "string" },
      "etcd-port": { type: "string" },
      "etcd-peer-port": { type: "string" },
      // Hidden: stop the control plane when this pid dies (tests that run `cluster up`).
      "attach-to-pid": { type: "string" },
    },
  });
  if (values.help) {
    out(USAGE);
    return 0;
  }
  const [sub, ...extra] = positionals;
  if (sub === "nats-publisher") return natsPublisher(values, extra);
  if ((sub !== "up" && sub !== "down") || extra.length > 0) {
    throw new UsageError(sub === undefined ? "missing subcommand: up, down or nats-publisher" : `unexpected "${[sub, ...extra].join(" ")}": the subcommand is up, down or nats-publisher`);
  }
  const dir = values.dir;
  // resolve("") is the working directory: a control plane must not land there by mistake.
  if (!dir) throw new UsageError("--dir must not be empty");
  if (values.nats && sub !== "up") throw new UsageError("--nats is an option of cluster up (cluster down stops nats-server too)");
  const natsNodes = parseNatsNodes(values["nats-nodes"], values.nats);
  const ports: ControlPlanePorts = {
    apiserver: parsePort("apiserver-port", values["apiserver-port"]),
    etcd: parsePort("etcd-port", values["etcd-port"]),
    etcdPeer: parsePort("etcd-peer-port", values["etcd-peer-port"]),
  };
  const attach = values["attach-to-pid"];
  const attachToPid = attach === undefined ? undefined : Number(attach);
  if (attachToPid !== undefined && (!Number.isInteger(attachToPid) || attachToPid <= 1)) {
    throw new UsageError(`--attach-to-pid must be a process id, got "${attach}"`);
  }
  if (sub === "down" && (values["apiserver-port"] ?? values["etcd-port"] ?? values["etcd-peer-port"] ?? attach) !== undefined) {
    throw new UsageError("--apiserver-port, --etcd-port, --etcd-peer-port and --attach-to-pid are options of cluster up");
  }

  try {
    if (sub === "down") {
      await stopControlPlane(dir);
      out(`control plane in ${resolve(dir)} stopped`);
      return 0;
    }
    return await up(dir, ports, attachToPid, values.nats, natsNodes);
  } catch (e) {
    err(`hookline cluster ${sub}: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
}
