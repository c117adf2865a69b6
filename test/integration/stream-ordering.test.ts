// spec.ordering in stream mode: events published to JetStream reach an ordered subscription's
// endpoint one at a time per key value, in publish order, with a dead letter blocking its key
// until it is replayed, also across a SIGKILL of the operator. A real nats-server, the real API
// server, the operator as a child process (as in a pod) and real receivers.
import type { JetStreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ANNOTATIONS } from "../../src/api/names.js";
import type { StreamConnection } from "../../src/jetstream/jetstream.js";
import { deliveryName } from "../../src/publish/naming.js";
import { createNamespace, deleteNamespace, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, getObj, listObjs, subscription, waitForPhase } from "../helpers/kube.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";
import { spawnOperator, type OperatorProcess } from "../helpers/process.js";
import { Receiver, type ReceivedRequest } from "../helpers/receiver.js";
import { consumersOf, publishEvent, waitForConsumer, waitForDrained } from "../helpers/stream.js";

const customerOf = (r: ReceivedRequest): string => (JSON.parse(r.body) as { data: { customer: { id: string } } }).data.customer.id;
const idOf = (r: ReceivedRequest): string => r.headers["webhook-id"] as string;

/** The first arrival of each event id, per key, in arrival order. */
function firstArrivals(reqs: ReceivedRequest[]): Map<string, string[]> {
  const seen = new Set<string>();
  const byKey = new Map<string, string[]>();
  for (const r of reqs) {
    if (seen.has(idOf(r))) continue;
    seen.add(idOf(r));
    const k = customerOf(r);
    byKey.set(k, [...(byKey.get(k) ?? []), idOf(r)]);
  }
  return byKey;
}

/** A receiver that answers after `delayMs`, recording how many requests of one key were open at once. */
async function keyedReceiver(delayMs: number, fail: (r: ReceivedRequest) => boolean = () => false): Promise<{ r: Receiver; maxPerKey: () => number; maxOverall: () => number }> {
  const open = new Map<string, number>();
  let maxPerKey = 0;
  let overall = 0;
  let maxOverall = 0;
  const r = await Receiver.start(async (req) => {
    const k = customerOf(req);
    open.set(k, (open.get(k) ?? 0) + 1);
    overall++;
    maxPerKey = Math.max(maxPerKey, open.get(k)!);
    maxOverall = Math.max(maxOverall, overall);
    await new Promise((res) => setTimeout(res, delayMs));
    open.set(k, open.get(k)! - 1);
    overall--;
    return fail(req) ? 500 : 200;
  });
  return { r, maxPerKey: () => maxPerKey, maxOverall: () => maxOverall };
}

describe("stream mode: spec.ordering", () => {
  let nats: TestNats;
  let conn: StreamConnection;
  let jsm: JetStreamManager;
  let ns: string;
  let op: OperatorProcess;
  const receivers: Receiver[] = [];

  const start = async (name: string): Promise<OperatorProcess> =>
    spawnOperator({ name, namespaces: [ns], env: { LEADER_ELECT: "false", HOOKLINE_NATS_URL: nats.url } });

  beforeAll(async () => {
    nats = await startNats("ordering");
    conn = await connectStream(nats.url);
    jsm = await conn.jetstreamManager();
    ns = await createNamespace("stream-ordering");
    op = await start("ordering-1");
  });
  afterAll(async () => {
    op?.kill("SIGKILL");
    await op?.exited;
    await conn?.close();
    await nats?.close();
    await Promise.all(receivers.map((r) => r.close()));
    if (ns) await deleteNamespace(ns);
  });

  it("publish order per key, one request in flight per key, keys in parallel; event ids that sort against publish order change nothing; no advice", async () => {
    const k = await keyedReceiver(60);
    receivers.push(k.r);
    await apply(subscription(ns, "ordered", { url: k.r.url(), eventTypes: ["order.*"], ordering: { key: "$.customer.id" }, maxInFlight: 10 }));
    await waitForConsumer(jsm, ns, "ordered");
    // 30 events over three customers, published at once: ids count down, so a name order would
    // reverse them. Every fourth is large (80 KiB of two-byte characters): the operator decodes
    // those in an event-loop turn of their own, so the small ones of the same pull may be decoded
    // first; per key the order is still the stream's.
    const published = new Map<string, string[]>();
    for (let i = 0; i < 30; i++) {
      const customer = ["acme", "globex", "initech"][i % 3]!;
      const id = `evt-${100 - i}`;
      published.set(customer, [...(published.get(customer) ?? []), id]);
      expect((await publishEvent(conn, ns, "order.paid", id, { customer: { id: customer }, n: i, ...(i % 4 === 0 ? { pad: "é".repeat(40 * 1024) } : {}) })).result).toBe("published");
    }
    await k.r.waitForRequests(30, 60_000);
    await waitForDrained(jsm, ns, "ordered");
    expect(firstArrivals(k.r.requests)).toEqual(published);
    expect(k.r.requests).toHaveLength(30);
    expect(k.maxPerKey()).toBe(1);
    // The three keys did not wait for each other.
    expect(k.maxOverall()).toBeGreaterThan(1);
    // Each became a delivery made from its message (the sequence is the lane's order), kept as
    // Succeeded for the default retention (1h).
    const [first, last] = await waitForPhase(ns, [deliveryName("evt-100", "ordered"), deliveryName("evt-71", "ordered")], "Succeeded");
    const seqOf = (o: typeof first) => Number(/^HOOKLINE_.+\/(\d+)$/.exec(o!.metadata.annotations?.[ANNOTATIONS.streamOrdered] ?? "")?.[1]);
    expect(seqOf(first)).toBeLessThan(seqOf(last));
    const sub = await getObj("whsub", ns, "ordered");
    expect(sub?.status?.conditions?.find((c: { type: string }) => c.type === "ConfigurationAdvice")).toMatchObject({ status: "False", reason: "NoAdvice" });
  });

  it("a dead letter blocks its key until it is replayed, while the other keys go on; then the key's events follow in publish order", async () => {
    let fixed = false;
    const k = await keyedReceiver(5, (req) => !fixed && idOf(req) === "bad-1");
    receivers.push(k.r);
    await apply(subscription(ns, "blocking", { url: k.r.url(), eventTypes: ["blocking.*"], ordering: { key: "$.customer.id" }, retry: { maxAttempts: 1 }, circuitBreaker: { failureThreshold: 100 } }));
    await waitForConsumer(jsm, ns, "blocking");
    for (const [id, customer] of [["bad-1", "bad"], ["bad-2", "bad"], ["good-1", "good"], ["bad-3", "bad"], ["good-2", "good"]] as const) {
      await publishEvent(conn, ns, "blocking.order", id, { customer: { id: customer } });
    }
    await waitForPhase(ns, deliveryName("bad-1", "blocking"), "DeadLettered");
    await waitForPhase(ns, [deliveryName("good-1", "blocking"), deliveryName("good-2", "blocking")], "Succeeded");
    // bad-2 and bad-3 wait behind the dead letter, naming it.
    await waitFor(
      async () => {
        const o = await getObj("whdel", ns, deliveryName("bad-2", "blocking"));
        return o?.status?.conditions?.some((c: { reason: string }) => c.reason === "OrderingBlocked");
      },
      { description: "bad-2 OrderingBlocked" },
    );
    expect(k.r.requests.filter((r) => customerOf(r) === "bad").map(idOf)).toEqual(["bad-1"]);
    await waitForDrained(jsm, ns, "blocking");

    fixed = true;
    await kubectlOk(["annotate", "whdel", deliveryName("bad-1", "blocking"), "-n", ns, "hookline.dev/replay=endpoint fixed, INC-7"]);
    await waitFor(() => k.r.requests.filter((r) => customerOf(r) === "bad").length >= 4, { description: "bad's events after the replay" });
    expect(k.r.requests.filter((r) => customerOf(r) === "bad").map(idOf)).toEqual(["bad-1", "bad-1", "bad-2", "bad-3"]);
  });

  it("the deliveries an ordered subscription made wait for their lanes at most spec.maxPending at a time; the rest wait in the stream, then follow in publish order", async () => {
    // One key, and its first request hangs until released: the lane cannot move.
    let release!: () => void;
    const released = new Promise<void>((res) => (release = res));
    const r = await Receiver.start(async () => {
      await released;
      return 200;
    });
    receivers.push(r);
    await apply(subscription(ns, "bounded", { url: r.url(), eventTypes: ["bounded.*"], ordering: { key: "$.customer.id" }, maxPending: 5, timeout: "60s" }));
    await waitForConsumer(jsm, ns, "bounded");
    const ids = Array.from({ length: 20 }, (_, i) => `bounded-${i}`);
    for (const [i, id] of ids.entries()) await publishEvent(conn, ns, "bounded.order", id, { customer: { id: "one" }, n: i });
    const made = async () => (await listObjs("whdel", ns)).filter((o) => (o.spec.subscriptionRef as { name: string }).name === "bounded").length;
    // Five deliveries and fifteen events in the stream, three looks in a row a second apart
    // (without the bound, all twenty become deliveries within a fraction of a second).
    let stable = 0;
    await waitFor(
      async () => {
        const c = (await consumersOf(jsm, ns)).find((x) => x.name === "bounded");
        const ok = (await made()) === 5 && c?.pending === 15 && r.requests.length === 1;
        stable = ok ? stable + 1 : 0;
        return stable >= 3;
      },
      { description: "5 deliveries made, 15 events waiting in the stream, for three looks in a row", timeoutMs: 60_000, intervalMs: 1_000 },
    );
    release();
    await r.waitForRequests(20, 60_000);
    await waitForDrained(jsm, ns, "bounded");
    expect(r.requests.map(idOf)).toEqual(ids);
  });

  it("SIGKILL of the operator mid-stream: every event arrives, and per key the first arrivals are in publish order", async () => {
    const k = await keyedReceiver(40);
    receivers.push(k.r);
    // A short timeout: the message whose hand-off the kill cut comes again after its ack wait (the timeout and a margin).
    await apply(subscription(ns, "crash", { url: k.r.url(), eventTypes: ["crash.*"], ordering: { key: "$.customer.id" }, maxInFlight: 10, timeout: "2s" }));
    await waitForConsumer(jsm, ns, "crash");
    const published = new Map<string, string[]>();
    for (let i = 0; i < 60; i++) {
      const customer = `c${i % 4}`;
      const id = `crash-${(i * 37) % 61}`;
      published.set(customer, [...(published.get(customer) ?? []), id]);
      await publishEvent(conn, ns, "crash.order", id, { customer: { id: customer }, n: i });
    }
    await k.r.waitForRequests(12, 60_000);
    op.kill("SIGKILL");
    await op.exited;
    op = await start("ordering-2");
    await waitFor(() => new Set(k.r.requests.map(idOf)).size === 60, { description: "all 60 events at the receiver after the restart", timeoutMs: 90_000 });
    await waitForDrained(jsm, ns, "crash");
    expect(firstArrivals(k.r.requests)).toEqual(published);
    // Whatever came twice was in flight at the kill: at most one per key.
    expect(k.r.requests.length - 60).toBeLessThanOrEqual(4);
    expect((await listObjs("whdel", ns, ["--field-selector", "status.phase=DeadLettered"])).filter((o) => (o.spec.subscriptionRef as { name: string }).name === "crash")).toHaveLength(0);
  });
});
