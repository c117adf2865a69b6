// The faults of the stream soak on a three-node JetStream cluster (`--nats-nodes 3`): the stream
// leader's node killed (SIGKILL) and started again, a follower stopped (SIGSTOP) for 10 s, a
// rolling restart (each node in turn, the next only once the stream is current on every replica
// again), and one node cut off from the others (route-proxy.ts). Where the stream's replicas are
// is read from the nodes' monitoring port (/jsz), which answers whatever the clients' connections
// are doing; the leader's own view says which followers are current.
import { httpGet } from "../../src/cluster/nats.js";
import { natsNodeIndex, type LocalNatsCluster } from "../../src/cluster/nats-cluster.js";
import { NATS_ACCOUNT } from "../../src/cluster/nats-auth.js";
import { STREAM_NAME } from "../../src/jetstream/jetstream.js";
import { namespaceStreamName } from "../../src/jetstream/layout.js";

/**
 * The stream whose replicas the faults aim at and wait for: the first soak namespace's (each
 * namespace has its own stream, and their leaders may sit on different nodes; a fault at one
 * leader is a follower fault for the other).
 */
export const FAULT_STREAM = namespaceStreamName(STREAM_NAME, "soak-sa");
import { sleep } from "../../bench/lib/util.js";
import type { RouteProxies } from "./route-proxy.js";
import type { Rng } from "./rng.js";

export interface StreamReplicas {
  /** The leader's server name. */
  leader: string;
  /** The last sequence the leader stored. */
  lastSeq: number;
  /** The other replicas, as the leader sees them. */
  followers: Array<{ name: string; current: boolean; offline: boolean; lag: number }>;
}

interface StreamDetail {
  name: string;
  state?: { last_seq?: number };
  cluster?: { leader?: string; replicas?: Array<{ name: string; current?: boolean; offline?: boolean; lag?: number }> };
}

async function streamDetail(monitorPort: number, stream: string): Promise<StreamDetail | undefined> {
  try {
    const r = await httpGet(`http://127.0.0.1:${monitorPort}/jsz?acc=${NATS_ACCOUNT}&streams=true`, 1_500);
    if (r.status !== 200) return undefined;
    const jsz = JSON.parse(r.body) as { account_details?: Array<{ name: string; stream_detail?: StreamDetail[] }> };
    return jsz.account_details?.find((a) => a.name === NATS_ACCOUNT)?.stream_detail?.find((s) => s.name === stream);
  } catch {
    return undefined; // down, or stopped (SIGSTOP): no answer
  }
}

/** The stream's leader and its followers as the leader sees them; undefined while no node names a leader that answers. */
export async function streamReplicas(cluster: LocalNatsCluster, stream = FAULT_STREAM): Promise<StreamReplicas | undefined> {
  const running = cluster.nodes.filter((n) => n.running);
  const named = (await Promise.all(running.map((n) => streamDetail(n.ports.monitor, stream)))).map((d) => d?.cluster?.leader).filter((l): l is string => !!l);
  // The leader most nodes name first: a node cut off may still name itself.
  const votes = new Map<string, number>();
  for (const l of named) votes.set(l, (votes.get(l) ?? 0) + 1);
  for (const leader of [...votes.keys()].sort((x, y) => votes.get(y)! - votes.get(x)!)) {
    const index = natsNodeIndex(leader);
    if (index === undefined) continue;
    const own = await streamDetail(cluster.node(index).ports.monitor, stream);
    if (own?.cluster?.leader !== leader) continue;
    return { leader, lastSeq: own.state?.last_seq ?? 0, followers: (own.cluster.replicas ?? []).map((r) => ({ name: r.name, current: r.current === true, offline: r.offline === true, lag: r.lag ?? 0 })) };
  }
  return undefined;
}

/** Whether every replica of the stream is current: a leader, and every other node a current, online follower. */
export const allCurrent = (r: StreamReplicas | undefined, nodes: number): boolean => r !== undefined && r.followers.length === nodes - 1 && r.followers.every((f) => f.current && !f.offline);

/** The last sequence node `index` stored of the stream, as it says itself (undefined: no answer, or it has no copy yet). */
async function lastSeqOf(cluster: LocalNatsCluster, index: number, stream = FAULT_STREAM): Promise<number | undefined> {
  return (await streamDetail(cluster.node(index).ports.monitor, stream))?.state?.last_seq;
}

/**
 * Waits until the stream is current on every replica: the leader sees every follower current,
 * and node `caughtUp` (one that was down, stopped or cut off: the leader's view of it may be
 * stale) holds at least what the leader held when the wait began. The time it took, or
 * undefined after `timeoutMs`.
 */
export async function waitAllCurrent(cluster: LocalNatsCluster, timeoutMs: number, caughtUp?: number): Promise<number | undefined> {
  const t0 = Date.now();
  let mark: number | undefined;
  for (; Date.now() - t0 < timeoutMs; await sleep(250)) {
    const r = await streamReplicas(cluster);
    mark ??= r?.lastSeq;
    if (!allCurrent(r, cluster.nodes.length)) continue;
    if (caughtUp === undefined || r!.leader === cluster.node(caughtUp).name) return Date.now() - t0;
    const seq = await lastSeqOf(cluster, caughtUp);
    if (seq !== undefined && mark !== undefined && seq >= mark) return Date.now() - t0;
  }
  return undefined;
}

async function leaderIndex(cluster: LocalNatsCluster, timeoutMs = 20_000): Promise<{ index: number; replicas: StreamReplicas } | undefined> {
  for (const until = Date.now() + timeoutMs; Date.now() < until; await sleep(250)) {
    const r = await streamReplicas(cluster);
    const index = r && natsNodeIndex(r.leader);
    if (r && index !== undefined) return { index, replicas: r };
  }
  return undefined;
}

export interface NatsFaultResult {
  /** The node(s) it hit, e.g. "hookline-local-2 (stream leader)". */
  target: string;
  /** What was seen, for the report: the leader after it, how long catching up took. */
  detail: string;
}

/** The stream leader's node SIGKILLed; started again on its store once another node leads (at least `downMs` later, at most 30 s). */
export async function leaderSigkill(cluster: LocalNatsCluster, downMs: number, say: (l: string) => void): Promise<NatsFaultResult> {
  const found = await leaderIndex(cluster);
  if (!found) return { target: "none", detail: "skipped: no stream leader within 20 s" };
  const name = cluster.node(found.index).name;
  say(`fault: SIGKILL of ${name}, the stream leader; started again once another node leads, after ${downMs} ms at least`);
  await cluster.kill(found.index);
  const t0 = Date.now();
  let next: string | undefined;
  for (; Date.now() - t0 < Math.max(downMs, next ? 0 : 30_000); await sleep(250)) {
    const r = await streamReplicas(cluster);
    if (r && r.leader !== name) next ??= `${r.leader} after ${((Date.now() - t0) / 1000).toFixed(1)} s`;
  }
  await cluster.start(found.index);
  const caughtUp = await waitAllCurrent(cluster, 60_000, found.index);
  return { target: `${name} (stream leader)`, detail: `new leader ${next ?? "not elected within 30 s"}; ${caughtUp === undefined ? "not current within 60 s of its start" : `current ${(caughtUp / 1000).toFixed(1)} s after its start`}` };
}

/** A follower of the stream stopped (SIGSTOP) for `pausedMs`, then continued (SIGCONT). */
export async function followerSigstop(cluster: LocalNatsCluster, rng: Rng, pausedMs: number, say: (l: string) => void): Promise<NatsFaultResult> {
  const found = await leaderIndex(cluster);
  const followers = found?.replicas.followers.map((f) => natsNodeIndex(f.name)).filter((i): i is number => i !== undefined) ?? [];
  if (!followers.length) return { target: "none", detail: "skipped: no stream follower within 20 s" };
  const index = rng.pick(followers);
  const name = cluster.node(index).name;
  say(`fault: SIGSTOP of ${name}, a stream follower, for ${pausedMs} ms`);
  cluster.pause(index, true);
  try {
    await sleep(pausedMs);
  } finally {
    cluster.pause(index, false);
  }
  const caughtUp = await waitAllCurrent(cluster, 30_000, index);
  return { target: `${name} (follower)`, detail: caughtUp === undefined ? "not current again within 30 s of SIGCONT" : `current again ${(caughtUp / 1000).toFixed(1)} s after SIGCONT` };
}

/** Every node in turn: SIGTERM, started again, and the next only once the stream is current on every replica. */
export async function rollingRestart(cluster: LocalNatsCluster, say: (l: string) => void): Promise<NatsFaultResult> {
  const steps: string[] = [];
  for (const n of cluster.nodes) {
    say(`fault: rolling restart, ${n.name}`);
    const t0 = Date.now();
    await cluster.stop(n.index);
    await cluster.start(n.index);
    const current = await waitAllCurrent(cluster, 60_000, n.index);
    steps.push(`${n.name} ${current === undefined ? "not current within 60 s" : `${((Date.now() - t0) / 1000).toFixed(1)} s`}`);
  }
  return { target: cluster.nodes.map((n) => n.name).join(", "), detail: steps.join("; ") };
}

/** One node cut off from the others (its routes frozen) for `cutMs`; the detail says whether the cluster saw it go. */
export async function partition(cluster: LocalNatsCluster, proxies: RouteProxies, rng: Rng, cutMs: number, say: (l: string) => void): Promise<NatsFaultResult> {
  const leader = (await leaderIndex(cluster, 5_000))?.index;
  // The stream leader half the time (a leader change while the old one still thinks it leads), a follower otherwise.
  const followers = cluster.nodes.map((n) => n.index).filter((i) => i !== leader);
  const index = leader !== undefined && rng.chance(0.5) ? leader : rng.pick(followers);
  const name = cluster.node(index).name;
  const role = index === leader ? "stream leader" : "follower";
  say(`fault: partition of ${name} (${role}) from the other nodes for ${cutMs} ms (${proxies.linksOf(index)} route connections frozen)`);
  proxies.isolate(index);
  const t0 = Date.now();
  let seen: string | undefined;
  let newLeader: string | undefined;
  try {
    for (; Date.now() - t0 < cutMs; await sleep(250)) {
      seen ??= (await cluster.problem()) !== undefined ? `${((Date.now() - t0) / 1000).toFixed(1)} s` : undefined;
      const r = index === leader ? await streamReplicas(cluster) : undefined;
      if (r && r.leader !== name) newLeader ??= r.leader;
    }
  } finally {
    proxies.heal(index);
  }
  const caughtUp = await waitAllCurrent(cluster, 60_000, index);
  return {
    target: `${name} (${role})`,
    detail: [`the cluster saw it cut off ${seen ? `after ${seen}` : "never (the cut did not take)"}`, ...(index === leader ? [`leader moved to ${newLeader ?? "(not seen)"}`] : []), caughtUp === undefined ? "not current within 60 s of the heal" : `current ${(caughtUp / 1000).toFixed(1)} s after the heal`].join("; "),
  };
}
