// Stream mode with two real operator processes (leader election on): both deliver, sharing each
// subscription's JetStream consumer; the breaker opens on both through the shared state and one
// probe goes per cooldown across them; SIGTERM drains one while the other delivers the rest.
import type { JetStreamManager } from "@nats-io/jetstream";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { StreamConnection } from "../../src/jetstream/jetstream.js";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { apply, listObjs, subscription } from "../helpers/kube.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";
import { sample, spawnOperator, type OperatorProcess } from "../helpers/process.js";
import { Receiver } from "../helpers/receiver.js";
import { publishEvent, waitForConsumer, waitForDrained } from "../helpers/stream.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

let nats: TestNats;
let conn: StreamConnection;
let jsm: JetStreamManager;
beforeAll(async () => {
  nats = await startNats("replicas");
  conn = await connectStream(nats.url);
  jsm = await conn.jetstreamManager();
});
afterAll(async () => {
  await conn?.close();
  await nats?.close();
});

async function replica(ns: string, name: string, env: Record<string, string> = {}): Promise<OperatorProcess> {
  const p = await spawnOperator({
    name,
    namespaces: [ns],
    env: {
      HOOKLINE_NATS_URL: nats.url,
      // One installation across the tests, whose Leases differ (the default is the Lease's namespace/name).
      HOOKLINE_INSTALLATION: "stream-replicas",
      LEADER_ELECT: "true",
      LEADER_ELECTION_NAMESPACE: ns,
      LEADER_ELECTION_LEASE_NAME: "hookline-test",
      LEADER_ELECTION_LEASE_DURATION_MS: "4000",
      LEADER_ELECTION_RENEW_DEADLINE_MS: "3000",
      LEADER_ELECTION_RETRY_PERIOD_MS: "500",
      ...env,
    },
  });
  cleanups.push(async () => {
    if (p.child.exitCode === null) p.kill("SIGKILL");
    await p.exited;
  });
  return p;
}

/** Two replicas, the first leading, both reading the subscriptions' consumers. */
async function pair(ns: string, subscriptions: string[], env: Record<string, string> = {}): Promise<[OperatorProcess, OperatorProcess]> {
  const a = await replica(ns, "op-a", env);
  await a.waitForLog((l) => l.msg === "became leader", 10_000, "leadership");
  const b = await replica(ns, "op-b", env);
  for (const s of subscriptions) {
    await waitForConsumer(jsm, ns, s);
    for (const p of [a, b]) await p.waitForLog((l) => l.msg === "stream consumer started" && l.subscription === `${ns}/${s}`, 15_000, `${p.name} reading ${s}`);
  }
  return [a, b];
}

async function namespace(prefix: string): Promise<string> {
  const ns = await createNamespace(prefix);
  cleanups.push(() => deleteNamespace(ns));
  return ns;
}

async function receiver(script: Parameters<typeof Receiver.start>[0]): Promise<Receiver> {
  const r = await Receiver.start(script);
  cleanups.push(() => r.close());
  return r;
}

/** Publishes `n` events, 20 at a time; returns their ids. */
async function publishMany(ns: string, type: string, prefix: string, n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(3, "0")}`);
  for (let i = 0; i < ids.length; i += 20) await Promise.all(ids.slice(i, i + 20).map((id) => publishEvent(conn, ns, type, id, { id })));
  return ids;
}

const attempts = async (p: OperatorProcess, labels: Record<string, string>) => sample(await p.metrics(), "webhook_delivery_attempts_total", labels);

describe("stream mode with two replicas", () => {
  it("both deliver: each 40-60 % of 200 events, no duplicate at the receiver; a rate limit holds for both together", async () => {
    const ns = await namespace("stream-share");
    const r = await receiver(() => ({ status: 200, delayMs: 20 }));
    const limited = await receiver(() => 200);
    await apply([subscription(ns, "shared", { url: r.url(), maxInFlight: 10 }), subscription(ns, "limited", { url: limited.url(), maxInFlight: 10, rateLimit: { perSecond: 10, burst: 2 } })]);
    const [a, b] = await pair(ns, ["shared", "limited"]);
    const ids = await publishMany(ns, "order.paid", "evt", 200);
    await r.waitForRequests(200, 60_000);
    await waitForDrained(jsm, ns, "shared");
    const got = r.requests.map((q) => String(q.headers["webhook-id"]));
    expect(got).toHaveLength(200);
    expect(new Set(got)).toEqual(new Set(ids));
    // max_ack_pending = maxInFlight bounds the subscription across both replicas.
    expect(r.maxConcurrent).toBeLessThanOrEqual(10);
    const byA = await attempts(a, { subscription: "shared", status: "success" });
    const byB = await attempts(b, { subscription: "shared", status: "success" });
    expect(byA + byB).toBe(200);
    expect(byA).toBeGreaterThanOrEqual(80);
    expect(byA).toBeLessThanOrEqual(120);
    expect(await listObjs("whdel", ns)).toHaveLength(0);
    // The leader rolls up what both delivered.
    await waitFor(async () => (await listObjs("whsub", ns)).find((s) => s.metadata.name === "shared")?.status?.deliveries?.succeeded === 200, { description: "status counts both replicas' deliveries", timeoutMs: 20_000 });

    // 10/s with a burst of 2, for the subscription: 30 events take about 3 s whoever sends them
    // (each replica alone would allow the whole rate: twice as fast).
    await publishMany(ns, "order.paid", "evt-limited", 30);
    await limited.waitForRequests(30, 30_000);
    const span = limited.requests[29]!.at - limited.requests[0]!.at;
    expect(span).toBeGreaterThanOrEqual(2_500);
    expect((await attempts(a, { subscription: "limited" })) * (await attempts(b, { subscription: "limited" }))).toBeGreaterThan(0);
  });

  it("the breaker opens on both through the shared state, and one probe goes per cooldown across the two", async () => {
    const ns = await namespace("stream-breaker");
    let healthy = false;
    const r = await receiver(() => (healthy ? 200 : 503));
    const COOLDOWN_MS = 3_000;
    await apply(subscription(ns, "sick", { url: r.url(), maxInFlight: 4, retry: { maxAttempts: 50, initialBackoff: "200ms", maxBackoff: "1s", jitterPercent: 0 }, circuitBreaker: { failureThreshold: 3, cooldown: "3s" } }));
    const [a, b] = await pair(ns, ["sick"]);
    const ids = await publishMany(ns, "order.paid", "evt-sick", 8);
    const opened = (p: OperatorProcess) =>
      p.lines.some((l) => (l.msg === "breaker transition" && l.to === "Open") || (l.msg === "stream mode: took the endpoint state another replica shared" && l.breaker === "Open"));
    await waitFor(() => opened(a) && opened(b), { description: "the breaker Open on both replicas", timeoutMs: 20_000 });
    // Requests already admitted when it opened may still arrive; from then on, only probes.
    const since = Date.now() + 500;
    await waitFor(() => r.requests.filter((q) => q.at >= since).length >= 3, { description: "three probes", timeoutMs: 30_000 });
    const probes = r.requests.filter((q) => q.at >= since);
    const gaps = probes.slice(1, 3).map((q, i) => q.at - probes[i]!.at);
    for (const g of gaps) expect(g).toBeGreaterThanOrEqual(COOLDOWN_MS - 100);
    // Every probe is made by one replica: the attempts of both add up to the requests.
    const total = (await attempts(a, { subscription: "sick" })) + (await attempts(b, { subscription: "sick" }));
    expect(total).toBe(r.requests.length);
    healthy = true;
    await waitFor(() => ids.every((id) => r.requests.some((q) => q.headers["webhook-id"] === id && q.at >= since)), { description: "every event delivered once the breaker closed", timeoutMs: 30_000 });
    await waitForDrained(jsm, ns, "sick");
    expect(await listObjs("whdel", ns)).toHaveLength(0);
    await waitFor(async () => (await listObjs("whsub", ns))[0]?.status?.breaker?.state === "Closed", { description: "status: breaker Closed" });
  });

  it("SIGTERM drains one replica with requests in flight: exit 0, nothing dead-lettered, the other delivers the rest", async () => {
    const ns = await namespace("stream-drain");
    const r = await receiver(() => ({ status: 200, delayMs: 3_000 }));
    await apply(subscription(ns, "slow", { url: r.url(), maxInFlight: 10, timeout: "10s" }));
    // A drain shorter than the receiver's answer: what the leaving replica has in flight is cut.
    const [a, b] = await pair(ns, ["slow"], { WEBHOOK_DRAIN_TIMEOUT_MS: "1000" });
    const ids = await publishMany(ns, "order.paid", "evt-slow", 30);
    await waitFor(async () => sample(await a.metrics(), "webhook_deliveries_in_flight") >= 2, { description: "op-a has requests in flight" });
    const sent = Date.now();
    a.kill("SIGTERM");
    const exit = await a.exited;
    expect(exit.code).toBe(0);
    expect(exit.at - sent).toBeLessThan(1_000 + 2_000 + 5_000);
    expect(a.lines.find((l) => l.msg === "webhook_drain_timeout")).toBeDefined();
    const flushed = a.lines.find((l) => l.msg === "webhook_drain_flushed_to_dlq");
    expect(flushed).toMatchObject({ deadLettered: 0 });
    expect(flushed!.requeued).toBeGreaterThanOrEqual(2);
    await waitForDrained(jsm, ns, "slow", 60_000);
    expect(await listObjs("whdel", ns)).toHaveLength(0);
    for (const id of ids) expect(r.requests.some((q) => q.headers["webhook-id"] === id), id).toBe(true);
    const stopped = a.lines.find((l) => l.msg === "stream consumer stopped" && l.subscription === `${ns}/slow`);
    const byA = Number(stopped?.delivered ?? 0);
    expect(sample(await b.metrics(), "webhook_deliveries_finished_total", { subscription: "slow", phase: "Succeeded" })).toBe(30 - byA);
  });
});
