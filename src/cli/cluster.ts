// `hookline cluster up|down`: a local etcd + kube-apiserver + kube-controller-manager, and with
// --nats a nats-server with JetStream beside it (stream mode).
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { ensureBinaries, ensureNatsServer } from "../cluster/build.js";
import { runningControlPlane, startControlPlane, startNatsBeside, stopControlPlane } from "../cluster/control-plane.js";
import type { ControlPlaneInfo, ControlPlanePorts } from "../cluster/control-plane.js";
import { UsageError } from "./exit-codes.js";

const DEFAULT_DIR = ".hookline/cluster";

const USAGE = `usage: hookline cluster up [--dir DIR] [--nats]
       hookline cluster down [--dir DIR]

  up     build the binaries once (needs Go; cached in $HOOKLINE_CACHE_DIR or ~/.cache/hookline),
         then start etcd, kube-apiserver and kube-controller-manager on 127.0.0.1 in the
         background and write DIR/kubeconfig. Does nothing if already running.
  down   stop the processes started by "up" (the data in DIR is kept).

options:
  --dir DIR   state directory (default ${DEFAULT_DIR})
  --nats      also start nats-server with JetStream on 127.0.0.1 (stream mode; store in
              DIR/nats) and print its URL for HOOKLINE_NATS_URL. With a control plane already
              running, starts only nats-server beside it.
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
  if (info.natsUrl) out(`nats-server:             ${info.natsUrl} (JetStream, nats-server ${info.natsVersion ?? "unknown"})`);
  out(`logs:                    ${resolve(dir, "logs")}`);
  out("");
  out(`export KUBECONFIG=${info.kubeconfig}`);
  if (info.natsUrl) out(`export HOOKLINE_NATS_URL=${info.natsUrl}`);
  out(`stop it with: hookline cluster down --dir ${dir}`);
}

async function up(dir: string, ports: ControlPlanePorts, attachToPid: number | undefined, withNats: boolean): Promise<number> {
  const running = runningControlPlane(dir);
  if (running && (!withNats || running.natsUrl)) {
    printInfo(running, dir, "already running");
    return 0;
  }
  const t0 = Date.now();
  const nats = withNats ? await ensureNatsServer({ env: process.env, onProgress: (line) => err(line) }) : undefined;
  if (running && nats) {
    const info = await startNatsBeside(dir, { binary: nats.binary, env: process.env });
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
      ...(nats ? { nats: { binary: nats.binary } } : {}),
      onProgress: (line) => err(`[cluster] ${line}`),
    });
    printInfo(info, dir, `control plane ready in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
    return 0;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
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
  if ((sub !== "up" && sub !== "down") || extra.length > 0) {
    throw new UsageError(sub === undefined ? "missing subcommand: up or down" : `unexpected "${[sub, ...extra].join(" ")}": the subcommand is up or down`);
  }
  const dir = values.dir;
  // resolve("") is the working directory: a control plane must not land there by mistake.
  if (!dir) throw new UsageError("--dir must not be empty");
  if (values.nats && sub !== "up") throw new UsageError("--nats is an option of cluster up (cluster down stops nats-server too)");
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
    return await up(dir, ports, attachToPid, values.nats);
  } catch (e) {
    err(`hookline cluster ${sub}: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
}
