// The local control plane: etcd + kube-apiserver + kube-controller-manager on 127.0.0.1, started
// the way controller-runtime's envtest does it, plus KCM so
// namespaces finish deleting, ownerReference GC works and `default` ServiceAccounts exist.
//
// Layout of DIR:
//   etcd/                      etcd data (kept across down/up)
//   pki/apiserver.crt|key      the apiserver's self-generated serving cert (leaf + its CA)
//   sa.key                     service-account signing key (node:crypto, RSA 2048, PKCS#8)
//   tokens.csv                 static tokens: admin (system:masters) and unprivileged
//   kubeconfig                 admin kubeconfig (TLS verified against pki/apiserver.crt)
//   kubeconfig-unprivileged    the `unprivileged` user: authenticated, no RBAC grants
//   nats/jetstream/            with --nats: nats-server's JetStream store (kept across down/up)
//   nats-<i>/                  with --nats --nats-nodes N: node i's config and store (nats-cluster.ts)
//   nats-auth/                 with --nats: its users, passwords and config, all 0600 (nats-auth.ts)
//   logs/<process>.log         stdout+stderr of each process
//   state.json                 pids/pgids, ports, server, versions, tokens, times, nats URL
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { join, resolve } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { addNatsPublisher, ensureNatsAuth, urlWithCredentials, type NatsAuthPolicy, type NatsPublisher } from "./nats-auth.js";
import { launchNatsServer, reloadNatsServer, stopNatsGroup, type NatsPorts } from "./nats.js";
import { launchNatsCluster, launchNatsNode, natsClusterUrl, otherLayoutStore, storedNatsNodes, streamReplicasFor, waitForNatsCluster, type NatsNodePorts } from "./nats-cluster.js";
import { freePorts, isPortFree, saysPortTaken } from "./ports.js";
import { groupMembers, isOurGroup, signalGroup } from "./procs.js";
import { spawnReaper, stopReaper } from "./reaper.js";

/** The three processes of the control plane itself. */
export type ControlPlaneProcess = "etcd" | "kube-apiserver" | "kube-controller-manager";
/** nats-server with --nats: one server, or node i of a cluster (--nats-nodes N). */
export type NatsProcess = "nats-server" | `nats-server-${number}`;
/** Every process recorded in state.json: the control plane, and nats-server with --nats. */
export type ProcessName = ControlPlaneProcess | NatsProcess;
const PROCESS_NAMES: readonly ControlPlaneProcess[] = ["etcd", "kube-apiserver", "kube-controller-manager"];

export interface ControlPlanePorts {
  etcd?: number;
  etcdPeer?: number;
  apiserver?: number;
}

export interface StartControlPlaneOptions {
  /** Directory for data, certs, logs, kubeconfigs and state.json (created if missing). */
  dir: string;
  /** Directory holding etcd, kube-apiserver and kube-controller-manager (see ensureBinaries). */
  binDir: string;
  onProgress?: (line: string) => void;
  /** Kill the control plane when this process dies, even by SIGKILL (a detached reaper). */
  attachToParent?: boolean;
  /** Like attachToParent, for another process (e.g. the test worker that ran `cluster up`). */
  attachToPid?: number;
  /** Explicit ports; checked first ("port N is already in use"). Others are picked free. */
  ports?: ControlPlanePorts;
  /** Overall startup deadline (default 60 s). */
  timeoutMs?: number;
  /** Environment of the three processes (inherited when omitted). */
  env?: NodeJS.ProcessEnv;
  /**
   * Runs after the apiserver is ready and before kube-controller-manager starts. Install CRDs
   * here: KCM's garbage collector sees CRDs created later only on its 30 s discovery resync.
   */
  beforeControllerManager?: (info: ControlPlaneInfo) => Promise<void>;
  /** Also start nats-server with JetStream (stream mode) from this binary (see ensureNatsServer). */
  nats?: NatsOptions;
}

export interface ControlPlaneInfo {
  dir: string;
  /** https://127.0.0.1:PORT */
  server: string;
  /** Admin kubeconfig (token user in system:masters). */
  kubeconfig: string;
  /** Kubeconfig of the `unprivileged` user (only system:authenticated). */
  unprivilegedKubeconfig: string;
  adminToken: string;
  unprivilegedToken: string;
  /** kube-apiserver gitVersion from GET /version, e.g. v1.34.4. */
  version: string;
  /** etcd server version, e.g. v3.6.16. */
  etcdVersion: string;
  /** nats://127.0.0.1:PORT when nats-server runs beside it (--nats), for HOOKLINE_NATS_URL. */
  natsUrl?: string;
  /** nats-server version, e.g. 2.15.2, when it runs. */
  natsVersion?: string;
  /** The operator's NATS user and the file holding its password (HOOKLINE_NATS_USER, HOOKLINE_NATS_PASSWORD_FILE); absent for a nats-server started without authentication. */
  natsUser?: string;
  natsPasswordFile?: string;
  /** Nodes of the local NATS (1, or the cluster's size with --nats-nodes); natsUrl then lists them all. */
  natsNodes?: number;
  /** HOOKLINE_STREAM_REPLICAS for it: 3 on a cluster of three or more nodes. */
  natsStreamReplicas?: number;
}

/** How nats-server is started beside the control plane. */
export interface NatsOptions {
  binary: string;
  /** A JetStream cluster of this many nodes (nats-cluster.ts); default: as recorded in the dir, else 1. */
  nodes?: number;
  ports?: Partial<NatsPorts>;
  /** Users and what each may do (nats-auth.ts); without it the server lets anyone in. */
  auth?: NatsAuthPolicy;
}

/** nats-server beside the control plane, as state.json records it. */
export interface NatsState {
  url: string;
  ports: NatsPorts;
  version?: string;
  storeDir: string;
  binary: string;
  startedAt: string;
  /** With authentication: the operator's user and its password file (the password is never in state.json). */
  auth?: { user: string; passwordFile: string; config: string };
  /** A cluster's nodes (--nats-nodes); `url` lists every node's, `ports` are node 1's; each node's pgid is pgids["nats-server-<index>"]. */
  nodes?: NatsNodeState[];
  /** HOOKLINE_STREAM_REPLICAS for it (a cluster's). */
  streamReplicas?: number;
}

/** A node of the local NATS cluster, as state.json records it. */
export interface NatsNodeState {
  index: number;
  /** Its server name, as stream info names it (cluster.leader, replicas). */
  name: string;
  ports: NatsNodePorts;
  storeDir: string;
  config: string;
  log: string;
}

export interface ControlPlaneState {
  dir: string;
  binDir: string;
  pids: Partial<Record<ProcessName, number>>;
  pgids: Partial<Record<ProcessName, number>>;
  reaperPid?: number;
  ports: Required<ControlPlanePorts>;
  server: string;
  versions: { kubernetes?: string; etcd?: string };
  adminToken: string;
  unprivilegedToken: string;
  startedAt: string;
  readyAt?: string;
  stoppedAt?: string;
  /** Present once nats-server was started here (--nats); its pgid is pgids["nats-server"]. */
  nats?: NatsState;
}

const DEFAULT_TIMEOUT_MS = 60_000;
const POLL_MS = 100;
const STOP_GRACE_MS = 10_000;
const KILL_WAIT_MS = 5_000;
const LOG_TAIL_LINES = 25;

const paths = (dir: string) => ({
  state: join(dir, "state.json"),
  logs: join(dir, "logs"),
  pki: join(dir, "pki"),
  etcdData: join(dir, "etcd"),
  caCert: join(dir, "pki", "apiserver.crt"),
  saKey: join(dir, "sa.key"),
  tokens: join(dir, "tokens.csv"),
  kubeconfig: join(dir, "kubeconfig"),
  unprivilegedKubeconfig: join(dir, "kubeconfig-unprivileged"),
  log: (name: ControlPlaneProcess) => join(dir, "logs", `${name}.log`),
});

// ---------------------------------------------------------------------------------------------
// state.json

export function readState(dir: string): ControlPlaneState | undefined {
  const file = paths(resolve(dir)).state;
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, "utf8")) as ControlPlaneState;
  } catch (err) {
    throw new Error(`cannot read ${file}: ${(err as Error).message}`);
  }
}

function writeState(state: ControlPlaneState): void {
  // Atomic: the reaper re-reads this file while we write it.
  const file = paths(state.dir).state;
  writeFileSync(`${file}.tmp`, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
}

/** The nats-server processes state.json records: one, or a cluster's nodes. */
function natsProcesses(state: Pick<ControlPlaneState, "nats">): NatsProcess[] {
  return state.nats?.nodes ? state.nats.nodes.map((n) => `nats-server-${n.index}` as const) : ["nats-server"];
}

/** Process groups of the state that are still alive and still ours. */
function livingGroups(state: ControlPlaneState, names: readonly ProcessName[] = [...PROCESS_NAMES, ...natsProcesses(state)]): ProcessName[] {
  return names.filter((n) => {
    const pgid = state.pgids[n];
    return pgid !== undefined && isOurGroup(pgid, state.dir);
  });
}

/** Whether every nats-server process recorded runs. */
function natsAlive(state: ControlPlaneState): boolean {
  return state.nats !== undefined && livingGroups(state, natsProcesses(state)).length === natsProcesses(state).length;
}

function infoFromState(state: ControlPlaneState): ControlPlaneInfo {
  const p = paths(state.dir);
  return {
    dir: state.dir,
    server: state.server,
    kubeconfig: p.kubeconfig,
    unprivilegedKubeconfig: p.unprivilegedKubeconfig,
    adminToken: state.adminToken,
    unprivilegedToken: state.unprivilegedToken,
    version: state.versions.kubernetes ?? "unknown",
    etcdVersion: state.versions.etcd ?? "unknown",
    ...(state.nats && natsAlive(state) ?
      {
        natsUrl: state.nats.url,
        ...(state.nats.version ? { natsVersion: state.nats.version } : {}),
        ...(state.nats.auth ? { natsUser: state.nats.auth.user, natsPasswordFile: state.nats.auth.passwordFile } : {}),
        natsNodes: state.nats.nodes?.length ?? 1,
        ...(state.nats.streamReplicas !== undefined ? { natsStreamReplicas: state.nats.streamReplicas } : {}),
      }
    : {}),
  };
}

/** The running control plane in `dir` (all three processes alive), or undefined. */
export function runningControlPlane(dir: string): ControlPlaneInfo | undefined {
  const state = readState(dir);
  if (!state || state.stoppedAt || !state.readyAt) return undefined;
  return livingGroups(state, PROCESS_NAMES).length === PROCESS_NAMES.length ? infoFromState(state) : undefined;
}

// ---------------------------------------------------------------------------------------------
// small utilities

function tail(file: string, lines = LOG_TAIL_LINES): string {
  try {
    const text = readFileSync(file, "utf8");
    const all = text.trimEnd().split("\n");
    return all.slice(-lines).join("\n") || "(empty log)";
  } catch {
    return "(no log)";
  }
}

interface HttpResult {
  status: number;
  body: string;
}

/**
 * One readiness try of kube-apiserver: `probe` (its /readyz status) with the CA of its
 * self-generated serving cert, read again on every try. kube-apiserver writes that file in
 * place, so a read while it is being written can hold the leaf alone; kept, it failed every TLS
 * check after it ("self-signed certificate in certificate chain" for 60 s, in a CI run).
 */
export async function apiserverReadyOnce(caPath: string, probe: (ca: Buffer) => Promise<number>): Promise<boolean> {
  if (!existsSync(caPath)) return false;
  return (await probe(readFileSync(caPath))) === 200;
}

function get(url: string, opts: { ca?: Buffer; token?: string; timeoutMs?: number } = {}): Promise<HttpResult> {
  return new Promise((resolvePromise, reject) => {
    const u = new URL(url);
    const headers: Record<string, string> = { accept: "application/json" };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    const common = { method: "GET", headers, timeout: opts.timeoutMs ?? 2_000, agent: false as const };
    const req =
      u.protocol === "https:"
        ? httpsRequest(u, { ...common, ca: opts.ca, rejectUnauthorized: true })
        : httpRequest(u, common);
    req.on("response", (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolvePromise({ status: res.statusCode ?? 0, body }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`timeout after ${opts.timeoutMs ?? 2_000} ms`)));
    req.on("error", reject);
    req.end();
  });
}

const q = (s: string): string => JSON.stringify(s); // a JSON string is a valid YAML scalar

function kubeconfigYaml(server: string, ca: string, user: string, token: string, context: string): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: hookline",
    "  cluster:",
    `    server: ${q(server)}`,
    // The apiserver's self-signed serving cert; its SANs include 127.0.0.1 because we pass
    // --advertise-address=127.0.0.1 and bind to loopback. TLS is verified, not skipped.
    `    certificate-authority: ${q(ca)}`,
    "users:",
    `- name: ${q(user)}`,
    "  user:",
    `    token: ${q(token)}`,
    "contexts:",
    `- name: ${q(context)}`,
    "  context:",
    "    cluster: hookline",
    `    user: ${q(user)}`,
    "    namespace: default",
    `current-context: ${q(context)}`,
    "",
  ].join("\n");
}

/** Reuses tokens and the SA key of an earlier run in the same dir (etcd data is kept too). */
function ensureSecrets(dir: string): { adminToken: string; unprivilegedToken: string } {
  const p = paths(dir);
  if (!existsSync(p.saKey)) {
    const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    writeFileSync(p.saKey, privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 });
  }
  if (existsSync(p.tokens)) {
    const rows = readFileSync(p.tokens, "utf8").split("\n").map((l) => l.split(","));
    const admin = rows.find((r) => r[1] === "admin")?.[0];
    const unprivileged = rows.find((r) => r[1] === "unprivileged")?.[0];
    if (admin && unprivileged) return { adminToken: admin, unprivilegedToken: unprivileged };
  }
  const adminToken = randomBytes(24).toString("hex");
  const unprivilegedToken = randomBytes(24).toString("hex");
  // token,user,uid,"groups"; system:authenticated is added to every authenticated user.
  writeFileSync(
    p.tokens,
    `${adminToken},admin,admin,"system:masters"\n${unprivilegedToken},unprivileged,unprivileged\n`,
    { mode: 0o600 },
  );
  return { adminToken, unprivilegedToken };
}

class StartupError extends Error {
  override readonly name = "StartupError";
  constructor(
    message: string,
    readonly portConflict = false,
  ) {
    super(message);
  }
}

interface Child {
  name: ControlPlaneProcess;
  proc: ChildProcess;
  log: string;
  exit?: string;
}

// ---------------------------------------------------------------------------------------------
// start

/** Starts etcd, kube-apiserver and kube-controller-manager; resolves once all are usable. */
export async function startControlPlane(opts: StartControlPlaneOptions): Promise<ControlPlaneInfo> {
  const dir = resolve(opts.dir);
  const p = paths(dir);
  const progress = opts.onProgress ?? (() => undefined);
  const started = Date.now();
  const deadline = started + (opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);

  for (const b of PROCESS_NAMES) {
    if (!existsSync(join(opts.binDir, b))) throw new Error(`${b} not found in ${opts.binDir} (run ensureBinaries first)`);
  }
  const previous = readState(dir);
  if (previous && livingGroups(previous).length > 0) {
    throw new Error(
      `a control plane is already running in ${dir} (${previous.server}); stop it first with: hookline cluster down --dir ${dir}`,
    );
  }
  // Before anything starts: a NATS that would leave another store's events undelivered is refused.
  if (opts.nats) checkLayout(dir, wantedNodes(dir, opts.nats, previous?.nats));

  const explicit = opts.ports ?? {};
  const explicitList = Object.entries(explicit).filter((e): e is [string, number] => e[1] !== undefined);
  const seen = new Set<number>();
  for (const [which, port] of explicitList) {
    if (!Number.isInteger(port) || port <= 0 || port > 65535) throw new Error(`invalid ${which} port: ${port}`);
    if (seen.has(port)) throw new Error(`port ${port} is requested twice`);
    seen.add(port);
    if (!(await isPortFree(port))) throw new Error(`port ${port} is already in use (requested for ${which})`);
  }

  for (const d of [dir, p.logs, p.pki, p.etcdData]) mkdirSync(d, { recursive: true, mode: 0o700 });
  const secrets = ensureSecrets(dir);

  // Prefer the ports of an earlier run in this dir (a stable server URL across down/up).
  let preferred: ControlPlanePorts | undefined = previous?.ports;
  for (let attempt = 1; ; attempt++) {
    const ports = await choosePorts(explicit, preferred);
    preferred = undefined;
    try {
      return await startOnce({ ...opts, dir }, ports, secrets, deadline, started, progress, previous?.nats);
    } catch (err) {
      // A free port can be taken between our check and the child's bind: retry with new ones.
      const retry = err instanceof StartupError && err.portConflict && explicitList.length === 0 && attempt < 3;
      if (!retry) throw err;
      progress(`port conflict, retrying with other ports (${(err as Error).message.split("\n")[0]})`);
    }
  }
}

async function choosePorts(explicit: ControlPlanePorts, preferred?: ControlPlanePorts): Promise<Required<ControlPlanePorts>> {
  if (preferred?.etcd && preferred.etcdPeer && preferred.apiserver) {
    const wanted = { etcd: explicit.etcd ?? preferred.etcd, etcdPeer: explicit.etcdPeer ?? preferred.etcdPeer, apiserver: explicit.apiserver ?? preferred.apiserver };
    const distinct = new Set(Object.values(wanted)).size === 3;
    const free = await Promise.all(
      (["etcd", "etcdPeer", "apiserver"] as const).map(async (k) => explicit[k] !== undefined || (await isPortFree(wanted[k]))),
    );
    if (distinct && free.every(Boolean)) return wanted;
  }
  const taken = new Set(Object.values(explicit).filter((v): v is number => v !== undefined));
  const pool = (await freePorts(3 + taken.size)).filter((port) => !taken.has(port));
  const next = (): number => {
    const port = pool.shift();
    if (port === undefined) throw new Error("could not find free ports");
    return port;
  };
  return { etcd: explicit.etcd ?? next(), etcdPeer: explicit.etcdPeer ?? next(), apiserver: explicit.apiserver ?? next() };
}

async function startOnce(
  opts: StartControlPlaneOptions & { dir: string },
  ports: Required<ControlPlanePorts>,
  secrets: { adminToken: string; unprivilegedToken: string },
  deadline: number,
  started: number,
  progress: (line: string) => void,
  recordedNats: NatsState | undefined,
): Promise<ControlPlaneInfo> {
  const dir = opts.dir;
  const p = paths(dir);
  const server = `https://127.0.0.1:${ports.apiserver}`;
  const etcdUrl = `http://127.0.0.1:${ports.etcd}`;
  const state: ControlPlaneState = {
    dir,
    binDir: opts.binDir,
    pids: {},
    pgids: {},
    ports,
    server,
    versions: {},
    ...secrets,
    startedAt: new Date(started).toISOString(),
  };
  const children: Child[] = [];
  const elapsed = (): string => `${((Date.now() - started) / 1000).toFixed(1)}s`;

  const launch = (name: ControlPlaneProcess, args: string[]): void => {
    const fd = openSync(p.log(name), "w", 0o600);
    let proc: ChildProcess;
    try {
      // detached: its own session and process group, so we can signal the whole group and a
      // Ctrl-C in the terminal does not reach it.
      proc = spawn(join(opts.binDir, name), args, { cwd: dir, detached: true, stdio: ["ignore", fd, fd], env: opts.env });
    } finally {
      closeSync(fd);
    }
    const child: Child = { name, proc, log: p.log(name) };
    proc.on("exit", (code, signal) => (child.exit = signal ? `was killed by ${signal}` : `exited with code ${code}`));
    proc.on("error", (err) => (child.exit = `could not be started: ${err.message}`));
    children.push(child);
    if (proc.pid !== undefined) {
      state.pids[name] = proc.pid;
      state.pgids[name] = proc.pid;
    }
    writeState(state);
  };

  // Polls `check` every 100 ms; fails fast when a child dies, with its log tail.
  const waitUntil = async (what: string, check: () => Promise<boolean>): Promise<void> => {
    let last = "";
    for (;;) {
      for (const c of children) {
        if (c.exit !== undefined) {
          const log = tail(c.log);
          const conflict = saysPortTaken(log);
          throw new StartupError(`${c.name} ${c.exit} while waiting for ${what}; last lines of ${c.log}:\n${log}`, conflict);
        }
      }
      try {
        if (await check()) return;
        last = "";
      } catch (err) {
        last = (err as Error).message;
      }
      if (Date.now() > deadline) {
        const logs = children.map((c) => `--- ${c.log}\n${tail(c.log, 12)}`).join("\n");
        throw new StartupError(
          `timed out after ${elapsed()} waiting for ${what}${last ? ` (last error: ${last})` : ""}\n${logs}`,
        );
      }
      await delay(POLL_MS);
    }
  };

  let reaperPid: number | undefined;
  try {
    const watched = opts.attachToPid ?? (opts.attachToParent ? process.pid : undefined);
    if (watched !== undefined) {
      writeState(state);
      reaperPid = spawnReaper(watched, p.state);
      state.reaperPid = reaperPid;
    }

    progress(`starting etcd on ${etcdUrl}`);
    launch("etcd", [
      `--data-dir=${p.etcdData}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=http://127.0.0.1:${ports.etcdPeer}`,
      "--unsafe-no-fsync=true",
    ]);
    await waitUntil(`etcd ${etcdUrl}/health`, async () => {
      const r = await get(`${etcdUrl}/health`);
      return r.status === 200 && (JSON.parse(r.body) as { health?: string }).health === "true";
    });
    const etcdVersion = (JSON.parse((await get(`${etcdUrl}/version`)).body) as { etcdserver?: string }).etcdserver;
    state.versions.etcd = etcdVersion ? `v${etcdVersion}` : "unknown";
    progress(`etcd ${state.versions.etcd} healthy (${elapsed()}); starting kube-apiserver on ${server}`);

    launch("kube-apiserver", [
      `--etcd-servers=${etcdUrl}`,
      `--cert-dir=${p.pki}`,
      `--secure-port=${ports.apiserver}`,
      "--bind-address=127.0.0.1",
      // Required without a default route: otherwise it looks for a host interface and dies.
      "--advertise-address=127.0.0.1",
      "--service-cluster-ip-range=10.0.0.0/24",
      `--service-account-issuer=${server}`,
      `--service-account-key-file=${p.saKey}`,
      `--service-account-signing-key-file=${p.saKey}`,
      "--authorization-mode=RBAC",
      `--token-auth-file=${p.tokens}`,
      "--allow-privileged=true",
      // No `kubernetes` Endpoints reconciling against a loopback advertise address.
      "--endpoint-reconciler-type=none",
      // ServiceAccount admission stays ON: KCM's serviceaccount controller creates the SAs.
    ]);
    // /readyz with the admin token (anonymous gets 403 until the RBAC bootstrap roles exist)
    // and TLS verified against the self-generated cert, which appears once the server starts.
    let ca: Buffer | undefined;
    const apiGet = (path: string): Promise<HttpResult> => get(`${server}${path}`, { ca, token: secrets.adminToken });
    await waitUntil(`kube-apiserver ${server}/readyz`, () =>
      apiserverReadyOnce(p.caCert, async (read) => {
        ca = read;
        return (await apiGet("/readyz")).status;
      }),
    );
    const version = (JSON.parse((await apiGet("/version")).body) as { gitVersion?: string }).gitVersion ?? "unknown";
    state.versions.kubernetes = version;
    writeState(state);
    progress(`kube-apiserver ${version} ready (${elapsed()})`);

    writeFileSync(p.kubeconfig, kubeconfigYaml(server, p.caCert, "admin", secrets.adminToken, "hookline"), { mode: 0o600 });
    writeFileSync(
      p.unprivilegedKubeconfig,
      kubeconfigYaml(server, p.caCert, "unprivileged", secrets.unprivilegedToken, "hookline-unprivileged"),
      { mode: 0o600 },
    );
    await waitUntil("namespace default", async () => (await apiGet("/api/v1/namespaces/default")).status === 200);

    const info = infoFromState(state);
    if (opts.beforeControllerManager) {
      progress("running the before-controller-manager hook");
      await opts.beforeControllerManager(info);
    }

    progress("starting kube-controller-manager (namespace, garbagecollector, serviceaccount)");
    launch("kube-controller-manager", [
      `--kubeconfig=${p.kubeconfig}`,
      "--leader-elect=false",
      "--controllers=namespace,garbagecollector,serviceaccount,clusterrole-aggregation",
      "--secure-port=0",
      `--service-account-private-key-file=${p.saKey}`,
    ]);
    // Proves KCM runs: its serviceaccount controller creates this one.
    await waitUntil(
      "kube-controller-manager to create ServiceAccount default/default",
      async () => (await apiGet("/api/v1/namespaces/default/serviceaccounts/default")).status === 200,
    );

    if (opts.nats) {
      const nodes = wantedNodes(dir, opts.nats, recordedNats);
      progress(nodes > 1 ? `starting a JetStream cluster of ${nodes} nats-server nodes` : "starting nats-server with JetStream");
      const nats = await startNatsInState(state, opts.nats, opts.env, Math.max(5_000, deadline - Date.now()), recordedNats);
      progress(`nats-server ${nats.version ?? ""} ready at ${nats.url} (${elapsed()})`);
    }

    state.readyAt = new Date().toISOString();
    writeState(state);
    progress(`control plane ready in ${elapsed()}`);
    // Let the caller's process exit while the control plane keeps running (cluster up).
    for (const c of children) c.proc.unref();
    return opts.nats ? infoFromState(state) : info;
  } catch (err) {
    for (const name of natsProcesses(state)) {
      const g = state.pgids[name];
      if (g !== undefined) await stopNatsGroup(g, dir, 3_000).catch(() => undefined);
    }
    const pgids = children.map((c) => c.proc.pid).filter((pid): pid is number => pid !== undefined);
    await stopGroups(pgids.reverse(), dir, 3_000).catch(() => undefined);
    if (reaperPid !== undefined) stopReaper(reaperPid, dir);
    for (const c of children) c.proc.unref();
    state.stoppedAt = new Date().toISOString();
    writeState(state);
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// stop

/** SIGTERM each group (in order), wait up to graceMs for all, SIGKILL leftovers, verify. */
async function stopGroups(pgids: number[], marker: string, graceMs: number): Promise<void> {
  const ours = pgids.filter((g) => isOurGroup(g, marker));
  const alive = (): number[] => ours.filter((g) => groupMembers(g).length > 0);
  const waitGone = async (ms: number): Promise<boolean> => {
    const until = Date.now() + ms;
    while (alive().length > 0) {
      if (Date.now() > until) return false;
      await delay(POLL_MS);
    }
    return true;
  };
  const termDeadline = Date.now() + graceMs;
  // Stop the clients before etcd: controller-manager, apiserver, then etcd.
  for (const g of ours) {
    signalGroup(g, "SIGTERM");
    const until = Date.now() + Math.max(0, Math.min(3_000, termDeadline - Date.now()));
    while (groupMembers(g).length > 0 && Date.now() < until) await delay(POLL_MS);
  }
  if (await waitGone(Math.max(0, termDeadline - Date.now()))) return;
  for (const g of alive()) signalGroup(g, "SIGKILL");
  if (await waitGone(KILL_WAIT_MS)) return;
  throw new Error(`process groups still alive after SIGKILL: ${alive().join(", ")}`);
}

/**
 * Stops the control plane recorded in DIR/state.json: SIGTERM to each process group, up to
 * ~10 s of grace, then SIGKILL, then verifies that nothing is left. Idempotent.
 */
export async function stopControlPlane(dir: string): Promise<void> {
  const abs = resolve(dir);
  const state = readState(abs);
  if (!state) return;
  // Reaper first, so it does not race us; then nats-server (every node), KCM, apiserver, etcd.
  if (state.reaperPid !== undefined) stopReaper(state.reaperPid, abs);
  const order: ProcessName[] = [...natsProcesses(state), "kube-controller-manager", "kube-apiserver", "etcd"];
  const pgids = order.map((n) => state.pgids[n]).filter((g): g is number => g !== undefined);
  await stopGroups(pgids, abs, STOP_GRACE_MS);
  const left = pgids.filter((g) => groupMembers(g).length > 0 && isOurGroup(g, abs));
  if (left.length > 0) throw new Error(`control plane processes still running: ${left.join(", ")}`);
  if (!state.stoppedAt) {
    state.stoppedAt = new Date().toISOString();
    writeState({ ...state, dir: abs });
  }
}

// ---------------------------------------------------------------------------------------------
// nats-server beside the control plane (stream mode)

/** The node count a start asks for: the option, else what the dir recorded or holds stores of, else 1. */
function wantedNodes(dir: string, nats: NatsOptions, recorded: NatsState | undefined): number {
  return nats.nodes ?? recorded?.nodes?.length ?? storedNatsNodes(dir) ?? 1;
}

/** Refuses to start a local NATS whose layout would leave the events of another store in DIR undelivered. */
function checkLayout(dir: string, nodes: number): void {
  const other = otherLayoutStore(dir, nodes);
  if (other) {
    throw new Error(
      `${dir} holds the JetStream store ${other} of a local NATS with ${nodes === 1 ? "several nodes" : "another number of nodes"}: ` +
        `its events would not be delivered by ${nodes === 1 ? "one nats-server" : `a cluster of ${nodes}`}. Use another --dir, or the same node count as before (or delete that store to drop its events)`,
    );
  }
}

/**
 * Launches nats-server (or a cluster of nodes: NatsOptions.nodes) in the control plane's dir and
 * records it in `state` (written at once, so the reaper covers it). `recorded`: what an earlier
 * run in the dir recorded (its ports are used again when free).
 */
async function startNatsInState(state: ControlPlaneState, nats: NatsOptions, env: NodeJS.ProcessEnv | undefined, timeoutMs: number, recorded: NatsState | undefined = state.nats): Promise<NatsState> {
  const nodes = wantedNodes(state.dir, nats, recorded);
  checkLayout(state.dir, nodes);
  if (nodes > 1) return startNatsClusterInState(state, { ...nats, nodes }, env, timeoutMs, recorded);
  const users = nats.auth ? ensureNatsAuth(state.dir, nats.auth) : undefined;
  const launched = await launchNatsServer({
    ...(users ? { config: users.paths.config } : {}),
    binary: nats.binary,
    dir: state.dir,
    timeoutMs,
    ...(nats.ports ? { ports: nats.ports } : {}),
    // The same URL as last time in this dir when its ports are still free.
    ...(recorded?.ports && !recorded.nodes ? { preferred: recorded.ports } : {}),
    ...(env ? { env } : {}),
    onSpawn: (pgid) => {
      state.pids["nats-server"] = pgid;
      state.pgids["nats-server"] = pgid;
      writeState(state);
    },
  });
  state.nats = {
    url: launched.url,
    ports: launched.ports,
    version: launched.version,
    storeDir: launched.storeDir,
    binary: nats.binary,
    startedAt: new Date().toISOString(),
    ...(users ? { auth: { user: users.operator.user, passwordFile: users.paths.operatorPassword, config: users.paths.config } } : {}),
  };
  writeState(state);
  return state.nats;
}

/** A local JetStream cluster (nats-cluster.ts), always with authentication: the nodes' route user too. */
async function startNatsClusterInState(state: ControlPlaneState, nats: NatsOptions & { nodes: number }, env: NodeJS.ProcessEnv | undefined, timeoutMs: number, recorded: NatsState | undefined): Promise<NatsState> {
  if (!nats.auth) throw new Error("a local NATS cluster runs with authentication only (NatsOptions.auth)");
  if (nats.ports) throw new Error("the ports of a local NATS cluster are chosen free: NatsOptions.ports is for one nats-server");
  const users = ensureNatsAuth(state.dir, nats.auth, { route: true });
  const record = (nodes: NatsNodeState[], version: string | undefined): NatsState => ({
    url: natsClusterUrl(nodes.map((n) => n.ports)),
    ports: { client: nodes[0]!.ports.client, monitor: nodes[0]!.ports.monitor },
    ...(version ? { version } : {}),
    storeDir: nodes[0]!.storeDir,
    binary: nats.binary,
    startedAt: new Date().toISOString(),
    auth: { user: users.operator.user, passwordFile: users.paths.operatorPassword, config: users.paths.accounts },
    nodes,
    streamReplicas: streamReplicasFor(nodes.length),
  });
  const launched = await launchNatsCluster({
    binary: nats.binary,
    dir: state.dir,
    nodes: nats.nodes,
    route: users.route!,
    timeoutMs,
    ...(recorded?.nodes?.length === nats.nodes ? { preferred: recorded.nodes.map((n) => n.ports) } : {}),
    ...(env ? { env } : {}),
    onSpawn: (index, pgid) => {
      state.pids[`nats-server-${index}`] = pgid;
      state.pgids[`nats-server-${index}`] = pgid;
      writeState(state);
    },
  });
  state.nats = record(
    launched.map((n) => ({ index: n.index, name: n.name, ports: n.ports, storeDir: n.storeDir, config: n.config, log: n.log })),
    launched[0]?.version,
  );
  writeState(state);
  return state.nats;
}

/** Starts again the nodes of the recorded cluster that do not run (a crash, a kill), on their ports and stores, and waits for the cluster. */
async function restartNatsNodes(state: ControlPlaneState, nats: NatsOptions, env: NodeJS.ProcessEnv | undefined, timeoutMs: number): Promise<void> {
  const nodes = state.nats!.nodes!;
  if (!nats.auth) throw new Error("a local NATS cluster runs with authentication only (NatsOptions.auth)");
  const users = ensureNatsAuth(state.dir, nats.auth, { route: true });
  const ports = nodes.map((n) => n.ports);
  const dead = nodes.filter((n) => livingGroups(state, [`nats-server-${n.index}`]).length === 0);
  await Promise.all(
    dead.map((n) =>
      launchNatsNode({
        binary: nats.binary,
        dir: state.dir,
        index: n.index,
        ports,
        route: users.route!,
        timeoutMs,
        ...(env ? { env } : {}),
        onSpawn: (pgid) => {
          state.pids[`nats-server-${n.index}`] = pgid;
          state.pgids[`nats-server-${n.index}`] = pgid;
          writeState(state);
        },
      }),
    ),
  );
  await waitForNatsCluster(ports, timeoutMs);
}

/**
 * Starts nats-server beside the control plane already running in `dir` (`cluster up --nats`
 * after a plain `cluster up`) and returns the control plane's info with its URL. Does nothing
 * when it already runs; starts again the nodes of a cluster that stopped. The control plane's
 * reaper, if any, picks it up from state.json.
 */
export async function startNatsBeside(dir: string, nats: NatsOptions & { env?: NodeJS.ProcessEnv; timeoutMs?: number }): Promise<ControlPlaneInfo> {
  const abs = resolve(dir);
  const state = readState(abs);
  if (!state || !runningControlPlane(abs)) throw new Error(`no control plane is running in ${abs}; start it with: hookline cluster up --dir ${abs} --nats`);
  state.dir = abs;
  const recordedNodes = state.nats?.nodes?.length ?? (state.nats ? 1 : undefined);
  const anyAlive = state.nats !== undefined && livingGroups(state, natsProcesses(state)).length > 0;
  if (anyAlive && nats.nodes !== undefined && nats.nodes !== recordedNodes) {
    throw new Error(`the local NATS in ${abs} runs ${recordedNodes} node(s), not ${nats.nodes}: stop it first with hookline cluster down --dir ${abs}`);
  }
  const timeoutMs = nats.timeoutMs ?? 30_000;
  if (anyAlive && state.nats?.nodes && !natsAlive(state)) await restartNatsNodes(state, nats, nats.env, timeoutMs);
  else if (!anyAlive) await startNatsInState(state, nats, nats.env, timeoutMs);
  return infoFromState(state);
}

/**
 * The publisher of `namespaces` on the nats-server running beside the control plane in `dir`
 * (made when missing: every node reloads its users), with the URL (list) that carries its credentials.
 */
export async function addNatsPublisherBeside(dir: string, auth: NatsAuthPolicy, namespaces: readonly string[]): Promise<NatsPublisher & { url: string }> {
  const abs = resolve(dir);
  const state = readState(abs);
  if (!state?.nats || !natsAlive({ ...state, dir: abs })) throw new Error(`no nats-server is running in ${abs}; start it with: hookline cluster up --dir ${abs} --nats`);
  if (!state.nats.auth) throw new Error(`the nats-server in ${abs} runs without authentication (started by an earlier Hookline); restart it: hookline cluster down --dir ${abs} && hookline cluster up --dir ${abs} --nats`);
  const { publisher, added } = addNatsPublisher(abs, auth, namespaces);
  if (added) {
    const monitors = state.nats.nodes ? state.nats.nodes.map((n) => [`nats-server-${n.index}` as const, n.ports.monitor] as const) : [["nats-server" as const, state.nats.ports.monitor] as const];
    for (const [name, monitor] of monitors) await reloadNatsServer(state.pgids[name]!, abs, monitor);
  }
  return { ...publisher, url: urlWithCredentials(state.nats.url, publisher) };
}

/** Stops only the nats-server (every node) recorded in `dir` (what `hookline dev --nats` started beside a running control plane). */
export async function stopNatsBeside(dir: string): Promise<void> {
  const abs = resolve(dir);
  const state = readState(abs);
  if (!state) return;
  for (const name of natsProcesses(state)) {
    const pgid = state.pgids[name];
    if (pgid !== undefined) await stopNatsGroup(pgid, abs);
  }
}
