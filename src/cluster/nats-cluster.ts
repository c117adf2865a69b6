// A local JetStream cluster: N nats-servers on 127.0.0.1 (`hookline cluster up --nats
// --nats-nodes 3`, `hookline dev --nats --nats-nodes 3`; LocalNatsCluster for the tests and the
// soak). Each node has its own client, monitoring and cluster (route) port and its own store,
// routes to every other node, and the same accounts and users (nats-auth.ts accounts.conf), so a
// client given the list of all client URLs fails over to any node. The nodes authenticate each
// other with the route user (nats-auth.ts). Each node is launched like the single server
// (nats.ts launchNatsServer: detached in its own process group, its command line naming DIR, which
// the reaper and every signal check); the cluster is ready once the nodes elected a JetStream
// meta leader that sees every other node current.
//
// Layout inside DIR (node i = 1..N):
//   nats-<i>/nats-server.conf    its config: name, cluster port, routes with the route user's
//                                password (so 0600 in a 0700 directory), nats-auth/accounts.conf
//   nats-<i>/jetstream/          its JetStream store (kept across stop/start)
//   logs/nats-server-<i>.log     its stdout+stderr
//   state.json                   LocalNatsCluster only: each node's pgid and ports (the reaper reads it)
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { addNatsPublisher, ensureNatsAuth, natsAuthPaths, urlWithCredentials, type NatsAuthPolicy, type NatsPublisher, type NatsUser } from "./nats-auth.js";
import { httpGet, launchNatsServer, natsUrl, reloadNatsServer, stopNatsGroup, type LaunchedNats, type NatsPorts } from "./nats.js";
import { freePorts, isPortFree, saysPortTaken } from "./ports.js";
import { groupMembers, isOurGroup, signalGroup } from "./procs.js";
import { spawnReaper, stopReaper } from "./reaper.js";

/** The cluster's name (nats-server `cluster.name`): JetStream's, in stream info. */
export const NATS_CLUSTER_NAME = "hookline-local";
/** Node counts a local cluster takes: odd, so a majority survives losing (n - 1) / 2 nodes. */
export const NATS_NODE_COUNTS: readonly number[] = [1, 3, 5];

/** Node i's server name (1-based): what stream info's cluster.leader and replicas name. */
export const natsNodeName = (index: number): string => `${NATS_CLUSTER_NAME}-${index}`;

/** The index of a node from its server name (undefined for a name that is not a node's). */
export function natsNodeIndex(name: string): number | undefined {
  const m = /^hookline-local-([1-9]\d*)$/.exec(name);
  return m ? Number(m[1]) : undefined;
}

/**
 * Replicas of the HOOKLINE stream and its buckets on a local cluster of `nodes`
 * (HOOKLINE_STREAM_REPLICAS): 3 from three nodes on, what production runs; 1 on one.
 */
export const streamReplicasFor = (nodes: number): number => Math.min(3, nodes);

/** A node's client, monitoring and cluster (route) ports, all on 127.0.0.1. */
export interface NatsNodePorts extends NatsPorts {
  cluster: number;
}

export const natsNodePaths = (dir: string, index: number) => {
  const root = join(resolve(dir), `nats-${index}`);
  return { root, storeDir: root, config: join(root, "nats-server.conf"), log: join(resolve(dir), "logs", `nats-server-${index}.log`) };
};

/** The client URLs of every node, comma-separated (HOOKLINE_NATS_URL, --nats): a client fails over among them. */
export const natsClusterUrl = (ports: readonly NatsPorts[]): string => ports.map((p) => natsUrl(p.client)).join(",");

/** How the nodes reach each other; the soak puts a proxy on each route to cut a node off. */
export interface RouteOptions {
  /** The port node `from` dials for node `to`'s cluster port (1-based indexes); default that port. */
  routePort?: (from: number, to: number) => number;
  /** The host:port each node tells the others it is at (route gossip); default its cluster port. */
  advertise?: (index: number) => string;
}

export interface NodeConfigInput extends RouteOptions {
  /** This node (1-based). */
  index: number;
  /** Every node's ports, node i at [i - 1]. */
  ports: readonly NatsNodePorts[];
  /** The user every node's cluster port requires, and every route presents. */
  route: NatsUser;
  /** accounts.conf (nats-auth.ts), included: the same users on every node. */
  accountsFile: string;
  /** Where this config is written (the include is relative to it). */
  configFile: string;
}

/** Node `index`'s nats-server config. Pure. */
export function renderNodeConfig(c: NodeConfigInput): string {
  const q = (s: string) => JSON.stringify(s);
  const self = c.ports[c.index - 1];
  if (!self) throw new Error(`node ${c.index} is not one of the ${c.ports.length} nodes`);
  const creds = `${encodeURIComponent(c.route.user)}:${encodeURIComponent(c.route.password)}`;
  const routes = c.ports.flatMap((p, i) => (i + 1 === c.index ? [] : [`nats-route://${creds}@127.0.0.1:${c.routePort?.(c.index, i + 1) ?? p.cluster}`]));
  const include = relative(join(c.configFile, ".."), c.accountsFile);
  return [
    `# Written by Hookline (src/cluster/nats-cluster.ts): node ${c.index} of ${c.ports.length} of the local JetStream cluster ${NATS_CLUSTER_NAME}.`,
    "# The command line sets its client and monitoring ports and its store; a reload (SIGHUP) reads this file.",
    `server_name: ${q(natsNodeName(c.index))}`,
    "cluster: {",
    `  name: ${q(NATS_CLUSTER_NAME)}`,
    `  listen: ${q(`127.0.0.1:${self.cluster}`)}`,
    ...(c.advertise ? [`  advertise: ${q(c.advertise(c.index))}`] : []),
    `  authorization: { user: ${q(c.route.user)}, password: ${q(c.route.password)} }`,
    "  routes: [",
    ...routes.map((r) => `    ${q(r)}`),
    "  ]",
    "}",
    `include ${q(include)}`,
    "",
  ].join("\n");
}

/**
 * Assigns `nodes` × 3 distinct ports (client, monitor, cluster per node) from `pool`, in order.
 * Pure.
 */
export function assignNodePorts(nodes: number, pool: readonly number[]): NatsNodePorts[] {
  if (new Set(pool).size < nodes * 3) throw new Error(`${nodes} nodes need ${nodes * 3} distinct ports, got ${new Set(pool).size}`);
  const distinct = [...new Set(pool)];
  return Array.from({ length: nodes }, (_, i) => ({ client: distinct[i * 3]!, monitor: distinct[i * 3 + 1]!, cluster: distinct[i * 3 + 2]! }));
}

async function allFree(ports: readonly NatsNodePorts[]): Promise<boolean> {
  const all = ports.flatMap((p) => [p.client, p.monitor, p.cluster]);
  if (new Set(all).size !== all.length) return false;
  return (await Promise.all(all.map(isPortFree))).every(Boolean);
}

export interface LaunchedNatsNode extends LaunchedNats {
  index: number;
  name: string;
  ports: NatsNodePorts;
  config: string;
}

export interface LaunchNatsNodeOptions extends RouteOptions {
  binary: string;
  /** The cluster's directory (every node's marker). */
  dir: string;
  /** This node (1-based). */
  index: number;
  /** Every node's ports; this node's are used as they are ("already in use" otherwise). */
  ports: readonly NatsNodePorts[];
  route: NatsUser;
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
  /** Called with the pid (= pgid) right after the spawn, before readiness: record it for the reaper. */
  onSpawn?: (pgid: number) => void;
}

/**
 * Writes node `index`'s config and starts it on its ports and its store; resolves once it
 * answers /healthz (not once the cluster formed: waitForNatsCluster).
 */
export async function launchNatsNode(o: LaunchNatsNodeOptions): Promise<LaunchedNatsNode> {
  const dir = resolve(o.dir);
  const p = natsNodePaths(dir, o.index);
  const self = o.ports[o.index - 1];
  if (!self) throw new Error(`node ${o.index} is not one of the ${o.ports.length} nodes`);
  if (!(await isPortFree(self.cluster))) throw new Error(`port ${self.cluster} is already in use (the cluster port of nats-server node ${o.index})`);
  mkdirSync(p.root, { recursive: true, mode: 0o700 });
  const text = renderNodeConfig({ index: o.index, ports: o.ports, route: o.route, accountsFile: natsAuthPaths(dir).accounts, configFile: p.config, ...(o.routePort ? { routePort: o.routePort } : {}), ...(o.advertise ? { advertise: o.advertise } : {}) });
  writeFileSync(`${p.config}.tmp`, text, { mode: 0o600 });
  renameSync(`${p.config}.tmp`, p.config);
  const launched = await launchNatsServer({
    binary: o.binary,
    dir,
    ports: { client: self.client, monitor: self.monitor },
    config: p.config,
    paths: { storeDir: p.storeDir, log: p.log },
    ...(o.env ? { env: o.env } : {}),
    ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}),
    ...(o.onSpawn ? { onSpawn: o.onSpawn } : {}),
  });
  return { ...launched, index: o.index, name: natsNodeName(o.index), ports: self, config: p.config };
}

interface MetaCluster {
  leader?: string;
  cluster_size?: number;
  replicas?: Array<{ name: string; current?: boolean; offline?: boolean }>;
}

/** What node `monitorPort` knows of the JetStream meta group (/jsz), undefined when it does not answer. */
async function metaOf(monitorPort: number): Promise<MetaCluster | undefined> {
  try {
    const r = await httpGet(`http://127.0.0.1:${monitorPort}/jsz`);
    return r.status === 200 ? (JSON.parse(r.body) as { meta_cluster?: MetaCluster }).meta_cluster : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Why the nodes at `ports` do not form a JetStream cluster yet (undefined once they do): every
 * node answering names the same meta leader, and the leader sees every other node current.
 */
export async function natsClusterProblem(ports: readonly NatsNodePorts[]): Promise<string | undefined> {
  const metas = await Promise.all(ports.map((p) => metaOf(p.monitor)));
  const silent = metas.flatMap((m, i) => (m ? [] : [natsNodeName(i + 1)]));
  if (silent.length) return `${silent.join(", ")} not answering /jsz`;
  const leaders = new Set(metas.map((m) => m!.leader ?? ""));
  if (leaders.size !== 1 || leaders.has("")) return `no meta leader all nodes agree on (they name: ${[...leaders].map((l) => l || "none").join(", ")})`;
  const leader = [...leaders][0]!;
  const at = natsNodeIndex(leader);
  const view = at !== undefined ? metas[at - 1] : undefined;
  if (!view) return `the meta leader ${leader} is not one of the nodes`;
  const current = (view.replicas ?? []).filter((r) => r.current && !r.offline).length;
  if (current < ports.length - 1) return `the meta leader ${leader} sees ${current} of ${ports.length - 1} other nodes current`;
  return undefined;
}

/** Waits until the nodes form a JetStream cluster (natsClusterProblem); throws naming what is missing. */
export async function waitForNatsCluster(ports: readonly NatsNodePorts[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const problem = await natsClusterProblem(ports);
    if (problem === undefined) return;
    if (Date.now() > deadline) throw new Error(`the ${ports.length} nats-server nodes did not form a JetStream cluster within ${timeoutMs} ms: ${problem}`);
    await delay(100);
  }
}

function tail(file: string, lines = 12): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n") || "(empty log)";
  } catch {
    return "(no log)";
  }
}

export interface LaunchNatsClusterOptions extends RouteOptions {
  binary: string;
  dir: string;
  nodes: number;
  route: NatsUser;
  /** Ports to use as they are (the soak's proxies point at them). */
  ports?: readonly NatsNodePorts[];
  /** Ports of an earlier run, used when all still free (stable URLs across down/up). */
  preferred?: readonly NatsNodePorts[];
  env?: NodeJS.ProcessEnv;
  /** Deadline of the nodes' start and of the cluster forming (default 60 s). */
  timeoutMs?: number;
  onSpawn?: (index: number, pgid: number) => void;
}

/**
 * Starts every node at once (a node alone never elects a meta leader: it waits for a majority)
 * and resolves once they form a JetStream cluster. On failure every node started is stopped;
 * ports taken between the choice and the bind are chosen again (unless given).
 */
export async function launchNatsCluster(o: LaunchNatsClusterOptions): Promise<LaunchedNatsNode[]> {
  const dir = resolve(o.dir);
  const timeoutMs = o.timeoutMs ?? 60_000;
  let preferred = o.preferred && o.preferred.length === o.nodes ? o.preferred : undefined;
  for (let attempt = 1; ; attempt++) {
    const ports = o.ports ?? (preferred && (await allFree(preferred)) ? preferred : assignNodePorts(o.nodes, await freePorts(o.nodes * 3)));
    preferred = undefined;
    const pgids: number[] = [];
    const started = await Promise.allSettled(
      ports.map((_, i) =>
        launchNatsNode({
          ...o,
          dir,
          index: i + 1,
          ports,
          timeoutMs,
          onSpawn: (pgid) => {
            pgids.push(pgid);
            o.onSpawn?.(i + 1, pgid);
          },
        }),
      ),
    );
    const failed = started.flatMap((s) => (s.status === "rejected" ? [s.reason as Error] : []));
    try {
      if (failed.length) throw failed[0]!;
      await waitForNatsCluster(ports, timeoutMs);
      return started.map((s) => (s as PromiseFulfilledResult<LaunchedNatsNode>).value);
    } catch (err) {
      await Promise.all(pgids.map((g) => stopNatsGroup(g, dir, 3_000).catch(() => undefined)));
      const conflict = failed.some((e) => saysPortTaken(e.message));
      if (conflict && !o.ports && attempt < 3) continue;
      const logs = ports.map((_, i) => `--- ${natsNodePaths(dir, i + 1).log}\n${tail(natsNodePaths(dir, i + 1).log)}`).join("\n");
      throw new Error(`${(err as Error).message}\n${failed.length ? "" : logs}`.trimEnd(), { cause: err });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// On its own: a private cluster, for the tests and the soak.

interface ClusterState {
  dir: string;
  pgids: Record<string, number>;
  reaperPid?: number;
  ports?: NatsNodePorts[];
}

export interface LocalNatsClusterOptions extends RouteOptions {
  dir: string;
  binary: string;
  nodes: number;
  /** Users and what each may do (nats-auth.ts): the same on every node. */
  auth: NatsAuthPolicy;
  /** Fixed ports (the soak's route proxies need them before the start); free ports otherwise. */
  ports?: NatsNodePorts[];
  /** Kill every node when this process dies, even by SIGKILL (default true). */
  attachToParent?: boolean;
  env?: NodeJS.ProcessEnv;
}

/** A node of a LocalNatsCluster. */
export interface LocalNatsNode {
  index: number;
  name: string;
  ports: NatsNodePorts;
  pgid: number | undefined;
  running: boolean;
}

/**
 * A JetStream cluster of its own in DIR: every node can be killed (a crash), stopped, stopped
 * for a while (SIGSTOP), and started again on its ports and store, so a test or the soak can
 * take a node away under load and bring it back.
 */
export class LocalNatsCluster {
  private readonly state: ClusterState;
  private operatorUser!: NatsUser;
  private adminUser: NatsUser | undefined;
  private route!: NatsUser;
  private versionSeen = "unknown";

  private constructor(private readonly opts: LocalNatsClusterOptions & { dir: string }) {
    this.state = { dir: opts.dir, pgids: {} };
  }

  static async start(opts: LocalNatsClusterOptions): Promise<LocalNatsCluster> {
    if (!NATS_NODE_COUNTS.includes(opts.nodes)) throw new Error(`a local cluster has ${NATS_NODE_COUNTS.join(", ")} nodes, not ${opts.nodes}`);
    const c = new LocalNatsCluster({ ...opts, dir: resolve(opts.dir) });
    mkdirSync(c.opts.dir, { recursive: true, mode: 0o700 });
    const users = ensureNatsAuth(c.opts.dir, opts.auth, { route: true });
    c.operatorUser = users.operator;
    c.adminUser = users.admin;
    c.route = users.route!;
    c.writeState();
    if (opts.attachToParent !== false) {
      c.state.reaperPid = spawnReaper(process.pid, c.stateFile);
      c.writeState();
    }
    try {
      const nodes = await launchNatsCluster({
        binary: opts.binary,
        dir: c.opts.dir,
        nodes: opts.nodes,
        route: c.route,
        ...(opts.ports ? { ports: opts.ports } : {}),
        ...(opts.env ? { env: opts.env } : {}),
        ...(opts.routePort ? { routePort: opts.routePort } : {}),
        ...(opts.advertise ? { advertise: opts.advertise } : {}),
        onSpawn: (i, pgid) => {
          c.state.pgids[`nats-server-${i}`] = pgid;
          c.writeState();
        },
      });
      c.state.ports = nodes.map((n) => n.ports);
      c.versionSeen = nodes[0]?.version ?? "unknown";
      c.writeState();
    } catch (err) {
      c.stopReaper();
      throw err;
    }
    return c;
  }

  private get stateFile(): string {
    return join(this.opts.dir, "state.json");
  }

  private writeState(): void {
    writeFileSync(`${this.stateFile}.tmp`, `${JSON.stringify(this.state, null, 2)}\n`, { mode: 0o600 });
    renameSync(`${this.stateFile}.tmp`, this.stateFile);
  }

  private get ports(): NatsNodePorts[] {
    if (!this.state.ports) throw new Error("the cluster was never started");
    return this.state.ports;
  }

  get dir(): string {
    return this.opts.dir;
  }

  get version(): string {
    return this.versionSeen;
  }

  /** Every node's client URL, comma-separated, no credentials (the same across restarts). */
  get url(): string {
    return natsClusterUrl(this.ports);
  }

  /** The list with the operator's credentials in each URL. */
  get operatorUrl(): string {
    return urlWithCredentials(this.url, this.operatorUser);
  }

  /** The operator's user and the file holding its password (HOOKLINE_NATS_USER, HOOKLINE_NATS_PASSWORD_FILE). */
  get operator(): NatsUser & { passwordFile: string } {
    return { ...this.operatorUser, passwordFile: natsAuthPaths(this.opts.dir).operatorPassword };
  }

  /** The list with the admin's credentials (auth.admin), who may do anything in the account. */
  get adminUrl(): string {
    if (!this.adminUser) throw new Error("this cluster has no admin user (auth.admin)");
    return urlWithCredentials(this.url, this.adminUser);
  }

  /** One node's client URL with the admin's credentials: a client that stays on that node. */
  adminUrlOf(index: number): string {
    if (!this.adminUser) throw new Error("this cluster has no admin user (auth.admin)");
    return urlWithCredentials(natsUrl(this.node(index).ports.client), this.adminUser);
  }

  /** A publisher of `namespaces` (made when missing: every running node reloads its users) and its URL list with credentials. */
  async publisher(namespaces: readonly string[]): Promise<NatsPublisher & { url: string }> {
    const { publisher, added } = addNatsPublisher(this.opts.dir, this.opts.auth, namespaces);
    if (added) for (const n of this.nodes.filter((x) => x.running)) await reloadNatsServer(n.pgid!, this.opts.dir, n.ports.monitor);
    return { ...publisher, url: urlWithCredentials(this.url, publisher) };
  }

  /** Every node, in order. */
  get nodes(): LocalNatsNode[] {
    return this.ports.map((_, i) => this.node(i + 1));
  }

  node(index: number): LocalNatsNode {
    const ports = this.ports[index - 1];
    if (!ports) throw new Error(`no node ${index} (the cluster has ${this.ports.length})`);
    const pgid = this.state.pgids[`nats-server-${index}`];
    return { index, name: natsNodeName(index), ports, pgid, running: pgid !== undefined && isOurGroup(pgid, this.opts.dir) };
  }

  /** Why the nodes do not form a cluster now (natsClusterProblem), undefined when they do. */
  problem(): Promise<string | undefined> {
    return natsClusterProblem(this.ports);
  }

  /** Waits until every node is back in the cluster. */
  waitReady(timeoutMs = 60_000): Promise<void> {
    return waitForNatsCluster(this.ports, timeoutMs);
  }

  /** A crash of node `index`: SIGKILL, nothing flushed. Resolves once it is gone. */
  async kill(index: number): Promise<void> {
    const { pgid } = this.node(index);
    if (pgid === undefined || !isOurGroup(pgid, this.opts.dir)) return;
    signalGroup(pgid, "SIGKILL");
    for (const until = Date.now() + 5_000; groupMembers(pgid).length > 0; await delay(50)) {
      if (Date.now() > until) throw new Error(`nats-server node ${index} (process group ${pgid}) still alive after SIGKILL`);
    }
  }

  /** Graceful stop of node `index` (SIGTERM: it flushes its store and hands its leaderships over). */
  async stop(index: number): Promise<void> {
    const { pgid } = this.node(index);
    if (pgid !== undefined) await stopNatsGroup(pgid, this.opts.dir);
  }

  /** SIGSTOP (`paused: true`) or SIGCONT: the node stops answering without its connections closing. */
  pause(index: number, paused: boolean): void {
    const { pgid } = this.node(index);
    if (pgid === undefined || !isOurGroup(pgid, this.opts.dir)) throw new Error(`nats-server node ${index} is not running`);
    signalGroup(pgid, paused ? "SIGSTOP" : "SIGCONT");
  }

  /** Starts node `index` again on its ports and store (after kill() or stop(); stops it first otherwise); resolves once it answers /healthz. */
  async start(index: number): Promise<void> {
    if (this.node(index).running) await this.stop(index);
    await launchNatsNode({
      binary: this.opts.binary,
      dir: this.opts.dir,
      index,
      ports: this.ports,
      route: this.route,
      ...(this.opts.env ? { env: this.opts.env } : {}),
      ...(this.opts.routePort ? { routePort: this.opts.routePort } : {}),
      ...(this.opts.advertise ? { advertise: this.opts.advertise } : {}),
      onSpawn: (pgid) => {
        this.state.pgids[`nats-server-${index}`] = pgid;
        this.writeState();
      },
    });
  }

  /** Stops every node and the reaper for good. */
  async close(): Promise<void> {
    try {
      for (const n of this.nodes) {
        if (n.pgid !== undefined && isOurGroup(n.pgid, this.opts.dir)) signalGroup(n.pgid, "SIGCONT");
        await this.stop(n.index);
      }
    } finally {
      this.stopReaper();
    }
  }

  private stopReaper(): void {
    stopReaper(this.state.reaperPid, this.opts.dir);
    this.state.reaperPid = undefined;
  }
}

/** The nodes of the local NATS whose stores DIR holds: 1 for DIR/nats, N for DIR/nats-1..N; undefined when none. */
export function storedNatsNodes(dir: string): number | undefined {
  let n = 0;
  while (existsSync(join(natsNodePaths(dir, n + 1).storeDir, "jetstream"))) n++;
  if (n > 0) return n;
  return existsSync(join(resolve(dir), "nats", "jetstream")) ? 1 : undefined;
}

/**
 * A JetStream store in DIR that a local NATS of `nodes` nodes would not use: the single server's
 * (DIR/nats) under a cluster, or a cluster's of another size (DIR/nats-<i>). Its events would
 * not be delivered, so the caller refuses; undefined when there is none.
 */
export function otherLayoutStore(dir: string, nodes: number): string | undefined {
  const single = join(resolve(dir), "nats", "jetstream");
  if (nodes > 1 && existsSync(single)) return single;
  const first = join(natsNodePaths(dir, 1).storeDir, "jetstream");
  if (!existsSync(first)) return undefined;
  let n = 0;
  while (existsSync(join(natsNodePaths(dir, n + 1).storeDir, "jetstream"))) n++;
  return n === nodes ? undefined : first;
}
