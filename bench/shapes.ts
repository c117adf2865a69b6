// `npm run bench -- --shapes`: Hookline at the shapes users run, each beside the API ceiling
// measured in the same run, and how the cost grows with the work (docs/performance.md):
//   backlog   N pending deliveries on one subscription released at once (unpause), N = 1k/10k/50k
//   subs      the same total load over 10 / 100 / 1,000 subscriptions
//   fanout    one published event to 1 / 10 / 100 matching subscriptions
//   payload   1 KiB / 16 KiB / 256 KiB payloads
//   cold      100,000 pending deliveries in the API server when the operator starts
// Each shape reports its numbers and a cost curve: the exponent of a least-squares fit of
// log(cost) on log(N) (1 = linear), and the ratio per 10x.
import { createPending, produce } from "./lib/producer.js";
import { now, percentiles, round, sample, sleep, type Percentiles } from "./lib/util.js";
import type { OperatorProcess } from "./lib/procs.js";
import type { DeliveryWatch } from "./lib/kube.js";
import type { KubeClient } from "../src/kube/client.js";
import type { SubscriptionSpecInput } from "../src/api/subscription.js";

/** What run.ts lends the shapes (its helpers, so every phase measures the same way). */
export interface ShapesContext {
  quick: boolean;
  admin: KubeClient;
  client: () => Promise<KubeClient>;
  concurrency: number;
  receiverUrl: (path: string) => string;
  arrivals: (prefix: string) => Promise<Map<string, { at: number; count: number }>>;
  /** The API ceiling measured in this run: writes/s. */
  apiWritesPerSecond: number;
  say: (line: string) => void;
  check: (ok: boolean, message: string) => void;
  startOperator: (name: string, env?: Record<string, string>) => Promise<OperatorProcess>;
  stopOperator: (op: OperatorProcess) => Promise<void>;
  /** A namespace with these subscriptions (no operator needed). */
  setup: (ns: string, subs: Array<{ name: string; spec: Partial<SubscriptionSpecInput> & { url: string } }>) => Promise<void>;
  /** A namespace with these subscriptions, Ready, and a watch of its deliveries. */
  namespace: (ns: string, subs: Array<{ name: string; spec: Partial<SubscriptionSpecInput> & { url: string } }>) => Promise<DeliveryWatch>;
  patchSubscription: (ns: string, name: string, spec: Record<string, unknown>) => Promise<void>;
  publish: (ns: string, event: { type: string; id: string; data: unknown }) => Promise<{ ms: number; deliveries: number }>;
  controlPlaneCpu: () => { apiserver: number; etcd: number };
  apiPort: number;
  /** Only these shapes (backlog, subscriptions, fanout, payload, cold); all when empty. */
  only?: string[];
}

export interface CurvePoint {
  n: number;
  cost: number;
}

/** The exponent b of cost = a * n^b (least squares on logs) and the cost ratio per 10x of n. */
export function costCurve(points: CurvePoint[]): { exponent: number; per10x: number } | undefined {
  const ps = points.filter((p) => p.n > 0 && p.cost > 0);
  if (ps.length < 2) return undefined;
  const xs = ps.map((p) => Math.log10(p.n));
  const ys = ps.map((p) => Math.log10(p.cost));
  const mx = xs.reduce((a, b) => a + b, 0) / xs.length;
  const my = ys.reduce((a, b) => a + b, 0) / ys.length;
  let num = 0;
  let den = 0;
  for (let i = 0; i < xs.length; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  const b = den === 0 ? 0 : num / den;
  return { exponent: round(b, 3), per10x: round(10 ** b, 2) };
}

const operatorWrites = (m: string) => ["create", "update", "patch", "delete"].reduce((n, verb) => n + sample(m, "hookline_kube_api_requests_total", { verb }), 0);
const cpuOf = (m: string) => sample(m, "hookline_process_cpu_seconds_total");

/** Mean latency (ms) of the operator's API requests of one verb (and resource) between two scrapes. */
function meanApiMs(before: string, after: string, labels: Record<string, string>): number {
  const d = (name: string) => sample(after, name, labels) - sample(before, name, labels);
  const n = d("hookline_kube_api_request_duration_seconds_count");
  return n > 0 ? round((d("hookline_kube_api_request_duration_seconds_sum") / n) * 1000, 1) : 0;
}

/** How much a counter grew between two scrapes. */
function delta(before: string, after: string, name: string, labels: Record<string, string> = {}): number {
  return sample(after, name, labels) - sample(before, name, labels);
}

/** Mean attempt duration (ms: the webhook request) between two scrapes. */
function meanAttemptMs(before: string, after: string): number {
  const d = (name: string) => sample(after, name) - sample(before, name);
  const n = d("webhook_delivery_duration_seconds_count");
  return n > 0 ? round((d("webhook_delivery_duration_seconds_sum") / n) * 1000, 1) : 0;
}

/** Waits until the operator's cache holds `n` active deliveries of `ns/sub`. */
async function cached(op: OperatorProcess, ns: string, sub: string, n: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const m = await op.metrics();
    if (sample(m, "webhook_subscription_backlog", { namespace: ns, subscription: sub }) >= n) return true;
    await sleep(250);
  }
  return false;
}

async function waitArrivals(ctx: ShapesContext, prefix: string, n: number, timeoutMs: number): Promise<Map<string, { at: number; count: number }>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const a = await ctx.arrivals(prefix);
    if (a.size >= n || Date.now() > deadline) return a;
    await sleep(250);
  }
}

/** 1. N pending deliveries on one subscription, held (paused), released at once. */
export async function backlogShape(ctx: ShapesContext, ns: string, n: number, maxInFlight = 50, keptPayloads = true): Promise<Record<string, unknown>> {
  const sub = "drain";
  // Webhook ids are unique per row (the receiver keeps every phase's arrivals).
  const prefix = `bl${n}${maxInFlight === 50 ? "" : `m${maxInFlight}`}${keptPayloads ? "" : "nk"}`;
  const spec = { url: ctx.receiverUrl(`/ok/${ns}/${sub}`), maxInFlight, retention: { succeeded: "0s" }, paused: true } as const;
  await ctx.setup(ns, [{ name: sub, spec }]);
  const client = await ctx.client();
  try {
    ctx.say(`backlog: creating ${n} pending deliveries on a paused subscription`);
    const made = await createPending({ client, namespace: ns, count: n, concurrency: ctx.concurrency, payloadBytes: 1024, subscription: sub, prefix });
    ctx.check(made.errors === 0, `backlog ${n}: ${made.errors} creates failed`);
  } finally {
    await client.destroy();
  }
  const op = await ctx.startOperator(`backlog-${n}`, { WEBHOOK_MAX_IN_FLIGHT: "100", ...(keptPayloads ? {} : { HOOKLINE_PAYLOAD_CACHE_BYTES: "0" }) });
  try {
    const ready = await op.ready(300_000);
    ctx.check(await cached(op, ns, sub, n, 120_000), `backlog ${n}: the operator did not report ${n} pending`);
    await sleep(2_000);
    op.sample(ctx.apiPort);
    const rssHeld = op.memory()!.rss;
    const before = await op.metrics();
    const cp0 = ctx.controlPlaneCpu();
    const t0 = now();
    await ctx.patchSubscription(ns, sub, { paused: false });
    const arrivals = await waitArrivals(ctx, `${prefix}-`, n, 60_000 + n * 20);
    const first = Math.min(...[...arrivals.values()].map((a) => a.at));
    const last = Math.max(...[...arrivals.values()].map((a) => a.at));
    await sleep(1_000);
    const after = await op.metrics();
    const cp1 = ctx.controlPlaneCpu();
    op.stopSampling();
    const duplicates = [...arrivals.values()].filter((a) => a.count > 1).length;
    ctx.check(arrivals.size === n, `backlog ${n}: ${arrivals.size} of ${n} delivered`);
    ctx.check(duplicates === 0, `backlog ${n}: ${duplicates} webhook ids arrived twice`);
    const seconds = (last - t0) / 1000;
    const writes = operatorWrites(after) - operatorWrites(before);
    const statusPatches = sample(after, "hookline_kube_api_requests_total", { verb: "patch", resource: "webhookdeliveries/status" }) - sample(before, "hookline_kube_api_requests_total", { verb: "patch", resource: "webhookdeliveries/status" });
    const writesPerDelivery = writes / n;
    const rate = n / seconds;
    const bound = ctx.apiWritesPerSecond / Math.max(writesPerDelivery, 1e-9);
    const out = {
      deliveries: n,
      maxInFlight,
      /** Whether the operator kept payloads (HOOKLINE_PAYLOAD_CACHE_BYTES at its default) or read each one (0). */
      keptPayloads,
      syncedMs: round(ready.syncedMs, 0),
      timeToFirstAttemptMs: round(first - t0, 0),
      seconds: round(seconds, 2),
      deliveriesPerSecond: round(rate, 1),
      operatorWritesPerDelivery: round(writesPerDelivery, 3),
      statusPatchesPerDelivery: round(statusPatches / n, 3),
      fractionOfApiCeiling: round(rate / bound, 3),
      cpuSecondsPer1000: round(((cpuOf(after) - cpuOf(before)) / n) * 1000, 3),
      apiserverCpuSecondsPer1000: round(((cp1.apiserver - cp0.apiserver) / n) * 1000, 3),
      rssHeldMiB: round(rssHeld / 1048576, 1),
      peakRssMiB: round(op.peakRss / 1048576, 1),
      duplicates,
      /** Where a slot's time goes: the payload read (when the payload was not kept), the webhook request, the final delete. */
      meanMs: { payloadGet: meanApiMs(before, after, { verb: "get", resource: "webhookdeliveries" }), attempt: meanAttemptMs(before, after), delete: meanApiMs(before, after, { verb: "delete" }) },
      /** Payloads the attempts found kept in memory (hit) or read from the API server (miss): HOOKLINE_PAYLOAD_CACHE_BYTES. */
      payloadReads: { hit: delta(before, after, "hookline_payload_cache_reads_total", { result: "hit" }), miss: delta(before, after, "hookline_payload_cache_reads_total", { result: "miss" }) },
      /** GETs of a delivery per delivery (the payload reads). */
      deliveryGetsPerDelivery: round(delta(before, after, "hookline_kube_api_requests_total", { verb: "get", resource: "webhookdeliveries" }) / n, 3),
      /** The endpoint's slots bound the rate at maxInFlight / (the time one is held). */
      slotBoundPerSecond: 0,
      eventLoopLagP99Ms: round(sample(after, "hookline_nodejs_eventloop_lag_p99_seconds") * 1000, 1),
    };
    // The GET weighs in as often as a delivery needs one.
    const slotMs = out.meanMs.payloadGet * out.deliveryGetsPerDelivery + out.meanMs.attempt + out.meanMs.delete;
    out.slotBoundPerSecond = slotMs > 0 ? round((maxInFlight * 1000) / slotMs, 1) : 0;
    ctx.say(`backlog ${n} (maxInFlight ${maxInFlight}${keptPayloads ? "" : ", HOOKLINE_PAYLOAD_CACHE_BYTES=0"}): payloads kept ${out.payloadReads.hit}, read ${out.payloadReads.miss} (${out.deliveryGetsPerDelivery} GETs per delivery); slot time: payload GET ${out.meanMs.payloadGet} ms x ${out.deliveryGetsPerDelivery}, request ${out.meanMs.attempt} ms, delete ${out.meanMs.delete} ms, so at most ${out.slotBoundPerSecond}/s; event loop p99 ${out.eventLoopLagP99Ms} ms`);
    ctx.say(`backlog ${n}: ${out.deliveriesPerSecond}/s = ${out.fractionOfApiCeiling} of the API ceiling for ${out.operatorWritesPerDelivery} writes each; first attempt after ${out.timeToFirstAttemptMs} ms; RSS held ${out.rssHeldMiB} MiB, peak ${out.peakRssMiB} MiB`);
    return out;
  } finally {
    await ctx.stopOperator(op);
  }
}

/** 2. The same total load over S subscriptions: writes per delivery (rollups included) and CPU. */
export async function subscriptionsShape(ctx: ShapesContext, op: OperatorProcess, ns: string, subs: number, total: number): Promise<Record<string, unknown>> {
  const names = Array.from({ length: subs }, (_, i) => `s-${i}`);
  const watch = await ctx.namespace(ns, names.map((name) => ({ name, spec: { url: ctx.receiverUrl(`/ok/${ns}/${name}`), retention: { succeeded: "0s" } } })));
  await sleep(5_000 + subs * 5); // the subscriptions' first rollups settle
  const before = await op.metrics();
  const client = await ctx.client();
  const t0 = now();
  try {
    const p = await produce({ client, namespace: ns, prefix: `sh${subs}`, count: total, concurrency: ctx.concurrency, payloadBytes: 1024, subscriptionOf: (i) => names[i % subs]! });
    ctx.check(p.errors.length === 0, `subs ${subs}: ${p.errors.length} creates failed`);
  } finally {
    await client.destroy();
  }
  const arrivals = await waitArrivals(ctx, `sh${subs}-`, total, 120_000 + total * 20);
  const last = Math.max(...[...arrivals.values()].map((a) => a.at));
  await watch.until(() => watch.deletedAt.size >= total, 60_000);
  await sleep(6_000); // one more rollup interval, so its writes are counted
  const after = await op.metrics();
  ctx.check(arrivals.size === total, `subs ${subs}: ${arrivals.size} of ${total} delivered`);
  const writes = operatorWrites(after) - operatorWrites(before);
  const rollups = sample(after, "hookline_kube_api_requests_total", { verb: "patch", resource: "webhooksubscriptions/status" }) - sample(before, "hookline_kube_api_requests_total", { verb: "patch", resource: "webhooksubscriptions/status" });
  const out = {
    subscriptions: subs,
    deliveries: total,
    deliveriesPerSecond: round(total / ((last - t0) / 1000), 1),
    operatorWritesPerDelivery: round(writes / total, 3),
    subscriptionRollupsPerDelivery: round(rollups / total, 3),
    cpuSecondsPer1000: round(((cpuOf(after) - cpuOf(before)) / total) * 1000, 3),
  };
  ctx.say(`subs ${subs}: ${out.deliveriesPerSecond}/s, ${out.operatorWritesPerDelivery} operator writes per delivery (${out.subscriptionRollupsPerDelivery} rollups), ${out.cpuSecondsPer1000} CPU-s per 1,000`);
  return out;
}

/** 3. One published event to K matching subscriptions: publish latency and deliveries/s. */
export async function fanoutShape(ctx: ShapesContext, op: OperatorProcess, ns: string, k: number, events: number): Promise<Record<string, unknown>> {
  const names = Array.from({ length: k }, (_, i) => `f-${i}`);
  await ctx.namespace(ns, names.map((name) => ({ name, spec: { url: ctx.receiverUrl(`/ok/${ns}/${name}`), retention: { succeeded: "0s" } } })));
  await sleep(3_000);
  const before = await op.metrics();
  const latencies: number[] = [];
  const t0 = now();
  for (let i = 0; i < events; i++) {
    const r = await ctx.publish(ns, { type: "order.paid", id: `fo${k}-${i}`, data: { i } });
    latencies.push(r.ms);
    ctx.check(r.deliveries === k, `fanout ${k}: event ${i} made ${r.deliveries} deliveries`);
  }
  const arrivals = await waitArrivals(ctx, `fo${k}-`, events, 120_000);
  // Arrivals are per webhook id (the event id): each id arrives once per subscription.
  const delivered = [...arrivals.values()].reduce((n, a) => n + a.count, 0);
  const deadline = Date.now() + 120_000;
  let total = delivered;
  while (total < events * k && Date.now() < deadline) {
    await sleep(250);
    total = [...(await ctx.arrivals(`fo${k}-`)).values()].reduce((n, a) => n + a.count, 0);
  }
  const seconds = (now() - t0) / 1000;
  const after = await op.metrics();
  ctx.check(total === events * k, `fanout ${k}: ${total} of ${events * k} delivered`);
  const lat: Percentiles = percentiles(latencies);
  const out = { subscriptions: k, events, deliveries: total, publishLatencyMs: lat, deliveriesPerSecond: round(total / seconds, 1), cpuSecondsPer1000: round(((cpuOf(after) - cpuOf(before)) / Math.max(1, total)) * 1000, 3) };
  ctx.say(`fanout ${k}: publish p50 ${lat.p50} ms p99 ${lat.p99} ms; ${out.deliveriesPerSecond} deliveries/s`);
  return out;
}

/** 4. Payload size: deliveries/s, API server and etcd CPU, operator RSS. */
export async function payloadShape(ctx: ShapesContext, op: OperatorProcess, ns: string, bytes: number, count: number): Promise<Record<string, unknown>> {
  await ctx.namespace(ns, [{ name: "p", spec: { url: ctx.receiverUrl(`/ok/${ns}/p`), retention: { succeeded: "0s" }, maxInFlight: 50 } }]);
  await sleep(2_000);
  op.sample(ctx.apiPort);
  const before = await op.metrics();
  const cp0 = ctx.controlPlaneCpu();
  const client = await ctx.client();
  const t0 = now();
  try {
    const p = await produce({ client, namespace: ns, prefix: `pl${bytes}`, count, concurrency: ctx.concurrency, payloadBytes: bytes, subscriptionOf: () => "p" });
    ctx.check(p.errors.length === 0, `payload ${bytes}: ${p.errors.length} creates failed`);
  } finally {
    await client.destroy();
  }
  const arrivals = await waitArrivals(ctx, `pl${bytes}-`, count, 120_000 + count * 20);
  const last = Math.max(...[...arrivals.values()].map((a) => a.at));
  const after = await op.metrics();
  const cp1 = ctx.controlPlaneCpu();
  op.stopSampling();
  ctx.check(arrivals.size === count, `payload ${bytes}: ${arrivals.size} of ${count} delivered`);
  const out = {
    payloadBytes: bytes,
    deliveries: count,
    deliveriesPerSecond: round(count / ((last - t0) / 1000), 1),
    cpuSecondsPer1000: round(((cpuOf(after) - cpuOf(before)) / count) * 1000, 3),
    apiserverCpuSecondsPer1000: round(((cp1.apiserver - cp0.apiserver) / count) * 1000, 3),
    etcdCpuSecondsPer1000: round(((cp1.etcd - cp0.etcd) / count) * 1000, 3),
    peakRssMiB: round(op.peakRss / 1048576, 1),
  };
  ctx.say(`payload ${bytes} B: ${out.deliveriesPerSecond}/s; API server ${out.apiserverCpuSecondsPer1000} / etcd ${out.etcdCpuSecondsPer1000} CPU-s per 1,000; operator peak RSS ${out.peakRssMiB} MiB`);
  return out;
}

/** 5. Cold start: N pending deliveries when the operator starts. */
export async function coldStartShape(ctx: ShapesContext, ns: string, n: number): Promise<Record<string, unknown>> {
  await ctx.setup(ns, [{ name: "cold", spec: { url: ctx.receiverUrl(`/ok/${ns}/cold`), retention: { succeeded: "0s" }, maxInFlight: 50 } }]);
  const client = await ctx.client();
  try {
    ctx.say(`cold start: creating ${n} pending deliveries with no operator running`);
    const made = await createPending({ client, namespace: ns, count: n, concurrency: ctx.concurrency, payloadBytes: 1024, subscription: "cold", prefix: `cs${n}` });
    ctx.check(made.errors === 0, `cold ${n}: ${made.errors} creates failed`);
  } finally {
    await client.destroy();
  }
  const t0 = now();
  const op = await ctx.startOperator(`cold-${n}`, { WEBHOOK_MAX_IN_FLIGHT: "100" });
  try {
    op.sample(ctx.apiPort);
    const ready = await op.ready(600_000);
    const arrivals = await waitArrivals(ctx, `cs${n}-`, n, 120_000 + n * 20);
    const first = Math.min(...[...arrivals.values()].map((a) => a.at));
    const last = Math.max(...[...arrivals.values()].map((a) => a.at));
    op.stopSampling();
    const duplicates = [...arrivals.values()].filter((a) => a.count > 1).length;
    ctx.check(arrivals.size === n, `cold ${n}: ${arrivals.size} of ${n} delivered`);
    ctx.check(duplicates === 0, `cold ${n}: ${duplicates} attempted twice`);
    const out = {
      deliveries: n,
      readyMs: round(ready.readyMs, 0),
      syncedMs: round(ready.syncedMs, 0),
      timeToFirstAttemptMs: round(first - t0, 0),
      drainSeconds: round((last - first) / 1000, 2),
      peakRssMiB: round(op.peakRss / 1048576, 1),
      duplicates,
    };
    ctx.say(`cold start ${n}: ready in ${out.readyMs} ms, first attempt after ${out.timeToFirstAttemptMs} ms, peak RSS ${out.peakRssMiB} MiB, ${duplicates} duplicates`);
    return out;
  } finally {
    await ctx.stopOperator(op);
  }
}

export interface ShapesResult {
  backlog: Array<Record<string, unknown>>;
  subscriptions: Array<Record<string, unknown>>;
  fanout: Array<Record<string, unknown>>;
  payload: Array<Record<string, unknown>>;
  cold: Array<Record<string, unknown>>;
  /** The 10,000 backlog again with maxInFlight 100: whether the endpoint's slots bound the drain. */
  backlogWiderSlots?: Record<string, unknown>;
  /** The 10,000 backlog again with no payload kept (HOOKLINE_PAYLOAD_CACHE_BYTES=0): what keeping them changes, in the same run. */
  backlogNotKept?: Record<string, unknown>;
  curves: Record<string, unknown>;
}

export async function shapes(ctx: ShapesContext): Promise<ShapesResult> {
  const q = ctx.quick;
  const backlogNs = q ? [200, 1_000] : [1_000, 10_000, 50_000];
  const subsNs = q ? [10, 50] : [10, 100, 1_000];
  const fanoutKs = q ? [1, 10] : [1, 10, 100];
  const payloads = q ? [1_024, 16_384] : [1_024, 16_384, 262_144];
  const colds = q ? [1_000] : [10_000, 100_000];
  const r: ShapesResult = { backlog: [], subscriptions: [], fanout: [], payload: [], cold: [], curves: {} };
  const runs = (shape: string) => !ctx.only?.length || ctx.only.includes(shape);
  if (runs("backlog")) for (const n of backlogNs) r.backlog.push(await backlogShape(ctx, `shape-backlog-${n}`, n));
  // What bounds the drain: the same 10,000 with twice the endpoint's slots (not in the curves).
  if (!q && (runs("backlog") || ctx.only?.includes("backlog-wide"))) r.backlogWiderSlots = await backlogShape(ctx, "shape-backlog-10000-mif100", 10_000, 100);
  // What keeping payloads changes: the same 10,000 with every payload read back (not in the curves).
  if (!q && runs("backlog")) r.backlogNotKept = await backlogShape(ctx, "shape-backlog-10000-not-kept", 10_000, 50, false);
  if (runs("subscriptions") || runs("fanout") || runs("payload")) {
    const op = await ctx.startOperator("shapes", { WEBHOOK_MAX_IN_FLIGHT: "100" });
    try {
      await op.ready();
      if (runs("subscriptions")) for (const s of subsNs) r.subscriptions.push(await subscriptionsShape(ctx, op, `shape-subs-${s}`, s, q ? 500 : 3_000));
      if (runs("fanout")) for (const k of fanoutKs) r.fanout.push(await fanoutShape(ctx, op, `shape-fanout-${k}`, k, q ? 20 : 100));
      if (runs("payload")) for (const b of payloads) r.payload.push(await payloadShape(ctx, op, `shape-payload-${b}`, b, q ? 200 : b >= 262_144 ? 500 : 2_000));
    } finally {
      await ctx.stopOperator(op);
    }
  }
  if (runs("cold")) for (const n of colds) r.cold.push(await coldStartShape(ctx, `shape-cold-${n}`, n));
  const curve = (rows: Array<Record<string, unknown>>, x: string, y: string) => costCurve(rows.map((row) => ({ n: Number(row[x]), cost: Number(row[y]) })));
  r.curves = {
    backlogSecondsByN: curve(r.backlog, "deliveries", "seconds"),
    backlogCpuPer1000ByN: curve(r.backlog, "deliveries", "cpuSecondsPer1000"),
    backlogPeakRssByN: curve(r.backlog, "deliveries", "peakRssMiB"),
    writesPerDeliveryBySubscriptions: curve(r.subscriptions, "subscriptions", "operatorWritesPerDelivery"),
    cpuPer1000BySubscriptions: curve(r.subscriptions, "subscriptions", "cpuSecondsPer1000"),
    publishP50BySubscriptions: curve(r.fanout.map((f) => ({ subscriptions: f.subscriptions, p50: (f.publishLatencyMs as Percentiles).p50 })), "subscriptions", "p50"),
    apiserverCpuByPayload: curve(r.payload, "payloadBytes", "apiserverCpuSecondsPer1000"),
    coldReadyByN: curve(r.cold, "deliveries", "readyMs"),
  };
  return r;
}
