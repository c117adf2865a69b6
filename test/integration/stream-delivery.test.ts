// Stream mode's delivery end to end: a real nats-server, the real API server, the real operator
// (HOOKLINE_NATS_URL set) and real receivers. Events are published to JetStream; the operator
// consumes them through the same executor as CR mode, acknowledges what is delivered, retries
// with negative acknowledgements, and makes dead letters custom resources that replay as usual.
import type { JetStreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_PAYLOAD_BYTES } from "../../src/api/names.js";
import { deliveryName } from "../../src/publish/naming.js";
import type { StreamConnection } from "../../src/jetstream/jetstream.js";
import { createNamespace, deleteNamespace, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, getObj, listObjs, secret, subscription, TEST_SECRET, waitForPhase } from "../helpers/kube.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";
import { consumersOf, dataBytes, publishEvent, streamOf, waitForConsumer, waitForDrained } from "../helpers/stream.js";

const fastRetry = (maxAttempts: number) => ({ maxAttempts, initialBackoff: "200ms", multiplier: 2, maxBackoff: "5s", jitterPercent: 0 });
// Hostile but valid: non-ASCII of every width, control and separator characters.
const HOSTILE = { note: "déjà vu — 日本語 — 😀𝄞 \u0000\u2028\u2029 \"quoted\" \\ end", nested: [[["x"]]], n: 1.5e-7, "2": "integer-like key", z: -0 };
// Exactly the largest serialized size (each "😀" is 4 bytes, "é" 2, the quotes 2).
const LARGEST = `${"😀".repeat(Math.floor((MAX_PAYLOAD_BYTES - 2) / 4))}é`;

describe("stream mode: delivery from JetStream", () => {
  let nats: TestNats;
  let conn: StreamConnection;
  let jsm: JetStreamManager;
  let ns: string;
  let op: TestOperator;
  const receivers: Receiver[] = [];
  const receiver = async (script: Parameters<typeof Receiver.start>[0]) => {
    const r = await Receiver.start(script);
    receivers.push(r);
    return r;
  };

  beforeAll(async () => {
    nats = await startNats("delivery");
    conn = await connectStream(nats.url);
    jsm = await conn.jetstreamManager();
    ns = await createNamespace("stream-delivery");
    await apply(secret(ns, "signing"));
    op = await startOperator({ namespaces: [ns], statusIntervalMs: 500, env: { HOOKLINE_NATS_URL: nats.url, WEBHOOK_HEALTH_PROBE_INTERVAL_MS: "60000" } });
  });
  afterAll(async () => {
    await op?.stop();
    await conn?.close();
    await nats?.close();
    await Promise.all(receivers.map((r) => r.close()));
    if (ns) await deleteNamespace(ns);
  });

  it("the three customers: acme 503, 503, 200 with the policy's backoff; globex 410 dead-lettered Gone and Disabled; initech exhausted with its history, then replayed with kubectl", async () => {
    const acme = await receiver(Receiver.sequence([503, 503], 200));
    const globex = await receiver(() => 410);
    let initechFixed = false;
    const initech = await receiver(() => (initechFixed ? 200 : 500));
    await apply([
      subscription(ns, "acme", { url: acme.url(), eventTypes: ["order.paid"], secretRef: { name: "signing" }, retry: fastRetry(6) }),
      subscription(ns, "globex", { url: globex.url(), eventTypes: ["order.*"], secretRef: { name: "signing" }, retry: fastRetry(6) }),
      subscription(ns, "initech", { url: initech.url(), secretRef: { name: "signing" }, retry: fastRetry(4), circuitBreaker: { failureThreshold: 100 } }),
    ]);
    for (const s of ["acme", "globex", "initech"]) await waitForConsumer(jsm, ns, s);

    const published = await publishEvent(conn, ns, "order.paid", "evt-1001", { order: 1001, amount: { currency: "EUR", value: 4200 } });
    expect(published.result).toBe("published");

    // acme: delivered on the third attempt, the gaps the policy's (200 ms, then 400 ms).
    await acme.waitForRequests(3);
    await waitForDrained(jsm, ns, "acme");
    expect(acme.requests).toHaveLength(3);
    const gaps = acme.requests.slice(1).map((r, i) => r.at - acme.requests[i]!.at);
    expect(gaps[0]).toBeGreaterThanOrEqual(195);
    expect(gaps[1]).toBeGreaterThanOrEqual(395);
    gaps.forEach((g, i) => expect(g).toBeLessThan(200 * 2 ** i + 1_500));
    expect(await getObj("whdel", ns, deliveryName("evt-1001", "acme"))).toBeUndefined();
    await waitFor(async () => (await op.metric("webhook_deliveries_finished_total", { subscription: "acme", phase: "Succeeded" })) === 1, { description: "acme counted delivered" });
    expect(await op.metric("webhook_delivery_attempts_total", { subscription: "acme", status: "failure", reason: "http_5xx" })).toBe(2);
    await waitFor(async () => (await getObj("whsub", ns, "acme"))?.status?.deliveries?.succeeded === 1, { description: "acme's status counts the delivery" });

    // globex: 410 Gone dead-letters at once as a custom resource and disables the endpoint.
    const [g] = await waitForPhase(ns, deliveryName("evt-1001", "globex"), "DeadLettered");
    expect(globex.requests).toHaveLength(1);
    expect(g!.status!.deadLetter.reason).toBe("Gone");
    expect(g!.spec).toMatchObject({ subscriptionRef: { name: "globex" }, eventType: "order.paid", eventId: "evt-1001", payload: { order: 1001, amount: { currency: "EUR", value: 4200 } } });
    expect(g!.metadata.annotations?.["hookline.dev/stream-message"]).toBe(`${streamOf(ns)}/${published.seq}`);
    await waitFor(async () => (await getObj("whsub", ns, "globex"))?.status?.health?.state === "Disabled", { description: "globex Disabled" });
    expect((await getObj("whsub", ns, "globex"))!.status!.health.reason).toBe("Gone");

    // initech: all four attempts fail; the dead letter has the whole history, as CR mode writes it.
    const [dead] = await waitForPhase(ns, deliveryName("evt-1001", "initech"), "DeadLettered", 30_000);
    expect(initech.requests).toHaveLength(4);
    expect(dead!.status).toMatchObject({ phase: "DeadLettered", attempts: 4, deadLetter: { reason: "Exhausted" }, observedGeneration: 1 });
    expect(dead!.status!.history.map((a: any) => [a.number, a.responseStatus, a.outcome])).toEqual([
      [1, 500, "Failed"],
      [2, 500, "Failed"],
      [3, 500, "Failed"],
      [4, 500, "Failed"],
    ]);
    expect(dead!.status!.conditions.find((c: any) => c.type === "Succeeded")).toMatchObject({ status: "False", reason: "Exhausted" });
    const deadLetters = await kubectlOk(["get", "whdel", "-n", ns, "--field-selector", "status.phase=DeadLettered", "-o", "name"]);
    expect(deadLetters.trim().split("\n").sort()).toEqual([`webhookdelivery.hookline.dev/${deliveryName("evt-1001", "globex")}`, `webhookdelivery.hookline.dev/${deliveryName("evt-1001", "initech")}`]);
    for (const s of ["acme", "globex", "initech"]) await waitForDrained(jsm, ns, s);
    // Interest retention: every subscription acknowledged it, so the stream no longer holds it.
    await waitFor(async () => (await jsm.streams.info(streamOf(ns))).state.messages === 0, { description: "the stream emptied" });
    // The attempts kept for the retries went with the final outcomes.
    // (Listed as the admin: the operator's user reads entries by key and cannot list them.)
    const admin = await connectStream(nats.adminUrl);
    const left: string[] = [];
    try {
      for await (const k of await (await new Kvm(admin.js).open("hookline-attempts")).keys()) left.push(k);
    } finally {
      await admin.close();
    }
    expect(left).toEqual([]);

    // Every request: the event id as webhook-id, a valid signature, the body as CR mode builds it.
    for (const r of [acme, globex, initech]) {
      for (const req of r.requests) {
        expect(req.headers["webhook-id"]).toBe("evt-1001");
        expect(() => Receiver.verify(req, TEST_SECRET)).not.toThrow();
        const body = JSON.parse(req.body) as { timestamp: string };
        // created_at: the specification's name for the event's creation time, the same value.
        expect(body).toEqual({ id: "evt-1001", type: "order.paid", timestamp: expect.any(String), created_at: body.timestamp, data: { order: 1001, amount: { currency: "EUR", value: 4200 } } });
      }
    }
    const timestamp = JSON.parse(initech.requests[0]!.body).timestamp as string;

    // The dead letter replays like any other, with kubectl; the webhook id and timestamp stay the event's.
    initechFixed = true;
    await kubectlOk(["annotate", "whdel", deliveryName("evt-1001", "initech"), "-n", ns, "hookline.dev/replay=endpoint fixed, INC-42"]);
    const [replayed] = await waitForPhase(ns, deliveryName("evt-1001", "initech"), "Succeeded");
    expect(replayed!.status!.lastReplay).toMatchObject({ reason: "endpoint fixed, INC-42" });
    expect(initech.requests).toHaveLength(5);
    expect(initech.requests[4]!.headers["webhook-id"]).toBe("evt-1001");
    expect(() => Receiver.verify(initech.requests[4]!, TEST_SECRET)).not.toThrow();
    expect(JSON.parse(initech.requests[4]!.body)).toMatchObject({ id: "evt-1001", timestamp, created_at: timestamp, data: { order: 1001 } });
  });

  it("sends the published bytes exactly (non-ASCII, the largest payload), signed, with one webhook-id across attempts and the receiver's credentials", async () => {
    // The first attempt of each event fails: the second must carry the same webhook-id and bytes.
    const seen = new Set<string>();
    const r = await receiver((req) => {
      const id = String(req.headers["webhook-id"]);
      if (seen.has(id)) return 200;
      seen.add(id);
      return 500;
    });
    // Receiver credentials apply as in CR mode: a header from a Secret.
    await apply([secret(ns, "api-key", { key: "k-12345" }), subscription(ns, "exact", { url: r.url(), eventTypes: ["exact.*"], secretRef: { name: "signing" }, headersFrom: [{ name: "X-Api-Key", secretKeyRef: { name: "api-key", key: "key" } }], retry: fastRetry(3) })]);
    await waitForConsumer(jsm, ns, "exact");
    await publishEvent(conn, ns, "exact.hostile", "evt-hostile", HOSTILE);
    await publishEvent(conn, ns, "exact.largest", "evt-largest", LARGEST);
    await r.waitForRequests(4);
    await waitForDrained(jsm, ns, "exact");
    expect(r.requests).toHaveLength(4);
    const byId = (id: string) => r.requests.filter((q) => q.headers["webhook-id"] === id);
    for (const [id, data] of [["evt-hostile", HOSTILE], ["evt-largest", LARGEST]] as const) {
      const attempts = byId(id);
      expect(attempts, id).toHaveLength(2);
      for (const req of attempts) {
        expect(dataBytes(req.bytes).equals(Buffer.from(JSON.stringify(data), "utf8")), `${id}: data bytes as published`).toBe(true);
        expect(() => Receiver.verify(req, TEST_SECRET)).not.toThrow();
        expect(JSON.parse(req.body).id).toBe(id);
        expect(req.headers["x-api-key"]).toBe("k-12345");
      }
    }
    expect(dataBytes(byId("evt-largest")[0]!.bytes).length).toBe(MAX_PAYLOAD_BYTES);
    expect(await listObjs("whdel", ns, ["-l", "hookline.dev/subscription=exact"])).toHaveLength(0);
  });

  it("a paused subscription holds what is published meanwhile (nothing fetched) and delivers it on resume", async () => {
    const held = await receiver(() => 200);
    const canary = await receiver(() => 200);
    await apply([
      subscription(ns, "held", { url: held.url(), eventTypes: ["held.*"], paused: true }),
      subscription(ns, "canary", { url: canary.url(), eventTypes: ["canary.*"] }),
    ]);
    await waitForConsumer(jsm, ns, "held");
    await waitForConsumer(jsm, ns, "canary");
    await waitFor(async () => (await getObj("whsub", ns, "held"))?.status?.conditions?.some((c: any) => c.type === "Ready" && c.reason === "Paused"), { description: "held seen paused" });
    for (let i = 1; i <= 5; i++) await publishEvent(conn, ns, "held.order", `evt-held-${i}`, { i });
    // Published after the held events: once it is delivered, the operator has had its chance to fetch them.
    await publishEvent(conn, ns, "canary.ping", "evt-canary", {});
    await canary.waitForRequests(1);
    await waitForDrained(jsm, ns, "canary");
    expect(held.requests).toHaveLength(0);
    const c = (await consumersOf(jsm, ns)).find((x) => x.name === "held")!;
    expect([c.pending, c.ackPending]).toEqual([5, 0]);

    await kubectlOk(["patch", "whsub", "held", "-n", ns, "--type=merge", "-p", '{"spec":{"paused":false}}']);
    await held.waitForRequests(5);
    await waitForDrained(jsm, ns, "held");
    expect(held.requests.map((q) => q.headers["webhook-id"]).sort()).toEqual(["evt-held-1", "evt-held-2", "evt-held-3", "evt-held-4", "evt-held-5"]);
  });

  it("an Open breaker stops fetching: no request during a cooldown, one probe per cooldown, everything delivered once it closes", async () => {
    const COOLDOWN_MS = 2_000;
    // Two failures open the breaker; the first probe fails too; then the endpoint recovers.
    const r = await receiver((req) => (req.n <= 3 ? 503 : 200));
    await apply(subscription(ns, "flaky", { url: r.url(), eventTypes: ["flaky.*"], maxInFlight: 1, retry: { maxAttempts: 20, initialBackoff: "100ms", jitterPercent: 0 }, circuitBreaker: { failureThreshold: 2, cooldown: "2s" } }));
    await waitForConsumer(jsm, ns, "flaky");
    await publishEvent(conn, ns, "flaky.order", "evt-flaky-0", { n: 0 });
    await r.waitForRequests(2);
    await waitFor(async () => (await getObj("whsub", ns, "flaky"))?.status?.breaker?.state === "Open", { description: "flaky's breaker Open" });
    // Published while Open: held in the stream, not attempted.
    for (let i = 1; i <= 4; i++) await publishEvent(conn, ns, "flaky.order", `evt-flaky-${i}`, { n: i });
    // The first probe failed: Open again. In the whole cooldown before it, none of the four was
    // even fetched (a replica that fetched would have handed them back, no longer undelivered).
    await r.waitForRequests(3);
    const during = (await consumersOf(jsm, ns)).find((x) => x.name === "flaky")!;
    expect(during.pending).toBe(4);
    await r.waitForRequests(8, 20_000);
    await waitForDrained(jsm, ns, "flaky");
    expect(r.requests).toHaveLength(8);
    const [, second, probe1, probe2] = r.requests.map((q) => q.at);
    // The breaker opened at the second request: nothing until its cooldown passed, then one probe
    // (which failed and opened it again), then nothing for another cooldown.
    expect(probe1! - second!).toBeGreaterThanOrEqual(COOLDOWN_MS - 20);
    expect(probe2! - probe1!).toBeGreaterThanOrEqual(COOLDOWN_MS - 20);
    expect(r.requests.slice(0, 4).every((q) => q.headers["webhook-id"] === "evt-flaky-0")).toBe(true);
    expect(new Set(r.requests.slice(3).map((q) => q.headers["webhook-id"]))).toEqual(new Set(["evt-flaky-0", "evt-flaky-1", "evt-flaky-2", "evt-flaky-3", "evt-flaky-4"]));
    await waitFor(async () => (await getObj("whsub", ns, "flaky"))?.status?.breaker?.state === "Closed", { description: "flaky's breaker Closed" });
  });

  it("CR mode goes on beside it: a delivery created with kubectl is attempted and dead-lettered by CR mode, and a stream dead letter whose name it took gets a second name", async () => {
    const r = await receiver(() => 410);
    await apply(subscription(ns, "gone2", { url: r.url(), eventTypes: ["gone2.*"] }));
    await waitForConsumer(jsm, ns, "gone2");
    const name = deliveryName("evt-dup", "gone2");
    await apply({ apiVersion: "hookline.dev/v1alpha1", kind: "WebhookDelivery", metadata: { name, namespace: ns }, spec: { subscriptionRef: { name: "gone2" }, eventType: "gone2.x", eventId: "evt-dup", payload: { from: "kubectl" } } });
    const [cr] = await waitForPhase(ns, name, "DeadLettered");
    expect(cr!.metadata.annotations?.["hookline.dev/stream-message"]).toBeUndefined();
    // Health Disabled after the 410: re-enable it, so the stream's event is attempted too.
    await kubectlOk(["annotate", "whsub", "gone2", "-n", ns, "hookline.dev/reset-endpoint=test: the stream event next"]);
    await waitFor(async () => (await getObj("whsub", ns, "gone2"))?.status?.health?.state === "Healthy", { description: "gone2 re-enabled" });
    await publishEvent(conn, ns, "gone2.x", "evt-dup", { from: "stream" });
    const ofGone2 = async () => (await listObjs("whdel", ns, ["--field-selector", "spec.subscriptionRef.name=gone2"])).filter((d) => d.status?.phase === "DeadLettered");
    await waitFor(async () => (await ofGone2()).length === 2, { description: "a second dead letter" });
    const both = await ofGone2();
    const fromStream = both.find((d) => d.metadata.name !== name)!;
    expect(fromStream.metadata.annotations?.["hookline.dev/stream-message"]).toMatch(new RegExp(`^${streamOf(ns)}/\\d+$`));
    expect(fromStream.spec).toMatchObject({ eventId: "evt-dup", payload: { from: "stream" } });
    expect((await getObj("whdel", ns, name))!.spec).toMatchObject({ payload: { from: "kubectl" } });
    expect(r.requests.map((q) => JSON.parse(q.body).data.from)).toEqual(["kubectl", "stream"]);
  });

  it("a dead letter a crashed replica created without its status: CR mode never attempts it, and the message coming again completes it", async () => {
    const r = await receiver(() => 410);
    await apply(subscription(ns, "gone3", { url: r.url(), eventTypes: ["gone3.*"] }));
    await waitForConsumer(jsm, ns, "gone3");
    // What a replica that died right after creating the dead letter leaves: the object, no status.
    const seq = (await jsm.streams.info(streamOf(ns))).state.last_seq + 1;
    const name = deliveryName("evt-crash", "gone3");
    await apply({
      apiVersion: "hookline.dev/v1alpha1",
      kind: "WebhookDelivery",
      metadata: { name, namespace: ns, annotations: { "hookline.dev/stream-message": `${streamOf(ns)}/${seq}`, "hookline.dev/event-timestamp": "2026-01-01T00:00:00.000Z" } },
      spec: { subscriptionRef: { name: "gone3" }, eventType: "gone3.x", eventId: "evt-crash", payload: { n: 1 } },
    });
    const published = await publishEvent(conn, ns, "gone3.x", "evt-crash", { n: 1 });
    expect(published.seq).toBe(seq);
    const [dead] = await waitForPhase(ns, name, "DeadLettered");
    expect(dead!.status).toMatchObject({ attempts: 1, deadLetter: { reason: "Gone" } });
    expect(dead!.status!.history).toHaveLength(1);
    await waitForDrained(jsm, ns, "gone3");
    // One request: the stream's. CR mode left the statusless delivery alone.
    expect(r.requests).toHaveLength(1);
    expect(await listObjs("whdel", ns, ["--field-selector", "spec.subscriptionRef.name=gone3"])).toHaveLength(1);
  });
});
