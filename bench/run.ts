// `npm run bench` (-- --quick for the CI smoke run): Hookline's throughput, latency, API writes,
// CPU and memory beside the ceilings of the same machine, measured in one run. See
// docs/performance.md for what each number means. Phases, each on a fresh namespace:
//   0. a private control plane in a temp dir (stopped at the end, on failure and on Ctrl-C),
//      the receiver process, the CRDs plus benchitems.bench.hookline.dev;
//   1. ceilings: raw HTTP (a separate process POSTing signed bodies to the receiver) and raw
//      API (create + one status merge-patch of a BenchItem of the same size);
//   2. throughput: the operator (a separate process, leader election on) delivers N deliveries
//      created as fast as the API server accepts them, retention.succeeded 0s so the final
//      delete is part of the writes per delivery;
//   3. latency at half the measured rate;
//   4. latency of a healthy endpoint alone, while another endpoint hangs, and alone again;
//   4b. the same for a healthy namespace while another namespace has 20 subscriptions whose
//      endpoints hang with enough deliveries to hold every global slot it may (fair share);
//   5. the ceilings again (full mode: the machine is shared, the fractions use the mean);
//   6. memory at scale: RSS of a fresh operator with no finished deliveries, then with M.
// `--memory` runs only the pending-payload memory phase: RSS of a fresh operator with no pending
// deliveries, with 10,000 pending 1 KiB ones, and with 400 pending 250 KiB ones.
// `--capacity` runs only the etcd capacity phase (bench/capacity.ts; docs/capacity.md).
// `--fairness` runs only the API Priority and Fairness phase (bench/lib/fairness.ts).
// `--mode stream` runs only stream mode (bench/stream.ts) after the HTTP ceiling and CR mode's
// throughput phase of the same run, and prints its goals with pass/fail (bench/lib/stream-goals.ts).
// The exit code is non-zero only when correctness fails (a delivery not Succeeded, counts that
// do not add up) or the benchmark could not run; it asserts nothing about speed.
import { KubeConfig } from "@kubernetes/client-node";
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ensureBinaries } from "../src/cluster/build.js";
import { readState, startControlPlane, stopControlPlane, type ControlPlaneInfo } from "../src/cluster/control-plane.js";
import { freePorts } from "../src/cluster/ports.js";
import { installCrds } from "../src/cli/crds.js";
import { CONTENT_TYPE, KubeClient } from "../src/kube/client.js";
import { slotsKeptBack } from "../src/delivery/engine/global-slots.js";
import { VERSION as HOOKLINE_VERSION } from "../src/version.js";
import { benchItemCrd, namespace, secret, subscription } from "./lib/objects.js";
import { countNotSucceeded, DeliveryWatch, ensure, kubeClient, NAMESPACES, rollupSucceeded, SECRETS, SUBSCRIPTIONS, waitSubscriptionsReady } from "./lib/kube.js";
import { OperatorProcess, ReceiverProcess, ROOT, spawnTs, Watchdog } from "./lib/procs.js";
import { apiCeiling, createFinished, createPending, produce, type ApiCeilingResult, type Created, type ProduceResult } from "./lib/producer.js";
import { loadAverage, machine, now, percentiles, procCpuSeconds, round, sample, samples, sleep, type Percentiles } from "./lib/util.js";
import { capacityPhase, capacityRows } from "./capacity.js";
import { shapes } from "./shapes.js";
import { streamBench } from "./stream.js";
import { goalTable } from "./lib/stream-goals.js";
import { publish as publishEvent } from "../src/publish/fanout.js";
import { collectionPath } from "../src/kube/types.js";
import { applyFlowControl, clientLoop, flowControlObjects, prepareConfigMaps, serviceAccountKubeconfig, type ClientLoopResult } from "./lib/fairness.js";
import { formatProfile, summarizeProfile, type ProfileSummary } from "./profile-summary.js";
import type { SubscriptionSpecInput } from "../src/api/subscription.js";

// ---------------------------------------------------------------------------------------------
// options

const { values: argv } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    deliveries: { type: "string" },
    finished: { type: "string" },
    subscriptions: { type: "string", default: "10" },
    concurrency: { type: "string", default: "32" },
    "payload-bytes": { type: "string", default: "1024" },
    "cpu-prof": { type: "boolean", default: false },
    keep: { type: "boolean", default: false },
    "no-save": { type: "boolean", default: false },
    tag: { type: "string", default: "" },
    skip: { type: "string", default: "" },
    only: { type: "string", default: "" },
    rate: { type: "string", default: "20" },
    "node-options": { type: "string", default: "" },
    memory: { type: "boolean", default: false },
    capacity: { type: "boolean", default: false },
    fairness: { type: "boolean", default: false },
    shapes: { type: "boolean", default: false },
    mode: { type: "string", default: "cr" },
    events: { type: "string" },
    "nats-nodes": { type: "string", default: "1" },
    help: { type: "boolean", short: "h", default: false },
  },
});

if (argv.help) {
  process.stdout.write(`usage: npm run bench [-- OPTIONS]

  --quick              1,000 deliveries, 5,000 finished, short latency windows (< 2 min)
  --deliveries N       deliveries in the throughput phase (5000; quick 1000)
  --finished N         finished deliveries in etcd for the memory phase (20000; quick 5000)
  --subscriptions N    subscriptions (10)
  --concurrency N      producer, API ceiling and HTTP ceiling concurrency, and the operator's
                       WEBHOOK_MAX_IN_FLIGHT (32)
  --payload-bytes N    size of each delivery's payload JSON (1024)
  --cpu-prof           run the operator with --cpu-prof and summarise the profile
  --skip LIST          comma-separated phases to skip: ceilings,paced,hang,tenant,memory
  --only LIST          run only these phases (of ceilings,throughput,paced,hang,tenant,memory;
                       with --shapes, of backlog,backlog-wide,subscriptions,fanout,payload,cold)
  --rate N             deliveries/s of the latency phases when throughput does not run (20)
  --memory             only the pending-payload memory phase: operator RSS with no pending
                       deliveries, 10,000 pending 1 KiB ones, 400 pending 250 KiB ones (~4 min)
  --capacity           only the capacity phase: etcd bytes per pending and finished delivery with
                       1 KiB, 16 KiB and 256 KiB payloads, before and after compaction (~5 min)
  --fairness           only the fairness phase: p99 of another client's get/list/update on
                       ConfigMaps alone, while Hookline delivers --deliveries at full speed, and
                       the same with the chart's FlowSchema applied (~2 min)
  --shapes             only the shapes: a released backlog (1k/10k/50k), 10/100/1,000
                       subscriptions, fan-out to 1/10/100, 1/16/256 KiB payloads, a cold start
                       with 100,000 pending, and how each cost grows (with --quick: small N, for
                       correctness)
  --mode stream        only stream mode (issue 16) beside CR mode and the HTTP ceiling of the same
                       run: stream deliveries/s (one replica), p99 publish → receiver at half
                       that rate, operator CPU-s per 1,000, and the same with two replicas (each
                       one's share, duplicates), in a table with the goals (~4 min; with --quick
                       about 1 min, for CI)
  --events N           events per stream-mode phase (20000; quick 1000; quick --deliveries 500)
  --nats-nodes 3       with --mode stream: on a three-node JetStream cluster (streams at R3)
                       instead of one nats-server
  --node-options STR   NODE_OPTIONS of the operator processes (e.g. --import=./try-a-patch.mjs)
  --keep               keep the temp dir (control plane data, logs, profiles)
  --no-save            do not write bench/results/
  --tag NAME           save as bench/results/<time>-<mode>-NAME.json and leave latest*.json alone
                       (for experiments)
`);
  process.exit(0);
}

const QUICK = argv.quick;
if (!["cr", "stream"].includes(argv.mode)) throw new Error(`--mode ${argv.mode}: expected cr or stream`);
const EVENTS = Number(argv.events ?? (QUICK ? 1_000 : 20_000));
const NATS_NODES = Number(argv["nats-nodes"]);
if (![1, 3].includes(NATS_NODES)) throw new Error(`--nats-nodes ${argv["nats-nodes"]}: expected 1 or 3`);
// Quick stream mode (CI) keeps its CR-mode and ceiling phases small: the stream phases are its point.
const N = Number(argv.deliveries ?? (QUICK ? (argv.mode === "stream" ? 500 : 1_000) : 5_000));
const FINISHED = Number(argv.finished ?? (QUICK ? 5_000 : 20_000));
const SUBS = Number(argv.subscriptions);
const C = Number(argv.concurrency);
const PAYLOAD = Number(argv["payload-bytes"]);
// The HTTP ceiling's client is measured warm, as the operator is (its phases follow a warm-up
// and run 20,000 events): 2,000 POSTs not counted, then 20,000 (at least N) counted. Measured
// the old way, 128 not counted and 5,000 counted (under a second, much of it before V8 had
// optimised the client), it came out at 0.42-0.46 of this against the same receiver (docs/performance.md,
// "The HTTP ceiling, measured warm").
const CEILING_WARMUP = QUICK ? C * 4 : 2_000;
const CEILING_COUNT = QUICK ? N : Math.max(N, 20_000);
const PACED_SECONDS = QUICK ? 3 : 10;
const HANG_WINDOW_SECONDS = QUICK ? 3 : 10;
const HANG_PENDING = 50;
const HANG_MAX_IN_FLIGHT = 10;
const PHASES = ["ceilings", "throughput", "paced", "hang", "tenant", "memory"];
const ONLY = argv.only.split(",").filter(Boolean);
const SKIP = new Set([...argv.skip.split(",").filter(Boolean), ...(ONLY.length ? PHASES.filter((p) => !ONLY.includes(p)) : [])]);
const TENANT_HANGING_SUBS = 20;
const TENANT_PENDING = 100;
for (const [k, v] of Object.entries({ events: EVENTS, deliveries: N, finished: FINISHED, subscriptions: SUBS, concurrency: C, "payload-bytes": PAYLOAD, rate: Number(argv.rate) })) {
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${k} must be a positive integer`);
}

/** The commit measured, and whether src/ differed from it (others edit the same checkout). */
function gitState(): { commit: string; srcDirty: boolean | undefined } {
  try {
    const commit = execFileSync("git", ["rev-parse", "--short=12", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--", "src"], { cwd: ROOT, encoding: "utf8" }).trim();
    return { commit, srcDirty: dirty.length > 0 };
  } catch {
    return { commit: "unknown", srcDirty: undefined };
  }
}

const started = now();
const GIT = gitState();
const say = (line: string) => process.stderr.write(`[bench ${((now() - started) / 1000).toFixed(1).padStart(6)}s] ${line}\n`);
const failures: string[] = [];
const check = (ok: boolean, message: string) => {
  if (!ok) {
    failures.push(message);
    say(`CORRECTNESS: ${message}`);
  }
};

// ---------------------------------------------------------------------------------------------
// cleanup: everything we start is registered here and undone in reverse order, on success,
// on failure and on SIGINT/SIGTERM.

const cleanups: Array<{ what: string; run: () => Promise<void> | void }> = [];
let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    for (const c of cleanups.reverse()) {
      try {
        await c.run();
      } catch (err) {
        say(`cleanup (${c.what}) failed: ${(err as Error).message}`);
      }
    }
  })();
  return cleaning;
}
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => {
    if (cleaning) process.exit(130);
    say(`${sig}: stopping everything (again to exit at once)`);
    void cleanup().finally(() => process.exit(130));
  });
}

// ---------------------------------------------------------------------------------------------
// results

interface Latency {
  createToReceiver: Percentiles;
  createToSucceeded: Percentiles;
  /** From the moment the create was sent (before the API server answered). */
  sentToReceiver: Percentiles;
}

interface Phase {
  namespace: string;
  deliveries: number;
  producer: Omit<ProduceResult, "created" | "errors"> & { errors: number };
  latencyMs: Latency;
  succeeded: number;
  received: number;
  duplicates: number;
}

const results: Record<string, unknown> & { correctness?: { ok: boolean; failures: string[] } } = {};

function latency(created: Created[], arrivals: Map<string, { at: number }>, succeededAt: Map<string, number>): Latency {
  const toRecv: number[] = [];
  const toSucc: number[] = [];
  const sentRecv: number[] = [];
  for (const c of created) {
    const a = arrivals.get(c.name);
    if (a) {
      toRecv.push(a.at - c.returnedAt);
      sentRecv.push(a.at - c.sentAt);
    }
    const s = succeededAt.get(c.name);
    if (s !== undefined) toSucc.push(s - c.returnedAt);
  }
  return { createToReceiver: percentiles(toRecv), createToSucceeded: percentiles(toSucc), sentToReceiver: percentiles(sentRecv) };
}

/** Operator API requests between two /metrics scrapes, by verb, and by verb+resource. */
function apiDelta(before: string, after: string): { byVerb: Record<string, number>; byResource: Record<string, number>; byCode: Record<string, number> } {
  const key = (l: Record<string, string>) => `${l.verb} ${l.resource}`;
  const b = new Map<string, number>();
  for (const s of samples(before, "hookline_kube_api_requests_total")) b.set(`${key(s.labels)} ${s.labels.code}`, s.value);
  const byVerb: Record<string, number> = {};
  const byResource: Record<string, number> = {};
  const byCode: Record<string, number> = {};
  for (const s of samples(after, "hookline_kube_api_requests_total")) {
    const d = s.value - (b.get(`${key(s.labels)} ${s.labels.code}`) ?? 0);
    if (d <= 0) continue;
    byVerb[s.labels.verb!] = (byVerb[s.labels.verb!] ?? 0) + d;
    byResource[key(s.labels)] = (byResource[key(s.labels)] ?? 0) + d;
    byCode[s.labels.code!] = (byCode[s.labels.code!] ?? 0) + d;
  }
  return { byVerb, byResource, byCode };
}

const WRITE_VERBS = ["create", "update", "patch", "delete", "deletecollection"];
const writesOf = (byVerb: Record<string, number>) => WRITE_VERBS.reduce((n, v) => n + (byVerb[v] ?? 0), 0);
const MB = (bytes: number) => round(bytes / 1024 / 1024, 1);

// ---------------------------------------------------------------------------------------------
// phases

interface Env {
  cp: ControlPlaneInfo;
  cpDir: string;
  admin: KubeClient;
  receiver: ReceiverProcess;
  watchdog: Watchdog;
  tmp: string;
}

type SubSetup = { name: string; spec: Partial<SubscriptionSpecInput> & { url: string } };

async function setupNamespace(env: Env, ns: string, subs: SubSetup[]): Promise<void> {
  await ensure(env.admin, NAMESPACES, [namespace(ns)]);
  await ensure(env.admin, SECRETS, [secret(ns)]);
  await ensure(env.admin, SUBSCRIPTIONS, subs.map((s) => subscription(ns, s.name, s.spec)));
}

/** A namespace whose subscriptions are Ready, and a started watch of its deliveries (stopped at cleanup). */
async function deliveryNamespace(env: Env, ns: string, subs: SubSetup[]): Promise<DeliveryWatch> {
  await setupNamespace(env, ns, subs);
  await waitSubscriptionsReady(env.admin, ns, subs.map((s) => s.name));
  // retention.succeeded 0s: a delivered event is deleted without a Succeeded write (watch deletes too).
  // On its own client: a watch holds its connection for as long as it runs, and the shapes run
  // keeps one per namespace (on env.admin's 8 connections the ninth namespace's first request
  // waited for a free connection forever).
  const client = await kubeClient(env.cp.kubeconfig, 1);
  const watch = new DeliveryWatch(client, ns, { everyPhase: subs.some((s) => s.spec.retention?.succeeded === "0s") });
  cleanups.push({
    what: `watch of ${ns}`,
    run: async () => {
      await watch.stop();
      await client.destroy();
    },
  });
  await watch.start();
  return watch;
}

/**
 * Sets spec.paused on the named subscriptions and waits until the operator has reconciled that
 * generation (each one's Ready condition names it in observedGeneration).
 */
async function setSubscriptionsPaused(admin: KubeClient, ns: string, names: string[], paused: boolean, timeoutMs = 60_000): Promise<void> {
  const generations = new Map<string, number>();
  for (const name of names) {
    const obj = await admin.request<{ metadata: { generation: number } }>({ method: "PATCH", path: `${collectionPath(SUBSCRIPTIONS, ns)}/${name}`, contentType: CONTENT_TYPE.merge, body: { spec: { paused } } });
    generations.set(name, obj.metadata.generation);
  }
  for (const deadline = Date.now() + timeoutMs; ; await sleep(100)) {
    const list = await admin.request<{ items: Array<{ metadata: { name: string }; status?: { conditions?: Array<{ type: string; observedGeneration?: number }> } }> }>({ method: "GET", path: collectionPath(SUBSCRIPTIONS, ns) });
    const seen = list.items.filter((o) => (o.status?.conditions?.find((c) => c.type === "Ready")?.observedGeneration ?? 0) >= (generations.get(o.metadata.name) ?? Infinity));
    if (seen.length === names.length) return;
    if (Date.now() > deadline) throw new Error(`subscriptions in ${ns}: paused=${paused} not reconciled within ${timeoutMs} ms`);
  }
}

const apiPort = (env: Env) => Number(new URL(env.cp.server).port);

/** CPU seconds used so far by the API server and etcd processes. */
function controlPlaneCpu(env: Env): { apiserver: number; etcd: number } {
  const st = readState(env.cpDir);
  return { apiserver: procCpuSeconds(st?.pids["kube-apiserver"]), etcd: procCpuSeconds(st?.pids.etcd) };
}

/** The API server's own /metrics (Prometheus text). */
async function apiserverMetrics(env: Env): Promise<string> {
  const res = await env.admin.stream({ method: "GET", path: "/metrics", accept: "text/plain", timeoutMs: 30_000 });
  // Decoded once, whole: a chunk can end inside a multi-byte character.
  const chunks: Buffer[] = [];
  for await (const chunk of res.body) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

/** API server and etcd CPU, and watchers the API server closed as unresponsive, between two calls. */
async function controlPlaneMark(env: Env): Promise<(per: number) => Promise<Record<string, number>>> {
  const cpu0 = controlPlaneCpu(env);
  const m0 = await apiserverMetrics(env);
  return async (per: number) => {
    const cpu1 = controlPlaneCpu(env);
    const m1 = await apiserverMetrics(env);
    const terminated = (m: string) => sample(m, "apiserver_terminated_watchers_total");
    return {
      apiserverCpuSecondsPer1000: round(((cpu1.apiserver - cpu0.apiserver) / per) * 1000, 3),
      etcdCpuSecondsPer1000: round(((cpu1.etcd - cpu0.etcd) / per) * 1000, 3),
      watchersTerminatedAsUnresponsive: terminated(m1) - terminated(m0),
    };
  };
}

/** Waits until the operator has nothing queued or in flight, then a little longer. */
async function quiesce(op: OperatorProcess, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = await op.metrics();
    if (sample(m, "hookline_workqueue_depth", { controller: "delivery" }) === 0 && sample(m, "webhook_deliveries_in_flight") === 0) break;
    if (Date.now() > deadline) {
      say("the operator is still busy; measuring anyway");
      break;
    }
    await sleep(250);
  }
  await sleep(2_000);
}

const subNames = (n: number) => Array.from({ length: n }, (_, i) => `sub-${i}`);

async function startOperator(env: Env, name: string, extra: Record<string, string>, cpuProfDir?: string, inspect = false, kubeconfig = env.cp.kubeconfig): Promise<OperatorProcess> {
  const [metricsPort, healthPort, inspectPort] = (await freePorts(3)) as [number, number, number];
  const op = OperatorProcess.start({
    name,
    kubeconfig,
    logFile: join(env.tmp, `operator-${name}.log`),
    metricsPort,
    healthPort,
    env: {
      WEBHOOK_MAX_IN_FLIGHT: String(C),
      LEADER_ELECTION_LEASE_NAME: `bench-${name}`,
      LEADER_ELECTION_NAMESPACE: "default",
      WEBHOOK_DRAIN_TIMEOUT_MS: "5000",
      ...(argv["node-options"] ? { NODE_OPTIONS: argv["node-options"] } : {}),
      ...extra,
    },
    ...(cpuProfDir ? { cpuProfDir } : {}),
    ...(inspect ? { inspectPort } : {}),
  });
  env.watchdog.add(op.pid);
  cleanups.push({ what: `operator ${name}`, run: async () => void (op.exited ? undefined : await op.stop(10_000)) });
  return op;
}

interface Ceilings {
  http: { perSecond: number; latencyMs: Percentiles; concurrency: number };
  api: ApiCeilingResult & { controlPlane: Record<string, number> };
}

async function ceilings(env: Env, tag: string): Promise<Ceilings> {
  return { http: (await httpCeilingPhase(env, tag)) as Ceilings["http"], api: await apiCeilingPhase(env, tag) };
}

async function httpCeilingPhase(env: Env, tag: string): Promise<Record<string, unknown>> {
  say(`HTTP ceiling (${tag}): ${CEILING_COUNT} signed POSTs of the same size after ${CEILING_WARMUP} not counted, ${C} in flight, from a separate process`);
  const child = spawnTs("http-ceiling.ts", [JSON.stringify({ url: env.receiver.url("/ceiling"), count: CEILING_COUNT, concurrency: C, payloadBytes: PAYLOAD, warmup: CEILING_WARMUP, receiverPid: env.receiver.child.pid }), env.tmp]);
  env.watchdog.add(child.pid);
  let out = "";
  let err = "";
  child.stdout!.setEncoding("utf8").on("data", (c: string) => (out += c));
  child.stderr!.setEncoding("utf8").on("data", (c: string) => (err += c));
  const before = (await env.receiver.stats()).ceiling;
  const exit = await new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  env.watchdog.remove(child.pid);
  if (exit !== 0) throw new Error(`http-ceiling exited ${exit}: ${err.slice(-2000)}`);
  const r = JSON.parse(out.trim().split("\n").pop()!) as { count: number; seconds: number; perSecond: number; latencyMs: Percentiles; errors: number; cpuSecondsPer1000: { client: number; receiver: number; rest: number; machine: number } };
  const received = (await env.receiver.stats()).ceiling - before;
  check(r.errors === 0, `HTTP ceiling: ${r.errors} POSTs failed`);
  check(received === r.count + CEILING_WARMUP || received === r.count, `HTTP ceiling: receiver counted ${received} POSTs, expected ${r.count + CEILING_WARMUP} (with warm-up)`);
  const c = r.cpuSecondsPer1000;
  say(`HTTP ceiling: ${round(r.perSecond, 0)} POSTs/s (p50 ${r.latencyMs.p50} ms, p99 ${r.latencyMs.p99} ms); CPU-s per 1,000: client ${c.client}, receiver ${c.receiver}, the rest ${c.rest}, the whole machine ${c.machine}`);
  return { ...r, perSecond: round(r.perSecond, 1), seconds: round(r.seconds, 3), concurrency: C, warmup: CEILING_WARMUP };
}

async function apiCeilingPhase(env: Env, tag: string): Promise<Ceilings["api"]> {
  const ns = `bench-ceiling-${tag}`;
  await ensure(env.admin, NAMESPACES, [namespace(ns)]);
  const client = await kubeClient(env.cp.kubeconfig, C + 4);
  say(`API ceiling (${tag}): ${N} BenchItems (after ${Math.min(500, Math.ceil(N / 5))} not counted), create + one status merge-patch each, ${C} in flight`);
  try {
    let mark: Awaited<ReturnType<typeof controlPlaneMark>> | undefined;
    const r = await apiCeiling({
      client,
      namespace: ns,
      count: N,
      concurrency: C,
      payloadBytes: PAYLOAD,
      url: env.receiver.url("/ok/x"),
      warmup: Math.min(500, Math.ceil(N / 5)),
      beforeMeasure: async () => void (mark = await controlPlaneMark(env)),
    });
    const cp = await mark!(N);
    check(r.errors === 0, `API ceiling: ${r.errors} items failed`);
    say(`API ceiling: ${round(r.itemsPerSecond, 0)} items/s = ${round(r.writesPerSecond, 0)} writes/s (create p50 ${r.createLatencyMs.p50} ms, patch p50 ${r.patchLatencyMs.p50} ms)`);
    return { ...r, itemsPerSecond: round(r.itemsPerSecond, 1), writesPerSecond: round(r.writesPerSecond, 1), seconds: round(r.seconds, 3), controlPlane: cp };
  } finally {
    await client.destroy();
  }
}

/** Runs one batch of deliveries through the operator and measures it. */
async function deliverBatch(
  env: Env,
  o: { ns: string; prefix: string; count: number; rate?: number; subscriptionOf: (i: number) => string; timeoutMs: number; label: string },
  watch: DeliveryWatch,
): Promise<{ produced: ProduceResult; lastSucceededAt: number; latencyMs: Latency; received: number; duplicates: number; succeeded: number }> {
  const client = await kubeClient(env.cp.kubeconfig, C + 4);
  let produced: ProduceResult;
  try {
    produced = await produce({ client, namespace: o.ns, prefix: o.prefix, count: o.count, concurrency: C, payloadBytes: PAYLOAD, subscriptionOf: o.subscriptionOf, ...(o.rate ? { rate: o.rate } : {}) });
  } finally {
    await client.destroy();
  }
  check(produced.errors.length === 0, `${o.label}: ${produced.errors.length} creates failed: ${produced.errors.slice(0, 3).join("; ")}`);
  const names = produced.created.map((c) => c.name);
  const done = () => names.every((n) => watch.succeededAt.has(n) || watch.failed.has(n));
  const finished = await watch.until(done, o.timeoutMs);
  const succeeded = names.filter((n) => watch.succeededAt.has(n)).length;
  const notDone = names.filter((n) => !watch.succeededAt.has(n));
  if (!finished || succeeded !== o.count) {
    const left = await countNotSucceeded(env.admin, o.ns).catch(() => undefined);
    check(false, `${o.label}: ${succeeded} of ${o.count} deliveries Succeeded${finished ? "" : ` within ${o.timeoutMs / 1000} s`}; e.g. ${notDone.slice(0, 3).map((n) => `${n}=${watch.failed.get(n) ?? "not finished"}`).join(", ")}; not Succeeded in ${o.ns}: ${JSON.stringify(left?.phases ?? "?")}`);
  }
  const lastSucceededAt = Math.max(...names.map((n) => watch.succeededAt.get(n) ?? 0));
  const arrivals = await env.receiver.arrivals(`${o.prefix}-`);
  const duplicates = [...arrivals.values()].filter((a) => a.count > 1).length;
  check(arrivals.size === o.count, `${o.label}: the receiver got ${arrivals.size} distinct webhook ids, expected ${o.count}`);
  check(duplicates === 0, `${o.label}: ${duplicates} webhook ids arrived more than once at a receiver that always answers 200`);
  return { produced, lastSucceededAt, latencyMs: latency(produced.created, arrivals, watch.succeededAt), received: arrivals.size, duplicates, succeeded };
}

function phaseSummary(ns: string, count: number, b: Awaited<ReturnType<typeof deliverBatch>>): Phase {
  const { created: _c, errors, ...producer } = b.produced;
  return {
    namespace: ns,
    deliveries: count,
    producer: { ...producer, errors: errors.length, createRate: round(producer.createRate, 1) },
    latencyMs: b.latencyMs,
    succeeded: b.succeeded,
    received: b.received,
    duplicates: b.duplicates,
  };
}

/**
 * `retention`: "0s" is the two-write path (create, then the operator's delete: no Succeeded
 * status is written for a delivery nobody reads); "1s" keeps Succeeded for a second, the
 * three-write path (create, Succeeded status, delete by retention).
 */
async function throughputPhase(env: Env, op: OperatorProcess, retention: "0s" | "1s" = "0s"): Promise<Record<string, unknown>> {
  const ns = retention === "0s" ? "bench-main" : "bench-kept";
  const watch = await deliveryNamespace(env, ns, subNames(SUBS).map((name) => ({ name, spec: { url: env.receiver.url(`/ok/${ns}/${name}`), retention: { succeeded: retention } } })));
  await sleep(1_000); // let the subscription status writes of the setup settle
  const before = await op.metrics();
  const cpMark = await controlPlaneMark(env);
  const logMark = now();
  const memBefore = op.memory()!;
  op.sample(apiPort(env));
  say(`throughput: ${N} deliveries over ${SUBS} subscriptions, created with ${C} in flight (retention.succeeded ${retention})`);
  const b = await deliverBatch(env, { ns, prefix: retention === "0s" ? "m" : "k", count: N, subscriptionOf: (i) => `sub-${i % SUBS}`, timeoutMs: 120_000 + N * 40, label: "throughput" }, watch);
  const atCompletion = await op.metrics();
  const seconds = (b.lastSucceededAt - b.produced.firstSentAt) / 1000;
  const rate = b.succeeded / seconds;
  say(`throughput: ${round(rate, 0)} deliveries/s (${b.succeeded} in ${round(seconds, 2)} s; creates at ${round(b.produced.createRate, 0)}/s); create→receiver p50 ${b.latencyMs.createToReceiver.p50} ms p99 ${b.latencyMs.createToReceiver.p99} ms`);

  // The final deletes (retention 0s) and the rate-limited subscription rollup finish after the
  // last Succeeded: wait for both so the writes per delivery include them.
  const names = b.produced.created.map((c) => c.name);
  const deleted = await watch.until(() => names.every((n) => watch.deletedAt.has(n)), 60_000);
  check(deleted, `throughput: ${names.filter((n) => watch.deletedAt.has(n)).length} of ${names.length} delivered deliveries deleted (retention.succeeded ${retention}) within 60 s`);
  let rollup = 0;
  const rollupDeadline = Date.now() + 30_000;
  while ((rollup = await rollupSucceeded(env.admin, ns)) < b.succeeded && Date.now() < rollupDeadline) await sleep(250);
  check(rollup === N, `throughput: the subscriptions' status.deliveries.succeeded adds up to ${rollup}, expected ${N}`);
  await sleep(500);
  const after = await op.metrics();
  const controlPlane = await cpMark(N);
  op.stopSampling();
  const memAfter = op.memory()!;
  const left = await countNotSucceeded(env.admin, ns);
  check(left.count === 0, `throughput: ${left.count} deliveries left that are not Succeeded: ${JSON.stringify(left.phases)}`);

  const attempts = {
    success: sample(after, "webhook_delivery_attempts_total", { namespace: ns, status: "success" }) - sample(before, "webhook_delivery_attempts_total", { namespace: ns, status: "success" }),
    failure: sample(after, "webhook_delivery_attempts_total", { namespace: ns, status: "failure" }) - sample(before, "webhook_delivery_attempts_total", { namespace: ns, status: "failure" }),
  };
  const finishedMetric = sample(after, "webhook_deliveries_finished_total", { namespace: ns, phase: "Succeeded" }) - sample(before, "webhook_deliveries_finished_total", { namespace: ns, phase: "Succeeded" });
  check(attempts.success === N && attempts.failure === 0, `throughput: the operator counted ${attempts.success} successful and ${attempts.failure} failed attempts, expected ${N} and 0`);
  check(finishedMetric === N, `throughput: webhook_deliveries_finished_total{phase="Succeeded"} grew by ${finishedMetric}, expected ${N}`);

  const api = apiDelta(before, after);
  const perDelivery = (x: number) => round(x / N, 3);
  const operatorWrites = writesOf(api.byVerb);
  const cpu = sample(after, "hookline_process_cpu_seconds_total") - sample(before, "hookline_process_cpu_seconds_total");
  const cpuToCompletion = sample(atCompletion, "hookline_process_cpu_seconds_total") - sample(before, "hookline_process_cpu_seconds_total");
  const statusPatches = api.byResource["patch webhookdeliveries/status"] ?? 0;
  return {
    ...phaseSummary(ns, N, b),
    seconds: round(seconds, 3),
    deliveriesPerSecond: round(rate, 1),
    apiRequestsPerDelivery: Object.fromEntries(Object.entries(api.byVerb).map(([v, n]) => [v, perDelivery(n)])),
    apiRequestsByResource: api.byResource,
    apiRequestsByCode: api.byCode,
    statusPatchesPerDelivery: perDelivery(statusPatches),
    operatorWritesPerDelivery: perDelivery(operatorWrites),
    /** The producer's create plus the operator's writes. */
    writesPerDelivery: perDelivery(operatorWrites + N),
    retentionSucceeded: retention,
    deletesCounted: `yes: retention.succeeded is ${retention}, so each delivery's final delete is in the count`,
    attempts,
    cpuSeconds: round(cpu, 3),
    cpuSecondsPer1000: round((cpu / N) * 1000, 3),
    cpuSecondsToCompletion: round(cpuToCompletion, 3),
    rssBeforeMiB: MB(memBefore.rss),
    peakRssMiB: MB(op.peakRss),
    vmHwmMiB: MB(memAfter.hwm),
    peakRssGrowthPer1000MiB: round(MB(op.peakRss - memBefore.rss) / (N / 1000), 2),
    eventLoopLagP99Ms: round(sample(atCompletion, "hookline_nodejs_eventloop_lag_p99_seconds") * 1000, 2),
    eventLoopLagMaxMs: round(sample(atCompletion, "hookline_nodejs_eventloop_lag_max_seconds") * 1000, 2),
    logLinesPerDelivery: round(op.logLinesSince(logMark) / N, 3),
    /** Distinct TCP connections to the API server seen (polled every 50 ms: a lower bound). */
    apiConnectionsSeen: op.apiConnections.size,
    /** API server and etcd CPU per 1,000 deliveries; watches the API server closed because their reader was too slow. */
    controlPlane,
    /** Re-opened watches of the benchmark itself (to tell them from the operator's in controlPlane.watchersTerminatedAsUnresponsive). */
    benchWatchReopened: watch.reopened,
  };
}

async function pacedPhase(env: Env, op: OperatorProcess, rate: number): Promise<Record<string, unknown>> {
  const ns = "bench-paced";
  const watch = await deliveryNamespace(env, ns, subNames(SUBS).map((name) => ({ name, spec: { url: env.receiver.url(`/ok/${ns}/${name}`), retention: { succeeded: "0s" } } })));
  const count = Math.max(10, Math.round(rate * PACED_SECONDS));
  await quiesce(op);
  say(`half rate: ${count} deliveries at ${round(rate, 1)}/s (half the measured rate) for ${PACED_SECONDS} s`);
  const before = await op.metrics();
  const b = await deliverBatch(env, { ns, prefix: "p", count, rate, subscriptionOf: (i) => `sub-${i % SUBS}`, timeoutMs: 60_000 + count * 40, label: "half rate" }, watch);
  const after = await op.metrics();
  await watch.stop();
  say(`half rate: create→receiver p50 ${b.latencyMs.createToReceiver.p50} ms p99 ${b.latencyMs.createToReceiver.p99} ms (creates at ${round(b.produced.createRate, 1)}/s)`);
  return {
    ...phaseSummary(ns, count, b),
    targetRate: round(rate, 1),
    eventLoopLagP99Ms: round(sample(after, "hookline_nodejs_eventloop_lag_p99_seconds") * 1000, 2),
    cpuSeconds: round(sample(after, "hookline_process_cpu_seconds_total") - sample(before, "hookline_process_cpu_seconds_total"), 3),
  };
}

async function hangPhase(env: Env, op: OperatorProcess, rate: number): Promise<Record<string, unknown>> {
  const ns = "bench-hang";
  const timeoutS = HANG_WINDOW_SECONDS + 15;
  const watch = await deliveryNamespace(env, ns, [
    { name: "healthy", spec: { url: env.receiver.url(`/ok/${ns}/healthy`), retention: { succeeded: "0s" } } },
    { name: "hanging", spec: { url: env.receiver.url(`/hang/${ns}/hanging`), maxInFlight: HANG_MAX_IN_FLIGHT, timeout: `${timeoutS}s`, retention: { succeeded: "0s" } } },
  ]);
  const count = Math.max(10, Math.round(rate * HANG_WINDOW_SECONDS));
  await quiesce(op);
  say(`hanging endpoint: ${count} deliveries to a healthy endpoint at ${round(rate, 1)}/s alone`);
  const alone = await deliverBatch(env, { ns, prefix: "ha", count, rate, subscriptionOf: () => "healthy", timeoutMs: 60_000, label: "healthy alone" }, watch);

  say(`hanging endpoint: ${HANG_PENDING} deliveries to an endpoint that hangs (timeout ${timeoutS}s, maxInFlight ${HANG_MAX_IN_FLIGHT})`);
  const client = await kubeClient(env.cp.kubeconfig, C + 4);
  const hung = await produce({ client, namespace: ns, prefix: "hh", count: HANG_PENDING, concurrency: C, payloadBytes: PAYLOAD, subscriptionOf: () => "hanging" });
  await client.destroy();
  check(hung.errors.length === 0, `hang: ${hung.errors.length} creates failed`);
  const hangDeadline = Date.now() + 20_000;
  let stats = await env.receiver.stats();
  while (stats.hangingOpen < HANG_MAX_IN_FLIGHT && Date.now() < hangDeadline) {
    await sleep(100);
    stats = await env.receiver.stats();
  }
  check(stats.hangingOpen >= HANG_MAX_IN_FLIGHT, `hang: only ${stats.hangingOpen} requests hanging at the receiver, expected ${HANG_MAX_IN_FLIGHT}`);
  say(`hanging endpoint: ${stats.hangingOpen} requests hang; the same healthy load again`);
  const during = await deliverBatch(env, { ns, prefix: "hb", count, rate, subscriptionOf: () => "healthy", timeoutMs: 60_000, label: "healthy while another endpoint hangs" }, watch);
  const stillHanging = (await env.receiver.stats()).hangingOpen;
  check(stillHanging >= HANG_MAX_IN_FLIGHT, `hang: the hanging requests ended before the window did (${stillHanging} open)`);
  await env.receiver.release(`/hang/${ns}/`);
  const hungNames = hung.created.map((c) => c.name);
  const released = await watch.until(() => hungNames.every((n) => watch.succeededAt.has(n)), 60_000);
  check(released, `hang: ${hungNames.filter((n) => watch.succeededAt.has(n)).length} of ${HANG_PENDING} deliveries to the hanging endpoint Succeeded after it recovered`);
  // Alone again, so that noise from the rest of the machine shows as a difference between the
  // two "alone" runs rather than as an effect of the hanging endpoint.
  await quiesce(op);
  say(`hanging endpoint: released; the healthy load alone again`);
  const aloneAgain = await deliverBatch(env, { ns, prefix: "hc", count, rate, subscriptionOf: () => "healthy", timeoutMs: 60_000, label: "healthy alone again" }, watch);
  await watch.stop();
  const a = alone.latencyMs.createToReceiver;
  const a2 = aloneAgain.latencyMs.createToReceiver;
  const d = during.latencyMs.createToReceiver;
  const base = (k: "p50" | "p95" | "p99") => (a[k] + a2[k]) / 2;
  say(`hanging endpoint: healthy p50 ${a.p50} → ${d.p50} → ${a2.p50} ms, p99 ${a.p99} → ${d.p99} → ${a2.p99} ms (alone, hanging, alone)`);
  return {
    namespace: ns,
    rate: round(rate, 1),
    deliveries: count,
    hangingPending: HANG_PENDING,
    hangingInFlight: stillHanging,
    hangingTimeoutSeconds: timeoutS,
    alone: phaseSummary(ns, count, alone),
    duringHang: phaseSummary(ns, count, during),
    aloneAgain: phaseSummary(ns, count, aloneAgain),
    /** During the hang divided by the mean of the two runs alone. */
    ratio: { p50: round(d.p50 / base("p50"), 2), p95: round(d.p95 / base("p95"), 2), p99: round(d.p99 / base("p99"), 2) },
  };
}

/**
 * A healthy namespace alone, while another namespace holds every global slot it may with requests to
 * 20 subscriptions whose endpoints hang (and more parked behind them), and alone again.
 */
async function tenantPhase(env: Env, op: OperatorProcess, rate: number): Promise<Record<string, unknown>> {
  const ns = "bench-tenant-ok";
  const hangNs = "bench-tenant-hang";
  const timeoutS = HANG_WINDOW_SECONDS + 15;
  const watch = await deliveryNamespace(env, ns, [{ name: "healthy", spec: { url: env.receiver.url(`/ok/${ns}/healthy`), retention: { succeeded: "0s" } } }]);
  const hangSubs = subNames(TENANT_HANGING_SUBS);
  const hangWatch = await deliveryNamespace(env, hangNs, hangSubs.map((name) => ({ name, spec: { url: env.receiver.url(`/hang/${hangNs}/${name}`), timeout: `${timeoutS}s`, retention: { succeeded: "0s" } } })));
  const count = Math.max(10, Math.round(rate * HANG_WINDOW_SECONDS));
  await quiesce(op);
  say(`hanging tenant: ${count} deliveries to a healthy namespace at ${round(rate, 1)}/s alone`);
  const alone = await deliverBatch(env, { ns, prefix: "ta", count, rate, subscriptionOf: () => "healthy", timeoutMs: 60_000, label: "healthy namespace alone" }, watch);

  say(`hanging tenant: ${TENANT_PENDING} deliveries over ${TENANT_HANGING_SUBS} subscriptions whose endpoints hang (timeout ${timeoutS}s), WEBHOOK_MAX_IN_FLIGHT ${C}`);
  const client = await kubeClient(env.cp.kubeconfig, C + 4);
  const hung = await produce({ client, namespace: hangNs, prefix: "th", count: TENANT_PENDING, concurrency: C, payloadBytes: PAYLOAD, subscriptionOf: (i) => hangSubs[i % TENANT_HANGING_SUBS]! });
  await client.destroy();
  check(hung.errors.length === 0, `tenant: ${hung.errors.length} creates failed`);
  // The healthy namespace has subscriptions (and had work a moment ago): an eighth of the slots is kept for it (global-slots.ts).
  const wanted = Math.min(C - slotsKeptBack(C), TENANT_PENDING);
  const hangDeadline = Date.now() + 20_000;
  let stats = await env.receiver.stats();
  while (stats.hangingOpen < wanted && Date.now() < hangDeadline) {
    await sleep(100);
    stats = await env.receiver.stats();
  }
  check(stats.hangingOpen >= wanted, `tenant: only ${stats.hangingOpen} requests hanging at the receiver, expected ${wanted} (every global slot the namespace may hold)`);
  say(`hanging tenant: ${stats.hangingOpen} requests hang (every global slot the namespace may hold; ${slotsKeptBack(C)} kept for the others); the same healthy load again`);
  const during = await deliverBatch(env, { ns, prefix: "tb", count, rate, subscriptionOf: () => "healthy", timeoutMs: 180_000, label: "healthy namespace while another one hangs" }, watch);
  const stillHanging = (await env.receiver.stats()).hangingOpen;
  await env.receiver.release(`/hang/${hangNs}/`);
  const hungNames = hung.created.map((c) => c.name);
  const released = await hangWatch.until(() => hungNames.every((n) => hangWatch.succeededAt.has(n)), 120_000);
  check(released, `tenant: ${hungNames.filter((n) => hangWatch.succeededAt.has(n)).length} of ${TENANT_PENDING} deliveries to the hanging namespace Succeeded after it recovered`);
  await quiesce(op);
  say(`hanging tenant: released; the healthy load alone again`);
  const aloneAgain = await deliverBatch(env, { ns, prefix: "tc", count, rate, subscriptionOf: () => "healthy", timeoutMs: 60_000, label: "healthy namespace alone again" }, watch);
  await Promise.all([watch.stop(), hangWatch.stop()]);
  const a = alone.latencyMs.createToReceiver;
  const a2 = aloneAgain.latencyMs.createToReceiver;
  const d = during.latencyMs.createToReceiver;
  say(`hanging tenant: healthy p50 ${a.p50} → ${d.p50} → ${a2.p50} ms, p99 ${a.p99} → ${d.p99} → ${a2.p99} ms (alone, other namespace hanging, alone)`);
  return {
    namespace: ns,
    rate: round(rate, 1),
    deliveries: count,
    hangingSubscriptions: TENANT_HANGING_SUBS,
    hangingPending: TENANT_PENDING,
    hangingInFlightAtStart: stats.hangingOpen,
    hangingInFlightAtEnd: stillHanging,
    hangingTimeoutSeconds: timeoutS,
    alone: phaseSummary(ns, count, alone),
    duringHang: phaseSummary(ns, count, during),
    aloneAgain: phaseSummary(ns, count, aloneAgain),
  };
}

interface RssReading {
  /** RSS a few seconds after start and sync, as Kubernetes sees it (includes uncollected garbage). */
  rssMiB: number;
  heapUsedMiB: number;
  /** After a forced full GC: RSS, and the heap that live objects hold. */
  rssAfterGcMiB: number;
  heapAfterGcMiB: number;
}

async function settledRss(op: OperatorProcess): Promise<RssReading> {
  await sleep(3_000);
  const rss: number[] = [];
  for (let i = 0; i < 8; i++) {
    rss.push(op.memory()!.rss);
    await sleep(250);
  }
  const m = await op.metrics();
  const sorted = [...rss].sort((x, y) => x - y);
  const gc = await op.forceGc();
  await sleep(1_000);
  return {
    rssMiB: MB(sorted[Math.floor(sorted.length / 2)]!),
    heapUsedMiB: MB(sample(m, "hookline_nodejs_heap_size_used_bytes")),
    rssAfterGcMiB: MB(op.memory()!.rss),
    heapAfterGcMiB: MB(gc.usedBytes),
  };
}

/** Starts a fresh operator on `ns` `starts` times; the median of each reading. */
async function operatorRss(env: Env, ns: string, name: string, starts: number, expectFinished: number): Promise<RssReading & { syncedMs: number; runs: unknown[] }> {
  const runs: Array<RssReading & { syncedMs: number; readyMs: number; indexed: number }> = [];
  for (let i = 0; i < starts; i++) {
    // A budget above what the phase creates: this measures memory, not eviction.
    const budget = String(Math.max(20_000, expectFinished * 2));
    const op = await startOperator(env, `${name}-${i}`, { WATCH_NAMESPACES: ns, WEBHOOK_MAX_FINISHED_DELIVERIES: budget }, undefined, true);
    const ready = await op.ready(120_000);
    // Finished deliveries are not kept in memory: the leader's first sweep pages through them.
    // Measure after it, so its transient garbage is in the reading too.
    const swept = await op.waitForLog((l) => l.msg === "swept finished deliveries", 60_000, "the first sweep of finished deliveries");
    const indexed = Number(swept.line.seen);
    check(indexed === expectFinished, `memory: the operator's first sweep saw ${indexed} finished deliveries, expected ${expectFinished}`);
    const reading = await settledRss(op);
    await op.stop();
    env.watchdog.remove(op.pid);
    runs.push({ ...reading, syncedMs: round(ready.syncedMs, 0), readyMs: round(ready.readyMs, 0), indexed });
  }
  const median = (f: (r: (typeof runs)[number]) => number) => runs.map(f).sort((a, b) => a - b)[Math.floor(runs.length / 2)]!;
  return {
    rssMiB: median((r) => r.rssMiB),
    heapUsedMiB: median((r) => r.heapUsedMiB),
    rssAfterGcMiB: median((r) => r.rssAfterGcMiB),
    heapAfterGcMiB: median((r) => r.heapAfterGcMiB),
    syncedMs: median((r) => r.syncedMs),
    runs,
  };
}

async function memoryPhase(env: Env): Promise<Record<string, unknown>> {
  const ns = "bench-mem";
  const starts = QUICK ? 1 : 3;
  const subs = subNames(SUBS).map((name) => ({ name, spec: { url: env.receiver.url(`/ok/${ns}/${name}`), retention: { succeeded: "8760h", deadLettered: "8760h" } } }));
  await setupNamespace(env, ns, subs);
  say(`memory: a fresh operator with no finished deliveries${starts > 1 ? ` (median of ${starts} starts)` : ""}`);
  const none = await operatorRss(env, ns, "mem-empty", starts, 0);
  say(`memory: RSS ${none.rssMiB} MiB with none; creating ${FINISHED} finished deliveries (create + status patch)`);
  const client = await kubeClient(env.cp.kubeconfig, C + 4);
  const made = await createFinished({ client, namespace: ns, count: FINISHED, concurrency: C, payloadBytes: PAYLOAD, url: env.receiver.url("/ok/x"), subscriptions: SUBS });
  await client.destroy();
  check(made.errors === 0, `memory: ${made.errors} finished deliveries could not be created`);
  say(`memory: ${FINISHED} finished deliveries in ${round(made.seconds, 1)} s; a fresh operator again`);
  const withFinished = await operatorRss(env, ns, "mem-full", starts, FINISHED - made.errors);
  const growth = round(((withFinished.rssMiB - none.rssMiB) / none.rssMiB) * 100, 1);
  say(`memory: RSS ${withFinished.rssMiB} MiB with ${FINISHED} finished (${growth >= 0 ? "+" : ""}${growth}%); after a full GC ${none.rssAfterGcMiB} → ${withFinished.rssAfterGcMiB} MiB, live heap ${none.heapAfterGcMiB} → ${withFinished.heapAfterGcMiB} MiB`);
  return {
    namespace: ns,
    finishedDeliveries: FINISHED,
    createSeconds: round(made.seconds, 1),
    /** Create + status patch of real WebhookDeliveries with no operator running: the API ceiling's work on Hookline's CRD. */
    createPerSecond: round((FINISHED - made.errors) / made.seconds, 1),
    operatorStarts: starts,
    none,
    withFinished,
    rssGrowthPct: growth,
    rssAfterGcGrowthPct: round(((withFinished.rssAfterGcMiB - none.rssAfterGcMiB) / none.rssAfterGcMiB) * 100, 1),
    /** Live heap per 1,000 finished deliveries (after a full GC in both). */
    heapAfterGcPer1000FinishedKiB: round(((withFinished.heapAfterGcMiB - none.heapAfterGcMiB) * 1024) / (FINISHED / 1000), 0),
  };
}

// ---------------------------------------------------------------------------------------------
// fairness (--fairness): another client's latency beside Hookline at full speed, with and
// without the chart's FlowSchema. Both run as ServiceAccounts: the admin token is exempt.

const FAIR_CONFIGMAPS = 20;
const FAIR_WORKERS = 4;
const FAIR_ALONE_SECONDS = 15;
const FAIR_FLOW_SCHEMA = "bench-hookline";
const FAIR_SMALL_SHARES = 2;

async function fairnessPhase(env: Env): Promise<Record<string, unknown>> {
  const sa = { namespace: "bench-hookline-system", name: "hookline" };
  const opKubeconfig = await serviceAccountKubeconfig(env.admin, env.cp.kubeconfig, sa.namespace, sa.name, join(env.tmp, "kubeconfig-hookline"));
  const otherNs = "bench-other-client";
  const other = await kubeClient(await serviceAccountKubeconfig(env.admin, env.cp.kubeconfig, otherNs, "controller", join(env.tmp, "kubeconfig-other")), FAIR_WORKERS + 2);
  cleanups.push({ what: "other client", run: () => other.destroy() });
  await prepareConfigMaps(other, otherNs, FAIR_CONFIGMAPS);
  const loop = (stop: Promise<unknown>) => clientLoop(other, otherNs, FAIR_CONFIGMAPS, FAIR_WORKERS, stop);
  const show = (r: ClientLoopResult) => `${r.perSecond} req/s, p50 ${r.latencyMs.all.p50} ms, p99 ${r.latencyMs.all.p99} ms (update p99 ${r.latencyMs.update.p99})`;

  say(`fairness: the other client alone for ${FAIR_ALONE_SECONDS} s (${FAIR_WORKERS} loops of get/list/update on ${FAIR_CONFIGMAPS} ConfigMaps)`);
  const alone = await loop(sleep(FAIR_ALONE_SECONDS * 1000));
  say(`fairness: alone: ${show(alone)}`);

  const op = await startOperator(env, "fairness", {}, undefined, false, opKubeconfig);
  await op.ready();
  const beside = async (label: string) => {
    const ns = `bench-fair-${label}`;
    const watch = await deliveryNamespace(env, ns, subNames(SUBS).map((name) => ({ name, spec: { url: env.receiver.url(`/ok/${ns}/${name}`), retention: { succeeded: "0s" } } })));
    await sleep(1_000);
    let finish!: () => void;
    const client = loop(new Promise<void>((r) => (finish = r)));
    const b = await deliverBatch(env, { ns, prefix: `f${label}`, count: N, subscriptionOf: (i) => `sub-${i % SUBS}`, timeoutMs: 120_000 + N * 40, label: `fairness ${label}` }, watch).finally(() => finish());
    const r = await client;
    const rate = round(b.succeeded / ((b.lastSucceededAt - b.produced.firstSentAt) / 1000), 1);
    say(`fairness: beside Hookline (${label}, ${rate} deliveries/s): ${show(r)}`);
    return { client: r, deliveriesPerSecond: rate };
  };
  const dispatched = async () => sample(await apiserverMetrics(env), "apiserver_flowcontrol_dispatched_requests_total", { flow_schema: FAIR_FLOW_SCHEMA });
  const without = await beside("without");
  await applyFlowControl(env.admin, flowControlObjects(FAIR_FLOW_SCHEMA, sa));
  const before = await dispatched();
  const withFs = await beside("with");
  const classified = (await dispatched()) - before;
  check(classified > 0, `fairness: no request was classified by the FlowSchema ${FAIR_FLOW_SCHEMA}`);
  // The same level sized down (flowControl.nominalConcurrencyShares): fewer seats than the
  // operator's concurrency, so its requests queue in their own level.
  await env.admin.request({
    method: "PATCH",
    path: `/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations/${FAIR_FLOW_SCHEMA}`,
    contentType: CONTENT_TYPE.merge,
    body: { spec: { limited: { nominalConcurrencyShares: FAIR_SMALL_SHARES } } },
  });
  const small = await beside("small");
  await op.stop();
  env.watchdog.remove(op.pid);
  return { workers: FAIR_WORKERS, deliveries: N, alone, without, with: withFs, small: { ...small, nominalConcurrencyShares: FAIR_SMALL_SHARES }, operatorRequestsClassifiedByFlowSchema: classified };
}

/** The pending sets of the --memory phase: what a restarted operator (after an OOM kill, say) lists. */
const PENDING_SETS = [
  { key: "none", count: 0, payloadBytes: 0 },
  { key: "small", count: 10_000, payloadBytes: 1024 },
  { key: "large", count: 400, payloadBytes: 250 * 1024 },
] as const;

/**
 * A fresh operator on a namespace whose deliveries all wait on a paused subscription: RSS once
 * every one is cached and reconciled, its peak (VmHWM: the list included), and after a full GC.
 */
async function pendingRss(env: Env, ns: string, name: string, count: number): Promise<RssReading & { peakRssMiB: number; syncedMs: number; reconciledMs: number }> {
  const op = await startOperator(env, name, { WATCH_NAMESPACES: ns }, undefined, true);
  const ready = await op.ready(300_000);
  check(Number(ready.synced.activeDeliveries) === count, `pending memory: the operator cached ${String(ready.synced.activeDeliveries)} pending deliveries, expected ${count}`);
  const t0 = now();
  for (const deadline = Date.now() + 300_000; ; ) {
    const m = await op.metrics();
    if (sample(m, "hookline_reconcile_total", { controller: "delivery" }) >= count && sample(m, "hookline_workqueue_depth", { controller: "delivery" }) === 0) break;
    if (Date.now() > deadline) {
      say("pending memory: the operator is still reconciling; measuring anyway");
      break;
    }
    await sleep(250);
  }
  const reconciledMs = now() - t0;
  const reading = await settledRss(op);
  const peak = op.memory()!.hwm; // VmHWM: the process's peak RSS so far
  await op.stop();
  env.watchdog.remove(op.pid);
  return { ...reading, peakRssMiB: MB(peak), syncedMs: round(ready.syncedMs, 0), reconciledMs: round(reconciledMs, 0) };
}

async function pendingMemoryPhase(env: Env): Promise<Record<string, unknown>> {
  const client = await kubeClient(env.cp.kubeconfig, C + 4);
  const out: Record<string, unknown> = {};
  let base: number | undefined;
  for (const set of PENDING_SETS) {
    const ns = `bench-pending-${set.key}`;
    await setupNamespace(env, ns, [{ name: "held", spec: { url: env.receiver.url(`/ok/${ns}/held`), paused: true } }]);
    if (set.count) {
      say(`pending memory: creating ${set.count} deliveries of ${set.payloadBytes} bytes on a paused subscription`);
      const made = await createPending({ client, namespace: ns, count: set.count, concurrency: set.payloadBytes > 64 * 1024 ? 4 : C, payloadBytes: set.payloadBytes, subscription: "held" });
      check(made.errors === 0, `pending memory: ${made.errors} deliveries could not be created`);
    }
    const r = await pendingRss(env, ns, `pending-${set.key}`, set.count);
    base ??= r.rssMiB;
    say(`pending memory: ${set.count} x ${set.payloadBytes} B: RSS ${r.rssMiB} MiB (+${round(r.rssMiB - base, 1)}), peak ${r.peakRssMiB}, after a full GC ${r.rssAfterGcMiB} (live heap ${r.heapAfterGcMiB}); synced in ${r.syncedMs} ms`);
    out[set.key] = { ...set, namespace: ns, ...r, rssGrowthMiB: round(r.rssMiB - base, 1), peakGrowthMiB: round(r.peakRssMiB - base, 1) };
  }
  await client.destroy();
  return out;
}

// ---------------------------------------------------------------------------------------------
// stream mode (--mode stream): the HTTP ceiling and CR mode's throughput first, in the same run

async function streamMode(env: Env): Promise<Record<string, unknown>> {
  const http = (await httpCeilingPhase(env, "stream")) as Ceilings["http"];
  say(`CR mode beside it: the operator without NATS (leader election on, WEBHOOK_MAX_IN_FLIGHT=${C})`);
  const op = await startOperator(env, "main", {});
  await op.ready();
  const cr = await throughputPhase(env, op);
  const stopped = await op.stop(60_000);
  env.watchdog.remove(op.pid);
  check(stopped.code === 0 && !stopped.killed, `operator: exited with ${JSON.stringify(stopped)} after SIGTERM, expected code 0`);
  const loadCr = loadAverage();
  // --cpu-prof profiles the first stream-mode replica (stream-a), across all its phases.
  const profDir = argv["cpu-prof"] ? join(env.tmp, "profiles") : undefined;
  if (profDir) mkdirSync(profDir, { recursive: true });
  const stream = await streamBench({
    quick: QUICK,
    natsNodes: NATS_NODES,
    tmp: env.tmp,
    count: EVENTS,
    subscriptions: SUBS,
    concurrency: C,
    payloadBytes: PAYLOAD,
    pacedSeconds: PACED_SECONDS,
    receiverUrl: (path) => env.receiver.url(path),
    arrivals: (prefix) => env.receiver.arrivals(prefix),
    arrivalCount: (prefix) => env.receiver.count(prefix),
    receiverPid: env.receiver.child.pid,
    receiverStats: () => env.receiver.stats(),
    setup: (ns, subs) => setupNamespace(env, ns, subs),
    ready: (ns, names) => waitSubscriptionsReady(env.admin, ns, names),
    setPaused: (ns, names, paused) => setSubscriptionsPaused(env.admin, ns, names, paused),
    startOperator: (name, extra) => startOperator(env, name, extra, name === "stream-a" ? profDir : undefined),
    stopOperator: async (o) => {
      const r = await o.stop(60_000);
      env.watchdog.remove(o.pid);
      check(r.code === 0 && !r.killed, `operator ${o.opts.name}: exited with ${JSON.stringify(r)} after SIGTERM, expected code 0`);
    },
    onCleanup: (what, run) => cleanups.push({ what, run }),
    say,
    check,
    crDeliveriesPerSecond: cr.deliveriesPerSecond as number,
    httpCeilingPerSecond: http.perSecond,
  });
  const profFile = profDir ? join(profDir, "stream-a.cpuprofile") : undefined;
  const profile = profFile && existsSync(profFile) ? summarizeProfile(profFile, 30) : undefined;
  if (profFile && !profile) say(`no CPU profile at ${profFile}`);
  // The same profile cut to the stored backlog's drain: the phase held against half the ceiling.
  const w = (stream.backlog as { monotonicUs?: { from: number; to: number } }).monotonicUs;
  const profileBacklog = profile && w ? summarizeProfile(profFile!, 30, { fromUs: w.from, toUs: w.to }) : undefined;
  return { httpCeiling: http, cr: { deliveriesPerSecond: cr.deliveriesPerSecond, deliveries: cr.deliveries, cpuSecondsPer1000: cr.cpuSecondsPer1000, latencyMs: cr.latencyMs, loadAverage: loadCr }, ...stream, ...(profile ? { profile, profileFile: profFile } : {}), ...(profileBacklog ? { profileBacklog } : {}) };
}

function streamTable(r: Record<string, any>): string {
  const s = r.stream;
  const la = (x: number[] | undefined) => (x ? x.join(" ") : "n/a");
  const notes = [
    `| Measure | Value |`,
    `| --- | --- |`,
    `| Stream events per phase; subscriptions; payload | ${fmt(s.events)}; ${fmt(r.config.subscriptions)}, one event type each; ${fmt(r.config.payloadBytes)} bytes |`,
    `| CR mode: deliveries created through the API server (${fmt(s.cr.deliveries)}); CPU-s per 1,000 | ${fmt(s.cr.deliveriesPerSecond)}; ${fmt(s.cr.cpuSecondsPer1000)} |`,
    `| Stream, one replica: publish → receiver p50 / p99 ms at the maximum rate; publishes/s | ${fmt(s.maxRate.publishToReceiverMs.p50)} / ${fmt(s.maxRate.publishToReceiverMs.p99)}; ${fmt(s.maxRate.publishPerSecond)} |`,
    `| Stream at half the rate (${fmt(s.halfRate.targetRate)}/s): publish → receiver p50 / p95 / p99 ms; publish acknowledged p50 / p99 ms | ${pct(s.halfRate.publishToReceiverMs)}; ${fmt(s.halfRate.publishAckMs.p50)} / ${fmt(s.halfRate.publishAckMs.p99)} |`,
    `| Two replicas: deliveries per replica | ${s.twoReplicas.perReplica.map(fmt).join(" / ")} |`,
    ...(s.backlog.machine
      ? [
          `| Stored backlog, CPU-s per 1,000 deliveries: operator / nats-server / receiver / the rest / the whole machine | ${fmt(s.backlog.machine.operator)} / ${fmt(s.backlog.machine.natsServer)} / ${fmt(s.backlog.machine.receiver)} / ${fmt(s.backlog.machine.rest)} / ${fmt(s.backlog.machine.machine)} |`,
          `| Stored backlog: the operator's read / write system calls per delivery | ${fmt(s.backlog.machine.operatorReadsPerDelivery)} / ${fmt(s.backlog.machine.operatorWritesPerDelivery)} |`,
          `| The machine's ${fmt(s.backlog.machine.cores)} cores all busy at that cost: deliveries/s, of the HTTP ceiling; half the ceiling needs at most (machine CPU-s per 1,000) | ${fmt(s.backlog.machine.atMostPerSecond)}, ${fmt(s.backlog.machine.atMostOfCeiling)}; ${fmt(s.backlog.machine.halfCeilingNeedsPer1000)} |`,
          ...(s.httpCeiling?.cpuSecondsPer1000
            ? [
                `| The HTTP ceiling, CPU-s per 1,000 signed POSTs: client / receiver / the rest / the whole machine | ${fmt(s.httpCeiling.cpuSecondsPer1000.client)} / ${fmt(s.httpCeiling.cpuSecondsPer1000.receiver)} / ${fmt(s.httpCeiling.cpuSecondsPer1000.rest)} / ${fmt(s.httpCeiling.cpuSecondsPer1000.machine)} |`,
                `| Half the ceiling leaves the operator (CPU-s per 1,000), beside what the ceiling's client alone spends on a bare signed POST | ${fmt(s.backlog.machine.operatorRoomPer1000)}; ${fmt(s.httpCeiling.cpuSecondsPer1000.client)} |`,
              ]
            : []),
        ]
      : []),
    `| Load average (1/5/15 min): start; after CR mode; after stream max rate; half rate; two replicas; end | ${la(r.machine.loadAverageAtStart)}; ${la(s.cr.loadAverage)}; ${la(s.maxRate.loadAverage)}; ${la(s.halfRate.loadAverage)}; ${la(s.twoReplicas.loadAverage)}; ${la(r.machine.loadAverageAtEnd)} |`,
    `| Machine; run time | ${r.machine.cores} cores ${r.machine.cpu}, nats-server ${s.nats.version}${s.nats.nodes > 1 ? ` (${s.nats.nodes} nodes, streams at R${s.nats.replicas})` : ""}; ${fmt(r.durationSeconds)} s |`,
    `| Commit measured | ${r.git.commit}${r.git.srcDirty ? " + uncommitted changes in src/" : ""} |`,
  ];
  return `${goalTable(s.goals)}\n\n${notes.join("\n")}`;
}

// ---------------------------------------------------------------------------------------------
// report

const fmt = (x: unknown) => (typeof x === "number" ? (Number.isFinite(x) ? String(x) : "n/a") : String(x));
const pct = (p: Percentiles) => `${fmt(p.p50)} / ${fmt(p.p95)} / ${fmt(p.p99)}`;

 
function table(r: Record<string, any>): string {
  if (r.stream) return streamTable(r);
  const rows: Array<[string, string]> = [];
  const t = r.throughput;
  const c = r.ceilings;
  if (t) {
    rows.push([`Deliveries/s (first create → last Succeeded, ${t.deliveries} deliveries)`, `**${fmt(t.deliveriesPerSecond)}**`]);
    if (c) rows.push([`… as a fraction of the HTTP ceiling (${fmt(c.httpPerSecond)} signed POSTs/s)`, `${fmt(r.fractions.ofHttpCeiling)}`]);
    if (c) rows.push([`… as a fraction of the API ceiling (${fmt(c.apiWritesPerSecond)} writes/s ÷ ${fmt(t.writesPerDelivery)} writes per delivery = ${fmt(r.fractions.apiBoundDeliveriesPerSecond)}/s)`, `${fmt(r.fractions.ofApiCeiling)}`]);
    rows.push(["Producer creates/s (as fast as the API server accepts, " + `${r.config.concurrency} in flight)`, fmt(t.producer.createRate)]);
    rows.push(["Create → receiver, p50 / p95 / p99 ms", pct(t.latencyMs.createToReceiver)]);
    rows.push(["Create → Succeeded (watch), p50 / p95 / p99 ms", pct(t.latencyMs.createToSucceeded)]);
    rows.push(["API requests per delivery (operator), by verb", Object.entries(t.apiRequestsPerDelivery).map(([v, n]) => `${v} ${fmt(n)}`).join(", ")]);
    rows.push(["API writes per delivery (producer create + operator; final delete included)", `${fmt(t.writesPerDelivery)} (operator ${fmt(t.operatorWritesPerDelivery)}, of which status patches ${fmt(t.statusPatchesPerDelivery)})`]);
    rows.push(["Operator CPU seconds per 1,000 deliveries", fmt(t.cpuSecondsPer1000)]);
    rows.push(["Operator peak RSS (MiB; growth per 1,000 deliveries)", `${fmt(t.peakRssMiB)} (from ${fmt(t.rssBeforeMiB)}; +${fmt(t.peakRssGrowthPer1000MiB)})`]);
    rows.push(["Operator event-loop delay p99 / max (ms)", `${fmt(t.eventLoopLagP99Ms)} / ${fmt(t.eventLoopLagMaxMs)}`]);
    rows.push([
      "API server / etcd CPU seconds per 1,000 deliveries (API ceiling: per 1,000 items)",
      `${fmt(t.controlPlane.apiserverCpuSecondsPer1000)} / ${fmt(t.controlPlane.etcdCpuSecondsPer1000)}${c ? ` (${fmt(c.before.api.controlPlane.apiserverCpuSecondsPer1000)} / ${fmt(c.before.api.controlPlane.etcdCpuSecondsPer1000)})` : ""}`,
    ]);
    rows.push([
      "Watches on deliveries the API server closed as too slow (all clients); re-opened by the operator / by the benchmark",
      `${fmt(t.controlPlane.watchersTerminatedAsUnresponsive)}; ${fmt(t.apiRequestsByResource["watch webhookdeliveries"] ?? 0)} / ${fmt(t.benchWatchReopened)}`,
    ]);
    rows.push(["Operator log lines per delivery; API server connections opened (≥)", `${fmt(t.logLinesPerDelivery)}; ${fmt(t.apiConnectionsSeen)}`]);
  }
  const k = r.throughputKept;
  if (t && k) {
    rows.push([
      `Two-write path (retention.succeeded 0s: create, delete) vs three-write path (1s: create, Succeeded, delete): deliveries/s; writes per delivery`,
      `**${fmt(t.deliveriesPerSecond)}** vs ${fmt(k.deliveriesPerSecond)}; ${fmt(t.writesPerDelivery)} vs ${fmt(k.writesPerDelivery)}`,
    ]);
  }
  const p = r.halfRate;
  if (p) {
    rows.push([`At half the rate (${fmt(p.targetRate)}/s): create → receiver p50 / p95 / p99 ms`, pct(p.latencyMs.createToReceiver)]);
    rows.push([`At half the rate: create → Succeeded p50 / p95 / p99 ms`, pct(p.latencyMs.createToSucceeded)]);
  }
  const h = r.hang;
  if (h) {
    rows.push([`Healthy endpoint alone (${fmt(h.rate)}/s): create → receiver p50 / p99 ms, before and after`, `${fmt(h.alone.latencyMs.createToReceiver.p50)} / ${fmt(h.alone.latencyMs.createToReceiver.p99)}; ${fmt(h.aloneAgain.latencyMs.createToReceiver.p50)} / ${fmt(h.aloneAgain.latencyMs.createToReceiver.p99)}`]);
    rows.push([`… while another endpoint hangs (${h.hangingInFlight} requests hanging, ${h.hangingPending} pending)`, `${fmt(h.duringHang.latencyMs.createToReceiver.p50)} / ${fmt(h.duringHang.latencyMs.createToReceiver.p99)} (×${fmt(h.ratio.p50)} / ×${fmt(h.ratio.p99)})`]);
  }
  const tn = r.tenant;
  if (tn) {
    rows.push([`Healthy namespace alone (${fmt(tn.rate)}/s): create → receiver p50 / p99 ms, before and after`, `${fmt(tn.alone.latencyMs.createToReceiver.p50)} / ${fmt(tn.alone.latencyMs.createToReceiver.p99)}; ${fmt(tn.aloneAgain.latencyMs.createToReceiver.p50)} / ${fmt(tn.aloneAgain.latencyMs.createToReceiver.p99)}`]);
    rows.push([`… while another namespace's ${tn.hangingSubscriptions} endpoints hang (${tn.hangingInFlightAtStart} of ${r.config.concurrency} global slots, ${tn.hangingPending} deliveries, timeout ${tn.hangingTimeoutSeconds} s)`, `${fmt(tn.duringHang.latencyMs.createToReceiver.p50)} / ${fmt(tn.duringHang.latencyMs.createToReceiver.p99)}`]);
  }
  const m = r.memory;
  const signed = (x: number) => `${x >= 0 ? "+" : ""}${fmt(x)}`;
  if (m) {
    rows.push([`Operator RSS after start and sync: none → ${m.finishedDeliveries} finished deliveries in etcd (MiB, median of ${m.operatorStarts})`, `${fmt(m.none.rssMiB)} → ${fmt(m.withFinished.rssMiB)} (${signed(m.rssGrowthPct)}%)`]);
    rows.push([`… after a forced full GC: RSS; live heap (per 1,000 finished)`, `${fmt(m.none.rssAfterGcMiB)} → ${fmt(m.withFinished.rssAfterGcMiB)} MiB (${signed(m.rssAfterGcGrowthPct)}%); ${fmt(m.none.heapAfterGcMiB)} → ${fmt(m.withFinished.heapAfterGcMiB)} MiB (${fmt(m.heapAfterGcPer1000FinishedKiB)} KiB)`]);
  }
  const pm = r.pendingMemory;
  if (pm) {
    for (const k of ["small", "large"]) {
      const x = pm[k];
      rows.push([`Operator RSS with ${x.count} pending ${x.payloadBytes / 1024} KiB deliveries vs none: settled; peak (MiB)`, `${fmt(x.rssMiB)} vs ${fmt(pm.none.rssMiB)} (**${signed(x.rssGrowthMiB)}**); peak ${fmt(x.peakRssMiB)} (${signed(x.peakGrowthMiB)}); synced in ${fmt(x.syncedMs)} ms`]);
    }
  }
  if (r.capacity) rows.push(...capacityRows(r.capacity));
  const sh = r.shapes;
  if (sh) {
    const backlogRow = (b: Record<string, any>): [string, string] => [`Backlog of ${b.deliveries} released at once (maxInFlight ${b.maxInFlight}${b.keptPayloads === false ? ", no payload kept" : ""}): deliveries/s; of the API ceiling for ${fmt(b.operatorWritesPerDelivery)} writes each; payload GETs per delivery; slot time (payload GET x GETs + request + delete ms) and the rate it allows; first attempt; RSS held / peak`, `**${fmt(b.deliveriesPerSecond)}**; ${fmt(b.fractionOfApiCeiling)}; ${fmt(b.deliveryGetsPerDelivery)}; ${fmt(b.meanMs?.payloadGet)} + ${fmt(b.meanMs?.attempt)} + ${fmt(b.meanMs?.delete)} → ${fmt(b.slotBoundPerSecond)}/s; ${fmt(b.timeToFirstAttemptMs)} ms; ${fmt(b.rssHeldMiB)} / ${fmt(b.peakRssMiB)} MiB`];
    for (const b of sh.backlog) rows.push(backlogRow(b));
    if (sh.backlogWiderSlots) rows.push(backlogRow(sh.backlogWiderSlots));
    if (sh.backlogNotKept) rows.push(backlogRow(sh.backlogNotKept));
    for (const x of sh.subscriptions) rows.push([`${x.subscriptions} subscriptions sharing ${x.deliveries} deliveries: deliveries/s; operator writes per delivery (rollups); CPU-s per 1,000`, `${fmt(x.deliveriesPerSecond)}; ${fmt(x.operatorWritesPerDelivery)} (${fmt(x.subscriptionRollupsPerDelivery)}); ${fmt(x.cpuSecondsPer1000)}`]);
    for (const x of sh.fanout) rows.push([`Fan-out of one event to ${x.subscriptions} subscriptions (${x.events} events): publish p50 / p99 ms; deliveries/s`, `${fmt(x.publishLatencyMs.p50)} / ${fmt(x.publishLatencyMs.p99)}; ${fmt(x.deliveriesPerSecond)}`]);
    for (const x of sh.payload) rows.push([`Payload ${x.payloadBytes / 1024} KiB (${x.deliveries}): deliveries/s; API server / etcd CPU-s per 1,000; operator peak RSS`, `${fmt(x.deliveriesPerSecond)}; ${fmt(x.apiserverCpuSecondsPer1000)} / ${fmt(x.etcdCpuSecondsPer1000)}; ${fmt(x.peakRssMiB)} MiB`]);
    for (const x of sh.cold) rows.push([`Cold start with ${x.deliveries} pending: ready; first attempt; peak RSS; attempted twice`, `${fmt(x.readyMs)} ms; ${fmt(x.timeToFirstAttemptMs)} ms; ${fmt(x.peakRssMiB)} MiB; ${fmt(x.duplicates)}`]);
    for (const [k, v] of Object.entries(sh.curves as Record<string, { exponent: number; per10x: number } | undefined>)) if (v) rows.push([`Cost curve ${k}: exponent (1 = linear); ratio per 10x`, `${fmt(v.exponent)}; ×${fmt(v.per10x)}`]);
  }
  const f = r.fairness;
  if (f) {
    const c = (x: ClientLoopResult) => `${fmt(x.latencyMs.all.p50)} / ${fmt(x.latencyMs.all.p99)} (${fmt(x.perSecond)} req/s)`;
    rows.push([`Another client's get/list/update on ConfigMaps (${f.workers} loops), p50 / p99 ms: alone`, c(f.alone)]);
    rows.push([`… while Hookline delivers ${f.deliveries} at full speed, no FlowSchema (${fmt(f.without.deliveriesPerSecond)} deliveries/s)`, `**${c(f.without.client)}**`]);
    rows.push([`… the same with the chart's FlowSchema + PriorityLevelConfiguration (${fmt(f.with.deliveriesPerSecond)} deliveries/s; ${fmt(f.operatorRequestsClassifiedByFlowSchema)} operator requests classified by it)`, `**${c(f.with.client)}**`]);
    if (f.small) rows.push([`… with the level sized down to nominalConcurrencyShares ${fmt(f.small.nominalConcurrencyShares)} (${fmt(f.small.deliveriesPerSecond)} deliveries/s)`, `**${c(f.small.client)}**`]);
  }
  if (c) {
    const when = r.mode === "quick" ? "before Hookline (quick: once)" : "before / after Hookline";
    const two = (a: unknown, b: unknown) => (r.mode === "quick" ? fmt(a) : `${fmt(a)} / ${fmt(b)}`);
    rows.push([`HTTP ceiling: signed POSTs/s (${r.config.concurrency} in flight), ${when}`, `${two(c.before.http.perSecond, c.after.http.perSecond)} (p99 ${two(c.before.http.latencyMs.p99, c.after.http.latencyMs.p99)} ms)`]);
    rows.push([`API ceiling: create + status patch per s (${r.config.concurrency} in flight), ${when}`, `${two(c.before.api.itemsPerSecond, c.after.api.itemsPerSecond)} items/s = ${two(c.before.api.writesPerSecond, c.after.api.writesPerSecond)} writes/s`]);
    if (m) rows.push([`… the same on WebhookDeliveries with no operator (memory phase, ${m.finishedDeliveries} items)`, `${fmt(m.createPerSecond)} items/s`]);
  }
  rows.push(["Load average (1 min) at start / end; run time", `${fmt(r.machine.loadAverageAtStart[0])} / ${fmt(r.machine.loadAverageAtEnd[0])}; ${fmt(r.durationSeconds)} s`]);
  rows.push(["Commit measured", `${r.git.commit}${r.git.srcDirty ? " + uncommitted changes in src/" : ""}`]);
  return ["| Measure | Value |", "| --- | --- |", ...rows.map(([k, v]) => `| ${k} | ${v} |`)].join("\n");
}

// ---------------------------------------------------------------------------------------------
// main

async function main(): Promise<number> {
  const tmp = await mkdtemp(join(tmpdir(), "hookline-bench-"));
  cleanups.push({
    what: "temp dir",
    run: async () => {
      if (argv.keep || failures.length) say(`kept ${tmp} (logs, control plane data)`);
      else await rm(tmp, { recursive: true, force: true });
    },
  });
  const watchdog = new Watchdog(join(tmp, "children.json"));
  cleanups.push({ what: "watchdog", run: () => watchdog.stop() });
  const load0 = loadAverage();
  say(`${argv.mode === "stream" ? "stream " : ""}${argv.fairness ? "fairness" : argv.capacity ? "capacity" : argv.memory ? "memory" : QUICK ? "quick" : "full"} run in ${tmp}; load average ${load0.join(" ")}`);

  const { binDir } = await ensureBinaries({ env: process.env, onProgress: (l) => (/binaries present/.test(l) ? undefined : say(l)) });
  const cpDir = join(tmp, "cluster");
  cleanups.push({ what: "control plane", run: () => stopControlPlane(cpDir) });
  const cp = await startControlPlane({
    dir: cpDir,
    binDir,
    attachToParent: true,
    env: process.env,
    beforeControllerManager: async (info) => {
      const kc = new KubeConfig();
      kc.loadFromFile(info.kubeconfig);
      const client = await KubeClient.create(kc);
      try {
        await installCrds(client);
        const crd = benchItemCrd();
        await client.request({ method: "PATCH", path: `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`, query: { fieldManager: "hookline-bench", force: true }, contentType: CONTENT_TYPE.apply, body: crd });
        for (const deadline = Date.now() + 60_000; ; ) {
          const disc = await client.request<{ resources?: Array<{ name: string }> }>({ method: "GET", path: `/apis/${crd.spec.group}/v1` }).catch(() => undefined);
          if (disc?.resources?.some((r) => r.name === crd.spec.names.plural)) break;
          if (Date.now() > deadline) throw new Error("benchitems CRD not served within 60 s");
          await sleep(100);
        }
      } finally {
        await client.destroy();
      }
    },
  });
  say(`control plane ${cp.version} (etcd ${cp.etcdVersion}) at ${cp.server}`);
  const admin = await kubeClient(cp.kubeconfig, 8);
  cleanups.push({ what: "admin client", run: () => admin.destroy() });
  const receiver = await ReceiverProcess.start(tmp);
  watchdog.add(receiver.child.pid);
  cleanups.push({ what: "receiver", run: () => receiver.stop() });
  const env: Env = { cp, cpDir, admin, receiver, watchdog, tmp };

  const m = machine();
  Object.assign(results, {
    hookline: HOOKLINE_VERSION,
    git: GIT,
    startedAt: new Date(started).toISOString(),
    mode: QUICK ? "quick" : "full",
    machine: { ...m, node: process.version, kubernetes: cp.version, etcd: cp.etcdVersion, loadAverageAtStart: load0 },
    config: { deliveries: N, ...(argv.mode === "stream" ? { streamEvents: EVENTS } : {}), subscriptions: SUBS, concurrency: C, operatorMaxInFlight: C, subscriptionMaxInFlight: 10, payloadBytes: PAYLOAD, finishedDeliveries: FINISHED, cpuProfile: argv["cpu-prof"], leaderElection: true, operatorNodeOptions: argv["node-options"] || undefined, tag: argv.tag || undefined },
  });

  if (argv.fairness) {
    results.mode = "fairness";
    results.fairness = await fairnessPhase(env);
    return finish();
  }
  if (argv.shapes) {
    results.mode = QUICK ? "shapes-quick" : "shapes";
    const api = await apiCeilingPhase(env, "shapes");
    results.shapesApiCeiling = api;
    results.shapes = await shapes({
      quick: QUICK,
      only: ONLY,
      admin,
      client: () => kubeClient(cp.kubeconfig, C + 4),
      concurrency: C,
      receiverUrl: (path) => receiver.url(path),
      arrivals: (prefix) => receiver.arrivals(prefix),
      apiWritesPerSecond: api.writesPerSecond,
      say,
      check,
      startOperator: (name, extra = {}) => startOperator(env, name, extra),
      stopOperator: async (op) => {
        const stopped = await op.stop(60_000);
        env.watchdog.remove(op.pid);
        check(stopped.code === 0 && !stopped.killed, `operator: exited with ${JSON.stringify(stopped)} after SIGTERM, expected code 0`);
      },
      setup: (ns, subs) => setupNamespace(env, ns, subs),
      namespace: (ns, subs) => deliveryNamespace(env, ns, subs),
      patchSubscription: async (ns, name, spec) => {
        await admin.request({ method: "PATCH", path: `${collectionPath(SUBSCRIPTIONS, ns)}/${name}`, contentType: CONTENT_TYPE.merge, body: { spec } });
      },
      publish: async (ns, event) => {
        const t0 = now();
        const r = await publishEvent(admin, { namespace: ns, ...event });
        return { ms: round(now() - t0, 2), deliveries: r.deliveries.length };
      },
      controlPlaneCpu: () => controlPlaneCpu(env),
      apiPort: apiPort(env),
    });
    return finish();
  }
  if (argv.mode === "stream") {
    results.mode = QUICK ? "stream-quick" : "stream";
    results.stream = await streamMode(env);
    const s = results.stream as { profile?: ProfileSummary; profileBacklog?: ProfileSummary; profileFile?: string };
    return finish(s.profile, s.profileFile, s.profileBacklog);
  }
  if (argv.capacity) {
    results.mode = "capacity";
    const producer = await kubeClient(cp.kubeconfig, C + 4);
    cleanups.push({ what: "producer client", run: () => producer.destroy() });
    results.capacity = await capacityPhase({
      cpDir,
      admin,
      producer,
      concurrency: C,
      setup: (ns, paused) => setupNamespace(env, ns, [{ name: "sub-0", spec: { url: receiver.url(`/ok/${ns}/sub-0`), paused } }]),
      url: (ns) => receiver.url(`/ok/${ns}/sub-0`),
      say,
      check,
    });
    return finish();
  }
  if (argv.memory) {
    results.mode = "memory";
    results.pendingMemory = await pendingMemoryPhase(env);
    return finish();
  }
  const before = SKIP.has("ceilings") ? undefined : await ceilings(env, "before");

  const profDir = argv["cpu-prof"] ? join(tmp, "profiles") : undefined;
  if (profDir) mkdirSync(profDir, { recursive: true });
  say(`starting the operator (leader election on, WEBHOOK_MAX_IN_FLIGHT=${C}${profDir ? ", --cpu-prof" : ""})`);
  const op = await startOperator(env, "main", {}, profDir);
  const ready = await op.ready();
  say(`operator ready in ${round(ready.readyMs, 0)} ms (caches synced ${round(ready.syncedMs, 0)} ms, leader ${round(ready.leaderMs, 0)} ms)`);
  const t = SKIP.has("throughput") ? undefined : await throughputPhase(env, op);
  if (t) results.throughput = t;
  // The same load with Succeeded kept for 1 s: the three-write path beside the two-write one.
  const kept = SKIP.has("throughput") ? undefined : await throughputPhase(env, op, "1s");
  if (kept) results.throughputKept = kept;
  // Without the throughput phase, the latency phases run at --rate × 2 (they use half the rate).
  const rate = t ? (t.deliveriesPerSecond as number) : Number(argv.rate) * 2;
  if (!SKIP.has("paced")) results.halfRate = await pacedPhase(env, op, Math.max(1, rate / 2));
  if (!SKIP.has("hang")) results.hang = await hangPhase(env, op, Math.max(1, Math.min(50, rate / 2)));
  if (!SKIP.has("tenant")) results.tenant = await tenantPhase(env, op, Math.max(1, Math.min(50, rate / 2)));
  const stopped = await op.stop(60_000);
  env.watchdog.remove(op.pid);
  check(stopped.code === 0 && !stopped.killed, `operator: exited with ${JSON.stringify(stopped)} after SIGTERM, expected code 0`);
  say(`operator stopped in ${round(stopped.ms, 0)} ms (code ${stopped.code})`);

  let profile: ProfileSummary | undefined;
  if (profDir) {
    const file = join(profDir, "main.cpuprofile");
    if (existsSync(file)) {
      profile = summarizeProfile(file, 30);
      results.profile = profile;
    } else say(`no CPU profile at ${file}`);
  }

  // The machine is shared: measure the ceilings again after Hookline ran and use the mean
  // (not in quick mode, which is a smoke test with a time budget).
  const after = before && !QUICK ? await ceilings(env, "after") : before;
  if (before && after) {
    const mean = (a: number, b: number) => round((a + b) / 2, 1);
    const c = {
      before,
      after,
      httpPerSecond: mean(before.http.perSecond, after.http.perSecond),
      apiItemsPerSecond: mean(before.api.itemsPerSecond, after.api.itemsPerSecond),
      apiWritesPerSecond: mean(before.api.writesPerSecond, after.api.writesPerSecond),
    };
    results.ceilings = c;
    const bound = t ? c.apiWritesPerSecond / (t.writesPerDelivery as number) : NaN;
    results.fractions = {
      ofHttpCeiling: round(rate / c.httpPerSecond, 3),
      apiBoundDeliveriesPerSecond: round(bound, 1),
      ofApiCeiling: round(rate / bound, 3),
    };
  }

  if (!SKIP.has("memory")) results.memory = await memoryPhase(env);

  return finish(profile, profDir ? join(profDir, "main.cpuprofile") : undefined);
}

/** Prints the table and saves the results (as <time>-<mode>.json and latest-<mode>.json; latest.json for full and quick runs); the exit code. */
function finish(profile?: ProfileSummary, profFile?: string, profilePart?: ProfileSummary): number {
  const mode = String(results.mode);
  results.machine = { ...(results.machine as object), loadAverageAtEnd: loadAverage() };
  results.durationSeconds = round((now() - started) / 1000, 1);
  results.correctness = { ok: failures.length === 0, failures };

  const text = table(results);
  process.stdout.write(`\n${text}\n\n`);
  if (profile) process.stdout.write(`${formatProfile(profile, 25)}\n\n`);
  if (profilePart) process.stdout.write(`The stored backlog's drain alone:\n\n${formatProfile(profilePart, 25)}\n\n`);
  if (!argv["no-save"]) {
    const dir = join(ROOT, "bench", "results");
    mkdirSync(dir, { recursive: true });
    const stamp = new Date(started).toISOString().replace(/[:]/g, "-").replace(/\.\d+Z$/, "Z");
    const json = `${JSON.stringify(results, null, 2)}\n`;
    const file = join(dir, `${stamp}-${mode}${argv.tag ? `-${argv.tag}` : ""}.json`);
    writeFileSync(file, json);
    if (!argv.tag) {
      if (!["memory", "capacity", "fairness", "shapes", "shapes-quick", "stream", "stream-quick"].includes(mode)) writeFileSync(join(dir, "latest.json"), json);
      writeFileSync(join(dir, `latest-${mode}.json`), json);
    }
    if (profFile && existsSync(profFile)) {
      mkdirSync(join(dir, "profiles"), { recursive: true });
      copyFileSync(profFile, join(dir, "profiles", `${stamp}-${mode}${argv.tag ? `-${argv.tag}` : ""}.cpuprofile`));
    }
    say(`results: ${file.slice(ROOT.length)}${argv.tag ? "" : " (and latest.json)"}`);
  }
  say(`done in ${round((now() - started) / 1000, 1)} s; correctness ${failures.length ? `FAILED (${failures.length})` : "ok"}`);
  return failures.length ? 1 : 0;
}

void main()
  .catch((err: Error) => {
    say(`benchmark failed: ${err.stack ?? err.message}`);
    return 2;
  })
  .then(async (code) => {
    await cleanup();
    process.exit(code);
  });
