// `npm run bench -- --mode stream` (issue 16): stream mode measured beside CR mode and the HTTP
// ceiling of the same run (run.ts measures those two first and passes them in). Phases, on a
// private nats-server with JetStream (hack/build-nats.sh) and the same receiver process:
//   1. max rate: `count` events published as fast as JetStream acknowledges them (`concurrency`
//      publishes in flight, from this process), one per subscription in turn (each subscription
//      filters its own event type, so one event = one delivery, as in CR mode's phase), to one
//      operator replica: deliveries/s from the first publish to the last arrival, operator CPU
//      (/proc/<pid>/stat) per 1,000;
//   1b. a stored backlog: the subscriptions paused, `count` events published and stored, then
//      resumed: the same replica's rate from the first arrival to the last, with no publisher
//      beside it on the machine (while events are published, this process and nats-server take
//      part of the two cores; the HTTP ceiling is measured with no publisher either), CPU per 1,000
//      of the operator, nats-server, the receiver and the whole machine (/proc/stat), and the
//      rate the machine's cores would allow at that cost (bench/lib/stream-goals.ts machineCpu);
//   2. half rate: events paced at half the max rate; publish (sent) → receiver percentiles;
//   3. two replicas: a second operator process joins, the same load again; each replica's share
//      (its webhook_delivery_attempts_total{status="success"}), duplicates at the receiver, CPU of
//      both per 1,000;
//   4. ordered: the same subscriptions with spec.ordering (each event its own key value) in a
//      namespace of their own, one replica: deliveries/s beside CR mode (docs/adr/0014).
// Correctness (every event arrives, exactly once, at a receiver that always answers 200) goes
// through `check`; speed is reported against the issue's goals, never asserted.
import { mkdirSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { ensureNatsServer } from "../src/cluster/build.js";
import { LocalNatsServer } from "../src/cluster/nats.js";
import { LocalNatsCluster, streamReplicasFor } from "../src/cluster/nats-cluster.js";
import { OPERATOR_INBOX_PREFIX, STREAM_AUTH_POLICY } from "../src/jetstream/permissions.js";
import { publishToStream } from "../src/publish/stream.js";
import { listConsumers } from "../src/jetstream/consumers.js";
import { STREAM_NAME, StreamConnection } from "../src/jetstream/jetstream.js";
import { namespaceStreamName } from "../src/jetstream/layout.js";
import type { OperatorProcess } from "./lib/procs.js";
import { payload } from "./lib/objects.js";
import { duplicateIds, machineCpu, ratePerSecond, shares, streamGoals, type MachineCpu, type MachineCpuSample, type StreamMeasured } from "./lib/stream-goals.js";
import { loadAverage, machineBusySeconds, monotonicUs, now, percentiles, pidsOf, pool, procCpuSeconds, procSyscalls, round, sample, sleep, type Percentiles } from "./lib/util.js";

export interface StreamBenchContext {
  quick: boolean;
  /** nats-server nodes: 1, or 3 for a JetStream cluster with every stream at R3. */
  natsNodes?: number;
  tmp: string;
  /** Events per max-rate phase. */
  count: number;
  subscriptions: number;
  concurrency: number;
  payloadBytes: number;
  pacedSeconds: number;
  receiverUrl: (path: string) => string;
  arrivals: (prefix: string) => Promise<Map<string, { at: number; count: number }>>;
  arrivalCount: (prefix: string) => Promise<number>;
  /** The receiver process, for its CPU. */
  receiverPid: number | undefined;
  /** The receiver's event-loop delay since the previous call. */
  receiverStats: () => Promise<{ eventLoopDelayMs: { p99: number; max: number } }>;
  /** Namespace, Secret and subscriptions (run.ts setupNamespace). */
  setup: (ns: string, subs: Array<{ name: string; spec: Record<string, unknown> & { url: string } }>) => Promise<void>;
  /** Until the subscriptions are Ready (an operator must run). */
  ready: (ns: string, names: string[]) => Promise<void>;
  /** Sets spec.paused on the subscriptions; resolves once the operator has reconciled it. */
  setPaused: (ns: string, names: string[], paused: boolean) => Promise<void>;
  startOperator: (name: string, env: Record<string, string>) => Promise<OperatorProcess>;
  stopOperator: (op: OperatorProcess) => Promise<void>;
  /** Kept for nats-server's cleanup. */
  onCleanup: (what: string, run: () => Promise<void> | void) => void;
  say: (line: string) => void;
  check: (ok: boolean, message: string) => void;
  /** Measured earlier in the same run. */
  crDeliveriesPerSecond: number;
  httpCeilingPerSecond: number;
}

interface Batch {
  count: number;
  firstSentAt: number;
  lastArrivalAt: number;
  deliveriesPerSecond: number;
  publishPerSecond: number;
  publishAckMs: Percentiles;
  publishToReceiverMs: Percentiles;
  received: number;
  /** Arrivals 50 ms or more after their publish, and the span of their publish times. */
  slow: { count: number; sentOverMs: number };
  duplicates: number;
  publishErrors: number;
}

const NS = "bench-stream";
const typeOf = (i: number) => `bench.s${i}`;

export async function streamBench(ctx: StreamBenchContext): Promise<Record<string, unknown>> {
  const { say, check } = ctx;
  const natsDir = join(ctx.tmp, "nats");
  mkdirSync(natsDir, { recursive: true });
  const { binary } = await ensureNatsServer({ env: process.env });
  const nodes = ctx.natsNodes ?? 1;
  const replicas = streamReplicasFor(nodes);
  const nats = nodes > 1 ? await LocalNatsCluster.start({ dir: natsDir, binary, nodes, auth: STREAM_AUTH_POLICY }) : await LocalNatsServer.start({ dir: natsDir, binary, auth: STREAM_AUTH_POLICY });
  ctx.onCleanup("nats-server", () => nats.close());
  say(`stream: nats-server ${nats.version} at ${nats.url}${nodes > 1 ? ` (${nodes} nodes, streams at R${replicas})` : ""}`);
  const conn = await StreamConnection.connect({ url: nats.operatorUrl, source: "bench", name: "hookline bench", inboxPrefix: OPERATOR_INBOX_PREFIX, stream: { replicas } });
  ctx.onCleanup("stream connection", () => conn.close());
  const jsm = await conn.jetstreamManager();

  const subs = Array.from({ length: ctx.subscriptions }, (_, i) => ({ name: `sub-${i}`, spec: { url: ctx.receiverUrl(`/ok/${NS}/sub-${i}`), eventTypes: [typeOf(i)] } }));
  await ctx.setup(NS, subs);
  const env = { HOOKLINE_NATS_URL: nats.operatorUrl, HOOKLINE_STREAM_REPLICAS: String(replicas), WATCH_NAMESPACES: NS, LEADER_ELECTION_LEASE_NAME: "bench-stream" };
  const a = await ctx.startOperator("stream-a", env);
  await a.ready();
  await ctx.ready(NS, subs.map((s) => s.name));
  await consumersReady(ctx, jsm, subs.map((s) => s.name), [a]);
  say(`stream: operator stream-a reading ${subs.length} consumers`);

  const publish = async (id: string, i: number): Promise<void> => {
    await publishToStream(conn, { namespace: NS, type: typeOf(i % ctx.subscriptions), id, data: payload(i, now(), ctx.payloadBytes) });
  };
  const drained = () => waitDrained(jsm, subs.length, 60_000 + ctx.count * 20);

  // Warm-up (connections, JIT): not counted.
  await batch(ctx, "sw", Math.min(500, Math.ceil(ctx.count / 10)), undefined, publish);
  await drained();

  const cpu0 = procCpuSeconds(a.pid);
  say(`stream: max rate, ${ctx.count} events, ${ctx.concurrency * 2} publishes in flight, one replica (load ${loadAverage().join(" ")})`);
  const max = await batch(ctx, "s1", ctx.count, undefined, publish);
  const cpu1 = procCpuSeconds(a.pid);
  say(`stream: ${round(max.deliveriesPerSecond, 0)} deliveries/s (published at ${round(max.publishPerSecond, 0)}/s); publish → receiver p50 ${max.publishToReceiverMs.p50} ms p99 ${max.publishToReceiverMs.p99} ms`);
  await drained();
  const loadMax = loadAverage();

  const backlog = await backlogPhase(ctx, a, subs.map((s) => s.name), publish, pidsOf("nats-server", [natsDir]));
  await drained();

  const halfRate = Math.max(1, max.deliveriesPerSecond / 2);
  const pacedCount = Math.max(20, Math.round(halfRate * ctx.pacedSeconds));
  say(`stream: half rate, ${pacedCount} events at ${round(halfRate, 0)}/s for ${ctx.pacedSeconds} s`);
  await sleep(1_000);
  await a.metrics(); // the event-loop delay histogram restarts at each scrape
  await ctx.receiverStats();
  const paced = await batch(ctx, "sp", pacedCount, halfRate, publish);
  const receiverEventLoopMs = (await ctx.receiverStats()).eventLoopDelayMs;
  const lagMetrics = await a.metrics();
  const operatorEventLoopMs = { p99: round(sample(lagMetrics, "hookline_nodejs_eventloop_lag_p99_seconds") * 1000, 1), max: round(sample(lagMetrics, "hookline_nodejs_eventloop_lag_max_seconds") * 1000, 1) };
  say(`stream: half rate publish → receiver p50 ${paced.publishToReceiverMs.p50} ms p95 ${paced.publishToReceiverMs.p95} ms p99 ${paced.publishToReceiverMs.p99} ms; operator event-loop delay p99 ${operatorEventLoopMs.p99} ms, max ${operatorEventLoopMs.max} ms; receiver's max ${round(receiverEventLoopMs.max, 1)} ms; ${paced.slow.count} arrived 50 ms or more after their publish, sent over ${paced.slow.sentOverMs} ms`);
  await drained();
  const loadPaced = loadAverage();

  const b = await ctx.startOperator("stream-b", env);
  // Not the leader (ready() waits for leadership): reading every consumer is what counts here.
  await consumersReady(ctx, jsm, subs.map((s) => s.name), [b]);
  // Its warm-up too (connections, JIT), not counted: a cold replica is slower and would take less.
  // Replica a has delivered every earlier phase (60,000 events and more), so b's warm-up is ten
  // times a's first one: with 500 (about 250 each) b's share was 0.385-0.526, 0.455 on average,
  // in twenty saved runs.
  await batch(ctx, "sw2", Math.min(5_000, Math.ceil(ctx.count / 4)), undefined, publish);
  await drained();
  const success = async (op: OperatorProcess) => sample(await op.metrics(), "webhook_delivery_attempts_total", { namespace: NS, status: "success" });
  const before = await Promise.all([a, b].map(success));
  const cpuBefore = [a, b].map((op) => procCpuSeconds(op.pid));
  say(`stream: two replicas, ${ctx.count} events at max rate`);
  const two = await batch(ctx, "s2", ctx.count, undefined, publish);
  await drained();
  const cpuAfter = [a, b].map((op) => procCpuSeconds(op.pid));
  const after = await Promise.all([a, b].map(success));
  const perReplica = after.map((x, i) => x - before[i]!);
  const share = shares(perReplica);
  const twoCpu = cpuAfter.reduce((s, x, i) => s + x - cpuBefore[i]!, 0);
  check(perReplica[0]! + perReplica[1]! === ctx.count, `stream two replicas: the replicas counted ${perReplica.join(" + ")} successful attempts, expected ${ctx.count} in all`);
  say(`stream: two replicas ${round(two.deliveriesPerSecond, 0)} deliveries/s; shares ${share.map((s) => `${round(s * 100, 1)}%`).join(" / ")}; duplicates ${two.duplicates}`);
  const loadTwo = loadAverage();
  for (const op of [b, a]) await ctx.stopOperator(op);

  // 4. Ordered: the same subscriptions with spec.ordering, in a namespace of their own, one replica.
  const ordered = await orderedPhase(ctx, jsm, conn, env);

  const measured: StreamMeasured = {
    crDeliveriesPerSecond: ctx.crDeliveriesPerSecond,
    httpCeilingPerSecond: ctx.httpCeilingPerSecond,
    streamDeliveriesPerSecond: round(max.deliveriesPerSecond, 1),
    halfRateP99Ms: paced.publishToReceiverMs.p99,
    cpuSecondsPer1000: round(((cpu1 - cpu0) / ctx.count) * 1000, 3),
    backlog: { deliveriesPerSecond: backlog.deliveriesPerSecond, cpuSecondsPer1000: backlog.cpuSecondsPer1000 },
    twoReplicas: { deliveriesPerSecond: round(two.deliveriesPerSecond, 1), cpuSecondsPer1000: round((twoCpu / ctx.count) * 1000, 3), shares: share, duplicates: two.duplicates },
  };
  return {
    nats: { version: nats.version, nodes, replicas },
    namespace: NS,
    events: ctx.count,
    maxRate: { ...max, loadAverage: loadMax },
    backlog,
    halfRate: { targetRate: round(halfRate, 1), ...paced, operatorEventLoopMs, receiverEventLoopMs, loadAverage: loadPaced },
    twoReplicas: { ...two, perReplica, shares: share, cpuSeconds: round(twoCpu, 3), loadAverage: loadTwo },
    ordered,
    measured,
    goals: streamGoals(measured),
  };
}

/**
 * spec.ordering (docs/adr/0014): each event becomes a WebhookDelivery, one at a time per
 * subscription, and CR mode's lanes deliver it. The key is the event's own `seq`, so every event
 * is a lane of its own: what is measured is the cost of the mechanism, not of waiting in a lane.
 * Deliveries/s from the first publish to the last arrival, beside CR mode and unordered stream
 * mode of the same run.
 */
async function orderedPhase(ctx: StreamBenchContext, jsm: Jsm, conn: StreamConnection, env: Record<string, string>): Promise<Record<string, unknown>> {
  const ns = `${NS}-ordered`;
  const subs = Array.from({ length: ctx.subscriptions }, (_, i) => ({ name: `sub-${i}`, spec: { url: ctx.receiverUrl(`/ok/${ns}/sub-${i}`), eventTypes: [typeOf(i)], ordering: { key: "$.seq" } } }));
  await ctx.setup(ns, subs);
  // The same installation (its lease names it) as the replicas before, now stopped.
  const op = await ctx.startOperator("stream-ordered", { ...env, WATCH_NAMESPACES: ns });
  await op.ready();
  await ctx.ready(ns, subs.map((s) => s.name));
  await consumersReady(ctx, jsm, subs.map((s) => s.name), [op], ns);
  const publish = async (id: string, i: number): Promise<void> => {
    await publishToStream(conn, { namespace: ns, type: typeOf(i % ctx.subscriptions), id, data: payload(i, now(), ctx.payloadBytes) });
  };
  const count = ctx.quick ? 200 : Math.min(ctx.count, 3_000);
  await batch(ctx, "ow", Math.ceil(count / 10), undefined, publish);
  await waitDrained(jsm, subs.length, 60_000 + count * 20, ns);
  const cpu0 = procCpuSeconds(op.pid);
  ctx.say(`stream: ordered, ${count} events (each its own key value), one replica`);
  const r = await batch(ctx, "so", count, undefined, publish);
  const cpu = procCpuSeconds(op.pid) - cpu0;
  await waitDrained(jsm, subs.length, 60_000 + count * 20, ns);
  await ctx.stopOperator(op);
  const out = {
    ...r,
    cpuSecondsPer1000: round((cpu / count) * 1000, 3),
    ofCrMode: round(r.deliveriesPerSecond / ctx.crDeliveriesPerSecond, 3),
    loadAverage: loadAverage(),
  };
  ctx.say(`stream: ordered ${round(r.deliveriesPerSecond, 0)} deliveries/s (x${out.ofCrMode} CR mode); operator CPU ${out.cpuSecondsPer1000} s per 1,000; publish → receiver p50 ${r.publishToReceiverMs.p50} ms p99 ${r.publishToReceiverMs.p99} ms`);
  return out;
}

/**
 * One replica draining a stored backlog: the subscriptions paused (reconciled by the operator),
 * `count` events published and acknowledged by JetStream, then resumed. Deliveries/s from the
 * first arrival to the last: the replica's own rate, with nothing published meanwhile. Messages
 * a pull already waiting took while the subscriptions were paused are handed back at once
 * (nothing is delivered while paused: checked).
 */
async function backlogPhase(ctx: StreamBenchContext, op: OperatorProcess, names: string[], publish: (id: string, i: number) => Promise<void>, natsPids: number[]): Promise<{ count: number; deliveriesPerSecond: number; cpuSecondsPer1000: number; machine: MachineCpu; resumeToFirstArrivalMs: number; publishPerSecond: number; duplicates: number; loadAverage: number[]; monotonicUs: { from: number; to: number } }> {
  const prefix = "sb";
  await ctx.setPaused(NS, names, true);
  ctx.say(`stream: stored backlog, ${ctx.count} events published to the paused subscriptions, then resumed, one replica`);
  const t0 = now();
  let errors = 0;
  await pool(ctx.count, ctx.concurrency * 2, async (i) => {
    try {
      await publish(`${prefix}-${i}`, i);
    } catch (err) {
      if (++errors <= 3) ctx.say(`stream: publish of ${prefix}-${i} failed: ${(err as Error).message}`);
    }
  });
  const publishPerSecond = round(ctx.count / ((now() - t0) / 1000), 1);
  ctx.check(errors === 0, `stream ${prefix}: ${errors} of ${ctx.count} publishes failed`);
  ctx.check((await ctx.arrivalCount(`${prefix}-`)) === 0, `stream ${prefix}: events arrived while their subscriptions were paused`);
  const cpu0 = procCpuSeconds(op.pid);
  const machine0 = machineCpuNow(op.pid, natsPids, ctx.receiverPid);
  const resumedAt = now();
  // The same clock V8 stamps a CPU profile's samples with (CLOCK_MONOTONIC, microseconds), so the
  // operator's profile can be cut to this phase (run.ts, profile-summary.ts).
  const fromUs = monotonicUs();
  await ctx.setPaused(NS, names, false);
  for (const deadline = Date.now() + 60_000 + ctx.count * 20; (await ctx.arrivalCount(`${prefix}-`)) < ctx.count && Date.now() < deadline; ) await sleep(100);
  const cpu = procCpuSeconds(op.pid) - cpu0;
  const machine1 = machineCpuNow(op.pid, natsPids, ctx.receiverPid);
  const toUs = monotonicUs();
  await sleep(500);
  const arrivals = await ctx.arrivals(`${prefix}-`);
  ctx.check(arrivals.size === ctx.count, `stream ${prefix}: the receiver got ${arrivals.size} distinct webhook ids, expected ${ctx.count}`);
  const dups = duplicateIds(arrivals);
  ctx.check(dups.length === 0, `stream ${prefix}: ${dups.length} webhook ids arrived more than once`);
  let first = Infinity;
  let last = 0;
  for (const a of arrivals.values()) {
    first = Math.min(first, a.at);
    last = Math.max(last, a.at);
  }
  const out = {
    count: ctx.count,
    deliveriesPerSecond: round(ratePerSecond(arrivals.size - 1, first, last), 1),
    cpuSecondsPer1000: round((cpu / ctx.count) * 1000, 3),
    machine: machineCpu(machine0, machine1, ctx.count, ctx.httpCeilingPerSecond, availableParallelism()),
    resumeToFirstArrivalMs: round(first - resumedAt, 1),
    publishPerSecond,
    duplicates: dups.length,
    loadAverage: loadAverage(),
    monotonicUs: { from: fromUs, to: toUs },
  };
  ctx.say(`stream: stored backlog drained at ${round(out.deliveriesPerSecond, 0)} deliveries/s (${round(out.deliveriesPerSecond / ctx.httpCeilingPerSecond, 3)} of the HTTP ceiling); operator CPU ${out.cpuSecondsPer1000} s per 1,000; first arrival ${out.resumeToFirstArrivalMs} ms after the resume was sent`);
  const m = out.machine;
  ctx.say(`stream: stored backlog, CPU-s per 1,000 deliveries: operator ${m.operator}, nats-server ${m.natsServer}, receiver ${m.receiver}, the rest ${m.rest}, the whole machine ${m.machine}; the operator's read / write system calls per delivery ${m.operatorReadsPerDelivery} / ${m.operatorWritesPerDelivery}; at that cost its ${m.cores} cores drain at most ${m.atMostPerSecond}/s (${m.atMostOfCeiling} of the HTTP ceiling); half the ceiling needs at most ${m.halfCeilingNeedsPer1000} machine CPU-s per 1,000, which leaves the operator ${m.operatorRoomPer1000}`);
  return out;
}

function machineCpuNow(operatorPid: number, natsPids: number[], receiverPid: number | undefined): MachineCpuSample {
  const calls = procSyscalls(operatorPid);
  return {
    machine: machineBusySeconds(),
    operator: procCpuSeconds(operatorPid),
    natsServer: natsPids.reduce((sum, pid) => sum + procCpuSeconds(pid), 0),
    receiver: procCpuSeconds(receiverPid),
    operatorReads: calls.reads,
    operatorWrites: calls.writes,
  };
}

type Jsm = Awaited<ReturnType<StreamConnection["jetstreamManager"]>>;

/** Every consumer made by the leader, and each of `ops` reading it. */
async function consumersReady(ctx: StreamBenchContext, jsm: Jsm, names: string[], ops: OperatorProcess[], ns = NS): Promise<void> {
  for (const deadline = Date.now() + 60_000; ; await sleep(200)) {
    const have = new Set((await listConsumers(jsm, namespaceStreamName(STREAM_NAME, ns)).catch(() => [])).filter((c) => c.namespace === ns).map((c) => c.name));
    if (names.every((n) => have.has(n))) break;
    if (Date.now() > deadline) throw new Error(`stream: consumers of ${names.filter((n) => !have.has(n)).join(", ")} not made within 60 s`);
  }
  for (const op of ops) for (const n of names) await op.waitForLog((l) => l.msg === "stream consumer started" && l.subscription === `${ns}/${n}`, 60_000, `${op.opts.name} reading ${n}`);
}

/** Until every consumer of the namespace holds nothing (none pending, none out). */
async function waitDrained(jsm: Jsm, expected: number, timeoutMs: number, ns = NS): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; ; await sleep(100)) {
    const cs = (await listConsumers(jsm, namespaceStreamName(STREAM_NAME, ns)).catch(() => [])).filter((c) => c.namespace === ns);
    if (cs.length === expected && cs.every((c) => c.pending === 0 && c.ackPending === 0)) return;
    if (Date.now() > deadline) throw new Error(`stream: consumers not drained within ${timeoutMs / 1000} s: ${JSON.stringify(cs.map((c) => [c.name, c.pending, c.ackPending]))}`);
  }
}

/** Publishes `count` events (as fast as acknowledged, or paced at `rate`/s) and waits for every arrival. */
async function batch(ctx: StreamBenchContext, prefix: string, count: number, rate: number | undefined, publish: (id: string, i: number) => Promise<void>): Promise<Batch> {
  const ids = Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
  const sentAt = new Array<number>(count);
  const ackMs: number[] = [];
  let errors = 0;
  const send = async (i: number) => {
    const t = now();
    sentAt[i] = t;
    try {
      await publish(ids[i]!, i);
      ackMs.push(now() - t);
    } catch (err) {
      errors++;
      if (errors <= 3) ctx.say(`stream: publish of ${ids[i]} failed: ${(err as Error).message}`);
    }
  };
  const t0 = now();
  if (rate === undefined) await pool(count, ctx.concurrency * 2, send);
  else {
    const inFlight: Array<Promise<void>> = [];
    for (let i = 0; i < count; i++) {
      const due = t0 + (i * 1000) / rate;
      const wait = due - now();
      if (wait > 1) await sleep(wait);
      inFlight.push(send(i));
    }
    await Promise.all(inFlight);
  }
  const published = now() - t0;
  ctx.check(errors === 0, `stream ${prefix}: ${errors} of ${count} publishes failed`);
  // Polled by count: copying thousands of arrivals out of the receiver would hold up (and so
  // delay the recorded arrival of) the requests still coming in.
  for (const deadline = Date.now() + 60_000 + count * 20; (await ctx.arrivalCount(`${prefix}-`)) < count - errors && Date.now() < deadline; ) await sleep(200);
  let arrivals = await ctx.arrivals(`${prefix}-`);
  ctx.check(arrivals.size === count, `stream ${prefix}: the receiver got ${arrivals.size} distinct webhook ids, expected ${count}`);
  // Let late duplicates (a redelivery) show before counting them.
  await sleep(500);
  arrivals = await ctx.arrivals(`${prefix}-`);
  const dups = duplicateIds(arrivals);
  ctx.check(dups.length === 0, `stream ${prefix}: ${dups.length} webhook ids arrived more than once (e.g. ${dups.slice(0, 3).join(", ")}) at a receiver that always answers 200`);
  const lat: number[] = [];
  let last = 0;
  // The slow ones (50 ms or more): how many, and over how long they were sent (one stall puts
  // them all in a short window; a saturated machine spreads them).
  const slowSent: number[] = [];
  ids.forEach((id, i) => {
    const a = arrivals.get(id);
    if (!a) return;
    lat.push(a.at - sentAt[i]!);
    if (a.at - sentAt[i]! >= 50) slowSent.push(sentAt[i]!);
    if (a.at > last) last = a.at;
  });
  const first = Math.min(...sentAt);
  return {
    count,
    firstSentAt: round(first, 1),
    lastArrivalAt: round(last, 1),
    deliveriesPerSecond: ratePerSecond(arrivals.size, first, last),
    publishPerSecond: round(count / (published / 1000), 1),
    publishAckMs: percentiles(ackMs),
    publishToReceiverMs: percentiles(lat),
    received: arrivals.size,
    slow: { count: slowSent.length, sentOverMs: slowSent.length ? round(Math.max(...slowSent) - Math.min(...slowSent), 0) : 0 },
    duplicates: dups.length,
    publishErrors: errors,
  };
}
