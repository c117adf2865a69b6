// One tenant cannot harm another. Tenant A floods every pool the tenants share at once: ten times
// B's event rate, a hanging endpoint, 256 KiB payloads, 5,000 dead letters and a paused
// subscription holding its events. Tenant B sends the same steady load as it did alone a moment
// before, and must keep its service: its p99 (event created or published -> the receiver has
// it) within 2x of B alone in the same run, none of its dead letters evicted, and the operator
// (a real child process, as in a pod) under its memory budget.
//
// B is a process of its own (test/helpers/tenant.ts), as its producer and endpoint are in
// production: it sends its events and receives their webhooks, and stamps both. This process
// hosts A's endpoints and producer, whose work (A's 256 KiB bodies in and out) would otherwise
// hold the event loop that stamps B's arrivals, and charge A's load on the test to the operator.
//
// CR mode: the pools are the work queues (namespaces take turns), the global request slots (a
// fair share per namespace), the storage budget and the dead-letter cap (evicted only from a
// namespace over its fair share), memory (payloads are not cached), the API server's seats
// for the tenants' creates (the chart's FlowSchema for producers: one flow per namespace), and
// the operator's Events (a budget per namespace: A's past it are dropped, B's are not).
//
// Stream mode: the pools are the stream (one per namespace, each with its quota: A's publishes
// past it are refused, B's are not), the held-bytes budget (a fair share of the bytes a replica
// holds per subscription), the request slots and memory.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { KubeClient } from "../../src/kube/client.js";
import { collectionPath } from "../../src/kube/types.js";
import { DELIVERIES } from "../../src/delivery/objects.js";
import { render } from "../helpers/helm.js";
import { createNamespace, deleteNamespace, kubectl, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, delivery, listObjs, publisherToken, subscription } from "../helpers/kube.js";
import { spawnOperator, type OperatorProcess } from "../helpers/process.js";
import { Receiver, type Script } from "../helpers/receiver.js";
import { createPublisher, StreamQuotaExceededError, type StreamPublisher } from "../../src/index.js";
import { startNats, type TestNats } from "../helpers/nats.js";
import { TenantProcess } from "../helpers/tenant.js";
import { paced } from "../helpers/paced.js";

/** B's steady load: events per second, and how many per phase; A sends ten times as many. */
const B_RATE = 5;
const B_EVENTS = 100;
const A_DEAD_LETTERS = 5_000;
const B_DEAD_LETTERS = 10;
/** The cluster-wide limits, low enough that A's flood goes far past them. */
const BUDGET = 1_000;
const DLQ_CAP = 800;
/** The chart's memory limit is 512 MiB, with Node's heap at 384. */
const RSS_BUDGET_MIB = 400;
/**
 * B's p99 with A flooding may be 2x B's alone, or this much more when that is larger. In CR mode
 * B's events pass through the one API server and etcd that A's flood loads, and the API server
 * sends one resource's watch events in one order to every watcher, whatever their namespace: the
 * test's independent watch (below) sees any delay there as the operator's watch does. Admitted at
 * once, A's burst of 450 objects (100 of 256 KiB) held B's next events 156-791 ms behind it (3
 * runs of 4 on 2026-12-07; 513 ms against the operator's 514 for the worst one of a run on
 * 2026-12-06). The tenants create as ServiceAccounts of their own (the admin is exempt from API
 * Priority and Fairness), under the chart's FlowSchema for producers: one flow per namespace in a
 * level of about 3 seats, so A's burst queues behind itself, the API server admits it no faster
 * than it sends it on, and B's creates take their turns: B's p99 flooded was 15-51 ms (6 runs).
 * What remains is the two cores the API server, etcd, the operator and this test share. So the
 * slack is 250 ms, which the same flood without the FlowSchema went past in 2 runs of 4.
 * What the operator adds is held to 2x on its own (or OPERATOR_SLACK_MS more); what it shares, it
 * shares fairly: B's median stays within 2x (P50_SLACK_MS), none of B's dead letters goes, memory
 * stays bounded. Before the work queue served namespaces in turns, B's p99 here was 3.9 s (median
 * 3.3 s). docs/performance.md ("One tenant flooding, another measured") has the runs.
 *
 * The median's slack is 100 ms: B alone has a median of 2-10 ms, and other test files on the
 * same two cores move it by tens of milliseconds (with three integration workers, 15 ms against
 * 2 ms alone). The failure this bound is for is seconds (3.3 s when namespaces did not take
 * turns), so 100 ms still catches it with a margin of 30x; the work queue's turns themselves are
 * unit-tested exactly (src/runtime/queue-fair.test.ts).
 */
const P99_SLACK_MS = 250;
/**
 * Stream mode's slack. B's path does not pass the API server, so its p99 flooded is the
 * operator's: 10-42 ms against 4-8 alone on a quiet machine, up to 177 ms on a loaded one and
 * 110-133 ms in CI, from the operator's garbage collections and A's 200 KiB messages decoded back
 * to back in one event-loop turn. Since the
 * operator stopped loading @kubernetes/client-node (half its heap) and decodes a large message in
 * a turn of its own, 4-16 ms against 3-17 alone (docs/performance.md, "Stream mode: the
 * operator's own stalls"). The failure this bound is for is B waiting behind A for held bytes,
 * request slots or the stream: seconds.
 */
const STREAM_P99_SLACK_MS = 250;
/**
 * The operator's share of B's p99 (from when an independent watch has the event to when the
 * operator's request starts) with A flooding may be 2x B's alone or this much more: it measured
 * 4 ms flooded against 4 alone, 7 against 3, and in CI 14 against 4 and 38 against 3, where the
 * operator's own event-loop stalls while A floods reached 35-120 ms (the log line's `max`). The
 * failure it is for is B waiting behind A inside the operator: seconds (3.3 s when namespaces
 * did not take turns), still caught with a margin of 13x.
 */
const OPERATOR_SLACK_MS = 250;
const P50_SLACK_MS = 100;
const BIG = "x".repeat(256 * 1024 - 64);
/** Where A's flood of events goes: its held, hanging and dead-letter subscriptions in turn. */
const FLOOD_TARGETS = ["a-paused", "a-hang", "a-dead", "a-paused"];

const p50 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const p99 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.ceil(xs.length * 0.99) - 1]!;

/**
 * The operator's own stalls over a phase, for the log: its event-loop lag (prom-client's, whose
 * window restarts at each scrape) and the time its GC took, from the first scrape to `since()`.
 */
async function operatorLoop(op: OperatorProcess): Promise<{ since(): Promise<string> }> {
  const gc = (m: string) => [...m.matchAll(/^hookline_nodejs_gc_duration_seconds_sum\{[^}]*\} (\S+)/gm)].reduce((s, x) => s + Number(x[1]), 0);
  const gcBefore = gc(await op.metrics());
  return {
    async since() {
      const m = await op.metrics();
      const lag = (q: string) => (Number(new RegExp(`^hookline_nodejs_eventloop_lag_${q}_seconds (\\S+)`, "m").exec(m)?.[1]) * 1000).toFixed(1);
      return `operator event-loop lag p99 ${lag("p99")} max ${lag("max")} ms, GC ${((gc(m) - gcBefore) * 1000).toFixed(0)} ms`;
    },
  };
}

/**
 * An independent watcher of `ns`'s deliveries: kubectl, with its lines stamped as they arrive by
 * a process of their own (this test's process is busy with receivers and creates, which would
 * stamp them late). `first` has when a watch first brought each name. A delay before it is the
 * API server's, paid by every client of the resource; what follows it is the operator's.
 */
function watchArrivals(ns: string): { first: Map<string, number>; stop(): void } {
  const stamp = `const k = require("node:child_process").spawn("kubectl", process.argv.slice(1), { stdio: ["ignore", "pipe", "inherit"] });
let buf = "";
k.stdout.setEncoding("utf8").on("data", (c) => { const at = Date.now(); buf += c; let i; while ((i = buf.indexOf("\\n")) >= 0) { process.stdout.write(at + " " + buf.slice(0, i) + "\\n"); buf = buf.slice(i + 1); } });
process.on("SIGTERM", () => { k.kill(); process.exit(0); });`;
  const args = ["--kubeconfig", inject("kubeconfig"), "get", `${DELIVERIES.plural}.${DELIVERIES.group}`, "-n", ns, "--watch-only", "-o", 'jsonpath={.metadata.name}{"\\n"}'];
  const child = spawn(process.execPath, ["-e", stamp, "--", ...args], { stdio: ["ignore", "pipe", "inherit"] });
  const first = new Map<string, number>();
  let buf = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    buf += chunk;
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      const [at, name] = buf.slice(0, i).split(" ");
      buf = buf.slice(i + 1);
      if (name && !first.has(name)) first.set(name, Number(at));
    }
  });
  return { first, stop: () => void child.kill("SIGTERM") };
}

/**
 * A tenant's own identity, as a producing service has: a ServiceAccount of `ns` that may create
 * deliveries there, and a client with its token. (The admin's requests are exempt from API
 * Priority and Fairness, so the chart's producers' FlowSchema would not apply to them.)
 */
async function producerClient(ns: string): Promise<KubeClient> {
  const token = await publisherToken(ns, "producer", { audience: null, duration: "1h" });
  // The authorizer may not have the RoleBinding yet (backpressure.test saw a 403 first).
  await waitFor(async () => (await kubectl(["auth", "can-i", "create", "webhookdeliveries.hookline.dev", "-n", ns, `--as=system:serviceaccount:${ns}:producer`])).stdout.trim() === "yes", { description: "producer may create", timeoutMs: 30_000 });
  const admin = new KubeConfig();
  admin.loadFromFile(inject("kubeconfig"));
  const kc = new KubeConfig();
  kc.loadFromOptions({ clusters: admin.clusters, users: [{ name: "producer", token }], contexts: [{ name: "producer", cluster: admin.getCurrentCluster()!.name, user: "producer" }], currentContext: "producer" });
  return KubeClient.create(kc, { connections: 8 });
}

function rssMiB(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)![1]);
  return { rss: kib("VmRSS") / 1024, hwm: kib("VmHWM") / 1024 };
}

describe("noisy neighbour, CR mode", () => {
  let nsA: string;
  let nsB: string;
  let op: OperatorProcess;
  /** Each tenant's own API client, as two producers would have. */
  const clients: Record<string, KubeClient> = {};
  const receivers: Receiver[] = [];
  /** B's producer and endpoint, in a process of their own, with B's token. */
  let tenantB: TenantProcess;
  let bToken: string;
  let independent: ReturnType<typeof watchArrivals>;
  let flowControl: string[] = [];

  beforeAll(async () => {
    [nsA, nsB] = await Promise.all([createNamespace("noisy-a"), createNamespace("quiet-b")]);
    independent = watchArrivals(nsB);
    // The chart's FlowSchema for producers: A's and B's creates queue in their own flows.
    const { objects } = await render({ release: "noisy", namespace: nsA, showOnly: ["templates/flowcontrol.yaml"] });
    const producers = objects.filter((o) => o.metadata.name.includes("-producers-"));
    expect(producers.map((o) => o.kind).sort()).toEqual(["FlowSchema", "PriorityLevelConfiguration"]);
    flowControl = producers.map((o) => `${o.kind.toLowerCase()}/${o.metadata.name}`);
    await kubectlOk(["apply", "-f", "-"], { input: JSON.stringify({ apiVersion: "v1", kind: "List", items: producers }) });
    for (const ns of [nsA, nsB]) clients[ns] = await producerClient(ns);
    bToken = await publisherToken(nsB, "producer", { audience: null, duration: "1h" });
    tenantB = await TenantProcess.start();
    const start = async (script: Script) => {
      const r = await Receiver.start(script);
      receivers.push(r);
      return r;
    };
    const aOk = await start(() => 200);
    const hang = await start(() => "hang");
    const slow = await start(() => ({ status: 200, delayMs: 500 }));
    const refuse = await start(() => 400);

    await apply([
      subscription(nsA, "a-hang", { url: hang.url(), timeout: "30s", maxInFlight: 10 }),
      subscription(nsA, "a-big", { url: slow.url(), maxInFlight: 10 }),
      subscription(nsA, "a-paused", { url: aOk.url("/a-paused"), paused: true }),
      // Lists another event type: A's events to it are dead letters at once (EventTypeNotSubscribed),
      // without an attempt, so its endpoint stays healthy and the 5,000 are recorded in about half a minute.
      subscription(nsA, "a-dead", { url: refuse.url(), eventTypes: ["not.subscribed"] }),
      subscription(nsB, "b-ok", { url: tenantB.url("/b"), maxInFlight: 50 }),
      // Each of B's 10 is refused (400, dead-lettered at once). The breaker's threshold is above
      // 10: with the default 5, a loaded machine that admits them one after another opens it
      // after five, and the other five wait out its 60 s cooldown (CI saw that).
      subscription(nsB, "b-dead", { url: refuse.url(), circuitBreaker: { failureThreshold: 100 } }),
    ]);
    op = await spawnOperator({
      name: "noisy-cr",
      namespaces: [nsA, nsB],
      env: { LEADER_ELECT: "false", WEBHOOK_MAX_FINISHED_DELIVERIES: String(BUDGET), WEBHOOK_DLQ_MAX_ENTRIES: String(DLQ_CAP), NODE_OPTIONS: "--max-old-space-size=384" },
    });
    // One event of B through, end to end, from B's process: its client and the operator's path warm before B is measured.
    await tenantB.create({ kubeconfig: inject("kubeconfig"), token: bToken, objects: [delivery(nsB, "warm-0", "b-ok", { eventId: "warm-0" })], perSecond: 1 });
    await waitFor(async () => (await tenantB.arrivals("warm-")).size > 0, { description: "B's first event at B's receiver", timeoutMs: 60_000 });
    // B's own dead letters, then A's 5,000: past both cluster-wide limits, so the operator
    // evicts (from A only) while B is measured.
    await createAll(Array.from({ length: B_DEAD_LETTERS }, (_, i) => delivery(nsB, `b-dead-${i}`, "b-dead")));
    await waitFor(async () => (await listObjs("whdel", nsB, ["--field-selector", "status.phase=DeadLettered"])).length === B_DEAD_LETTERS, { description: "B's dead letters", timeoutMs: 30_000 });
    await createAll(Array.from({ length: A_DEAD_LETTERS }, (_, i) => delivery(nsA, `dead-${i}`, "a-dead")));
    // B alone is measured once A's 5,000 are dead letters and the overflow is evicted: quiet.
    const count = async (ns: string, selector: string) => (await kubectl(["get", "whdel", "-n", ns, "--field-selector", selector, "-o", "name"])).stdout.split("\n").filter(Boolean).length;
    await waitFor(async () => {
      const [pending, dead] = [await count(nsA, "status.phase!=DeadLettered"), await count(nsA, "status.phase=DeadLettered")];
      if (pending > 0 || dead > DLQ_CAP - B_DEAD_LETTERS) throw new Error(`A: ${pending} not dead-lettered yet, ${dead} dead letters`);
      return true;
    }, {
      description: "A's dead letters recorded and the overflow evicted",
      timeoutMs: 300_000,
      intervalMs: 2_000,
    });
  }, 420_000);

  afterAll(async () => {
    independent?.stop();
    op?.kill("SIGKILL");
    await op?.exited;
    await tenantB?.close();
    for (const r of receivers) await r.close();
    for (const c of Object.values(clients)) await c.close();
    for (const ref of flowControl) await kubectl(["delete", ref, "--ignore-not-found"]);
    await Promise.all([nsA && deleteNamespace(nsA), nsB && deleteNamespace(nsB)]);
    // Gone before the next case measures: the namespace controller deleting A's thousands of
    // objects loads the API server, etcd and the two cores for a while. The stream case measured
    // during it (this file's order, as CI runs it): B's p99 10 ms alone and 111 ms flooded, its
    // operator's event loop held up to 142 ms; 4-8 / 7-18 ms after it.
    await waitFor(async () => (await kubectl(["get", "namespace", ...[nsA, nsB].filter(Boolean), "--ignore-not-found", "-o", "name"])).stdout.trim() === "", {
      description: "the CR case's namespaces deleted",
      timeoutMs: 300_000,
      intervalMs: 1_000,
    });
  }, 420_000);

  /**
   * 429s the API server answered each namespace's creates (API Priority and Fairness's queues
   * full); retried, as client-go does, here up to 600 times 100 ms apart (a minute of refusals of
   * one create is a failure to report, not to wait out under the test's timeout).
   */
  const tooMany: Record<string, number> = {};
  async function createOne(obj: unknown): Promise<void> {
    const o = obj as { metadata: { namespace: string } };
    for (let tries = 1; ; tries++) {
      try {
        await clients[o.metadata.namespace]!.request({ method: "POST", path: collectionPath(DELIVERIES, o.metadata.namespace), body: obj });
        return;
      } catch (err) {
        if ((err as { status?: number }).status !== 429 || tries >= 600) throw err;
        tooMany[o.metadata.namespace] = (tooMany[o.metadata.namespace] ?? 0) + 1;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  async function createAll(objs: unknown[]): Promise<void> {
    for (let i = 0; i < objs.length; i += 50) await Promise.all(objs.slice(i, i + 50).map(createOne));
  }

  /**
   * B's steady load: `B_EVENTS` at `B_RATE`, created by B's own process with B's token; the
   * latency of each, from when the API server accepted it (the create answered: the event
   * exists) to when B's receiver has it, both stamped in B's process; and the operator's share of
   * it: from when an independent watch had it to when the request started.
   */
  async function bLoad(phase: string): Promise<{ latencies: number[]; operatorShare: number[] }> {
    const loop = await operatorLoop(op);
    await tenantB.stats();
    const objects = Array.from({ length: B_EVENTS }, (_, i) => delivery(nsB, `${phase}-${i}`, "b-ok", { eventId: `${phase}-${i}` }));
    const created = await tenantB.create({ kubeconfig: inject("kubeconfig"), token: bToken, objects, perSecond: B_RATE });
    tooMany[nsB] = (tooMany[nsB] ?? 0) + created.tooMany;
    const sentAt = new Map([...created.sent].map(([name, s]) => [name, s.at]));
    const answered = [...created.sent.values()].map((s) => s.answeredMs);
    const arrived = await waitFor(async () => {
      const a = await tenantB.arrivals(`${phase}-`);
      return [...sentAt.keys()].every((name) => a.has(name)) ? a : undefined;
    }, { description: `B's ${phase} events at B's receiver`, timeoutMs: 120_000 });
    // Both may come after the receiver has the request: the operator logs an attempt once its
    // answer is classified, and the independent watch's lines pass through two processes.
    const attempts = () => op.lines.filter((l) => l.msg === "webhook_attempt" && l.subscription === `${nsB}/b-ok` && typeof l.eventId === "string" && sentAt.has(l.eventId));
    await waitFor(() => attempts().length >= B_EVENTS, { description: `the operator's attempt lines for B's ${phase} events`, timeoutMs: 30_000 });
    await waitFor(() => [...sentAt.keys()].every((name) => independent.first.has(name)), { description: `B's ${phase} events at the independent watch`, timeoutMs: 30_000 });
    const latencies = [...sentAt].map(([name, t]) => arrived.get(name)! - t);
    expect(latencies).toHaveLength(B_EVENTS);
    const own = await tenantB.stats();
    // Where the time goes: accepted -> the attempt's request starts (watch, queue, reconcile,
    // payload read) -> the receiver has it.
    const starts: number[] = [];
    const watched: number[] = [];
    const operatorShare: number[] = [];
    for (const l of attempts()) {
      const t = sentAt.get(l.eventId as string);
      const w = independent.first.get(l.eventId as string);
      const start = Date.parse(l.time as string) - (l.durationMs as number);
      if (t !== undefined) starts.push(start - t);
      if (t !== undefined && w !== undefined) {
        watched.push(w - t);
        operatorShare.push(start - w);
      }
    }
    expect(operatorShare, "the independent watch saw every one of B's events").toHaveLength(B_EVENTS);
    // The slowest of B's events, by their place in the phase (B sends one every 1/B_RATE s), each
    // as accepted -> independent watch + the rest: when in the phase they fall tells what held them.
    const worst = [...sentAt]
      .map(([name, t]) => ({ i: name.slice(name.lastIndexOf("-") + 1), total: arrived.get(name)! - t, watch: (independent.first.get(name) ?? NaN) - t }))
      .sort((a, b) => b.total - a.total)
      .slice(0, 5)
      .map((w) => `#${w.i} ${w.total} (${w.watch}+${w.total - w.watch})`)
      .join(", ");
    console.log(
      `B ${phase}: sent -> accepted (the create answered) p50 ${p50(answered)} p99 ${p99(answered)} ms; accepted -> an independent watch has it p50 ${p50(watched)} p99 ${p99(watched)} ms; -> the operator's request starts p50 ${p50(starts)} p99 ${p99(starts)} ms; ` +
        `-> at the receiver p50 ${p50(latencies)} p99 ${p99(latencies)} ms; independent watch -> request starts p50 ${p50(operatorShare)} p99 ${p99(operatorShare)} ms; B's process (${tenantB.niced ? `nice ${TenantProcess.NICE}` : "default priority"}) event-loop delay p99 ${own.p99.toFixed(1)} max ${own.max.toFixed(1)} ms; ${await loop.since()}; slowest (ms, watch+rest): ${worst}`,
    );
    return { latencies, operatorShare };
  }

  it("A floods every shared pool; B keeps its p99 within 2x of B alone, its dead letters, and the operator its memory budget", async () => {
    const { latencies: alone, operatorShare: aloneShare } = await bLoad("alone");

    // A's flood, all at once: a hanging endpoint, 256 KiB payloads, a paused subscription, and
    // ten times B's events (each a dead letter); B's same load beside it.
    await createAll([
      ...Array.from({ length: 50 }, (_, i) => delivery(nsA, `hang-${i}`, "a-hang")),
      ...Array.from({ length: 100 }, (_, i) => delivery(nsA, `big-${i}`, "a-big", { payload: { pad: BIG, i } })),
      ...Array.from({ length: 300 }, (_, i) => delivery(nsA, `paused-${i}`, "a-paused")),
    ]);
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(op.child.pid!).rss)), 250);
    try {
      const aEvents = B_EVENTS * 10;
      const [{ latencies: flooded, operatorShare: floodedShare }] = await Promise.all([bLoad("flood"), paced(aEvents, B_RATE * 10, (i) => createOne(delivery(nsA, `flood-${i}`, FLOOD_TARGETS[i % FLOOD_TARGETS.length]!)))]);
      // What the operator adds, from when the API server's watch has B's event: held to 2x or
      // OPERATOR_SLACK_MS, whichever is larger, beside the whole latency's looser bound.
      const share = { alone: p99(aloneShare), flood: p99(floodedShare) };
      expect(share.flood, `the operator's share of B's p99 with A flooding (${share.flood} ms) vs alone (${share.alone} ms)`).toBeLessThanOrEqual(Math.max(2 * share.alone, share.alone + OPERATOR_SLACK_MS));
      const aloneP99 = p99(alone);
      const floodP99 = p99(flooded);
      console.log(`B alone p99 ${aloneP99} ms (p50 ${[...alone].sort((a, b) => a - b)[alone.length >> 1]}); with A flooding p99 ${floodP99} ms (p50 ${[...flooded].sort((a, b) => a - b)[flooded.length >> 1]}); operator RSS peak ${peak.toFixed(0)} MiB; 429s ${JSON.stringify(tooMany)}`);
      expect(floodP99, `B's p99 with A flooding (${floodP99} ms) vs alone (${aloneP99} ms)`).toBeLessThanOrEqual(Math.max(2 * aloneP99, aloneP99 + P99_SLACK_MS));
      expect(p50(flooded), `B's median with A flooding vs alone (${p50(alone)} ms)`).toBeLessThanOrEqual(Math.max(2 * p50(alone), p50(alone) + P50_SLACK_MS));

      // A's dead letters go past both limits; the operator evicts A's, never B's.
      await waitFor(async () => (await op.metrics()).includes(`webhook_namespace_evictions_total{namespace="${nsA}"`), { description: "evictions in A", timeoutMs: 120_000 });
      // A's flood of dead letters spent its namespace's Event budget; B's Events were all written.
      const m = await op.metrics();
      expect(m, "A's Events past its budget are dropped").toMatch(new RegExp(`^hookline_events_dropped_total\\{namespace="${nsA}"\\} [1-9]`, "m"));
      expect(m, "none of B's Events is dropped").not.toContain(`hookline_events_dropped_total{namespace="${nsB}"}`);
      const bDead = await listObjs("whdel", nsB, ["--field-selector", "status.phase=DeadLettered"]);
      expect(bDead.map((d) => d.metadata.name).sort()).toEqual(Array.from({ length: B_DEAD_LETTERS }, (_, i) => `b-dead-${i}`).sort());
    } finally {
      clearInterval(sampler);
    }
    const { hwm } = rssMiB(op.child.pid!);
    expect(Math.max(peak, hwm), "the operator's RSS (peak)").toBeLessThan(RSS_BUDGET_MIB);
  }, 600_000);
});

/** Stream mode: A's namespace quota, low enough that A's flood (held by its paused subscription) goes past it. */
const A_QUOTA = 600;
const STREAM_BIG = "x".repeat(200 * 1024);

describe("noisy neighbour, stream mode", () => {
  let nsA: string;
  let nsB: string;
  let nats: TestNats;
  let op: OperatorProcess;
  const receivers: Receiver[] = [];
  let aPublisher: StreamPublisher;
  /** B's producer and endpoint, in a process of their own. */
  let tenantB: TenantProcess;
  let bNats: string;

  beforeAll(async () => {
    [nsA, nsB] = await Promise.all([createNamespace("noisy-sa"), createNamespace("quiet-sb")]);
    nats = await startNats("noisy");
    const start = async (script: Script) => {
      const r = await Receiver.start(script);
      receivers.push(r);
      return r;
    };
    tenantB = await TenantProcess.start();
    const aOk = await start(() => 200);
    const hang = await start(() => "hang");
    const slow = await start(() => ({ status: 200, delayMs: 500 }));
    // Each of A's subscriptions takes one event type, so each event of A goes to one of them.
    await apply([
      subscription(nsA, "a-hang", { url: hang.url(), timeout: "30s", maxInFlight: 10, eventTypes: ["hang"] }),
      subscription(nsA, "a-big", { url: slow.url(), maxInFlight: 10, eventTypes: ["big"] }),
      subscription(nsA, "a-paused", { url: aOk.url("/a-paused"), paused: true, eventTypes: ["held"] }),
      subscription(nsB, "b-ok", { url: tenantB.url("/b"), maxInFlight: 50 }),
    ]);
    aPublisher = await createPublisher({ nats: await nats.publisherUrl(nsA) });
    bNats = await nats.publisherUrl(nsB);
    op = await spawnOperator({
      name: "noisy-stream",
      namespaces: [nsA, nsB],
      env: { LEADER_ELECT: "false", HOOKLINE_NATS_URL: nats.url, HOOKLINE_STREAM_NAMESPACE_MAX_MESSAGES: String(A_QUOTA), NODE_OPTIONS: "--max-old-space-size=384" },
    });
    // One event of B through, end to end: B's consumer is made and pulling before B is measured.
    await waitFor(async () => {
      const prefix = `warm-${Date.now()}-`;
      await tenantB.publish({ nats: bNats, namespace: nsB, type: "order.paid", prefix, n: 1, perSecond: 1 });
      return waitFor(async () => (await tenantB.arrivals(prefix)).size > 0, { description: "B's first event", timeoutMs: 5_000 }).then(() => true, () => false);
    }, { description: "B's consumer delivering", timeoutMs: 60_000 });
  }, 180_000);

  afterAll(async () => {
    op?.kill("SIGKILL");
    await op?.exited;
    await aPublisher?.close();
    await tenantB?.close();
    for (const r of receivers) await r.close();
    await nats?.close();
    await Promise.all([nsA && deleteNamespace(nsA), nsB && deleteNamespace(nsB)]);
  }, 120_000);

  /**
   * B's steady load, published by B's own process; the latency of each from its acknowledgement
   * (stored in B's stream) to B's receiver, both stamped there.
   */
  async function bLoad(phase: string): Promise<number[]> {
    const prefix = `${phase}-`;
    const loop = await operatorLoop(op);
    await tenantB.stats();
    const sentAt = await tenantB.publish({ nats: bNats, namespace: nsB, type: "order.paid", prefix, n: B_EVENTS, perSecond: B_RATE });
    const arrived = await waitFor(async () => {
      const a = await tenantB.arrivals(prefix);
      return a.size >= B_EVENTS ? a : undefined;
    }, { description: `B's ${phase} events at B's receiver`, timeoutMs: 120_000 });
    const latencies = [...sentAt].map(([id, t]) => arrived.get(id)! - t);
    expect(latencies).toHaveLength(B_EVENTS);
    const own = await tenantB.stats();
    console.log(`B ${phase} (stream): published -> at the receiver p50 ${p50(latencies)} p99 ${p99(latencies)} ms; B's process (${tenantB.niced ? `nice ${TenantProcess.NICE}` : "default priority"}) event-loop delay p99 ${own.p99.toFixed(1)} max ${own.max.toFixed(1)} ms; ${await loop.since()}`);
    return latencies;
  }

  it("A floods its stream past its quota, the held bytes and the request slots; B is never refused and keeps its p99 within 2x of B alone, the operator its memory budget", async () => {
    const alone = await bLoad("alone");
    let refused = 0;
    const aPublish = async (type: string, id: string, data: unknown) => {
      try {
        await aPublisher.publish({ namespace: nsA, type, id, data });
      } catch (err) {
        if (!(err instanceof StreamQuotaExceededError)) throw err;
        expect(err.namespace).toBe(nsA);
        refused++;
      }
    };
    // A hanging endpoint, 200 KiB events to a slow one (they fill held bytes), then ten times
    // B's rate to a paused subscription and the hanging one: A's stream reaches its quota.
    await Promise.all([...Array.from({ length: 50 }, (_, i) => aPublish("hang", `hang-${i}`, i)), ...Array.from({ length: 100 }, (_, i) => aPublish("big", `big-${i}`, { pad: STREAM_BIG, i }))]);
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(op.child.pid!).rss)), 250);
    try {
      const aEvents = B_EVENTS * 10;
      const [flooded] = await Promise.all([bLoad("flood"), paced(aEvents, B_RATE * 10, (i) => aPublish(i % 4 === 1 ? "hang" : "held", `flood-${i}`, i))]);
      // A publishes one more burst: its stream is at the quota (the paused subscription holds A's events).
      await Promise.all(Array.from({ length: 50 }, (_, i) => aPublish("held", `more-${i}`, i)));
      console.log(`stream: B alone p99 ${p99(alone)} ms (p50 ${p50(alone)}); with A flooding p99 ${p99(flooded)} ms (p50 ${p50(flooded)}); A refused ${refused} times; operator RSS peak ${peak.toFixed(0)} MiB`);
      expect(refused, "A's publishes refused at its quota").toBeGreaterThan(0);
      expect(p99(flooded), `B's p99 with A flooding vs alone (${p99(alone)} ms)`).toBeLessThanOrEqual(Math.max(2 * p99(alone), p99(alone) + STREAM_P99_SLACK_MS));
      expect(p50(flooded), `B's median with A flooding vs alone (${p50(alone)} ms)`).toBeLessThanOrEqual(Math.max(2 * p50(alone), p50(alone) + P50_SLACK_MS));
      const metrics = await op.metrics();
      expect(metrics).toMatch(new RegExp(`webhook_stream_held_bytes\\{[^}]*namespace="${nsA}"`));
    } finally {
      clearInterval(sampler);
    }
    const { hwm } = rssMiB(op.child.pid!);
    expect(Math.max(peak, hwm), "the operator's RSS (peak)").toBeLessThan(RSS_BUDGET_MIB);
  }, 600_000);
});
