// Stream mode's limits with the real operator, a real nats-server and the real API server: a
// tenant that floods its namespace's quota is refused (the HTTP door's 429, JetStream's refusal
// of a direct publish) while another tenant publishes and is delivered; events that
// subscriptions hold (paused, Secret missing, breaker Open) become dead letters (Expired) at the
// age limit instead of staying forever or vanishing; and a subscription that fills a replica's
// held-bytes budget cannot starve another's pulls.
import type { JetStreamManager } from "@nats-io/jetstream";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { StreamQuotaExceededError } from "../../src/index.js";
import type { StreamConnection } from "../../src/jetstream/jetstream.js";
import { createNamespace, deleteNamespace, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, getObj, listObjs, publisherToken, subscription } from "../helpers/kube.js";
import { deliveryName } from "../../src/publish/naming.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";
import { publishEvent, streamOf, waitForConsumer, waitForDrained } from "../helpers/stream.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

let nats: TestNats;
let conn: StreamConnection;
let jsm: JetStreamManager;
beforeAll(async () => {
  nats = await startNats("limits");
  conn = await connectStream(nats.url);
  jsm = await conn.jetstreamManager();
});
afterAll(async () => {
  await conn?.close();
  await nats?.close();
});

async function namespace(prefix: string): Promise<string> {
  const ns = await createNamespace(prefix);
  cleanups.push(() => deleteNamespace(ns));
  return ns;
}

async function operator(namespaces: string[], env: Record<string, string>): Promise<TestOperator> {
  const op = await startOperator({ namespaces, statusIntervalMs: 500, env: { HOOKLINE_NATS_URL: nats.url, ...env } });
  cleanups.push(() => op.stop());
  return op;
}

async function receiver(script: Parameters<typeof Receiver.start>[0]): Promise<Receiver> {
  const r = await Receiver.start(script);
  cleanups.push(() => r.close());
  return r;
}

describe("stream mode: a namespace's quota", () => {
  it("tenant A floods its quota: the door answers 429 naming it and JetStream refuses A's direct publishes, while tenant B publishes and is delivered; A's backlog delivered, A publishes again", async () => {
    const [a, b] = [await namespace("quota-a"), await namespace("quota-b")];
    const got = await receiver(() => 200);
    // A's subscriber is paused: everything A publishes waits in A's stream.
    await apply([subscription(a, "hooks", { url: got.url(`/${a}`), paused: true }), subscription(b, "hooks", { url: got.url(`/${b}`) })]);
    const op = await operator([a, b], { PUBLISH_PORT: "0", HOOKLINE_STREAM_NAMESPACE_MAX_MESSAGES: "20" });
    for (const ns of [a, b]) await waitForConsumer(jsm, ns, "hooks");
    const tokens = { [a]: await publisherToken(a, "publisher"), [b]: await publisherToken(b, "publisher") };
    const post = (ns: string, id: string) =>
      fetch(`http://127.0.0.1:${op.op.publishPort}/v1/namespaces/${ns}/events`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${tokens[ns]}` }, body: JSON.stringify({ type: "order.paid", id, data: { id } }) });

    for (let i = 0; i < 20; i++) expect((await post(a, `a-${i}`)).status).toBe(202);
    const refused = await post(a, "a-20");
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("10");
    const body = (await refused.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ namespace: a, stream: streamOf(a), quota: "messages", limit: 20 });
    expect(String(body.error)).toContain(`namespace ${a} is over its stream quota of messages (HOOKLINE_STREAM_NAMESPACE_MAX_MESSAGES)`);
    // A producer writing to NATS directly is refused by JetStream itself.
    await expect(publishEvent(conn, a, "order.paid", "a-direct", {})).rejects.toBeInstanceOf(StreamQuotaExceededError);

    // B publishes, through the same door and directly, and is delivered meanwhile.
    for (let i = 0; i < 25; i++) expect((await post(b, `b-${i}`)).status).toBe(202);
    for (let i = 25; i < 30; i++) await publishEvent(conn, b, "order.paid", `b-${i}`, {});
    await got.waitForRequests(30);
    expect(new Set(got.requests.map((r) => r.path))).toEqual(new Set([`/${b}`]));
    await waitForDrained(jsm, b, "hooks");

    expect(await op.metric("webhook_stream_publish_refused_total", { namespace: a, quota: "messages" })).toBe(1);
    expect(await op.metric("webhook_stream_publish_refused_total", { namespace: b })).toBe(0);
    await waitFor(async () => (await op.metric("webhook_stream_namespace_usage", { namespace: a, quota: "messages" })) === 20, { description: "A's usage read by the leader", timeoutMs: 15_000 });
    expect(await op.metric("webhook_stream_namespace_quota", { quota: "messages" })).toBe(20);

    // A's subscriber resumes: its 20 events are delivered, and A has room again.
    await kubectlOk(["patch", "whsub", "hooks", "-n", a, "--type", "merge", "-p", '{"spec":{"paused":false}}']);
    await got.waitForRequests(50, 30_000);
    await waitForDrained(jsm, a, "hooks");
    expect((await post(a, "a-20")).status).toBe(202);
  });
});

describe("stream mode: the age limit", () => {
  it("events held by a paused subscription (one of them ordered), one whose Secret is missing and one whose breaker is Open become dead letters (Expired) at the age limit; nothing is dropped, and a delivering subscription is not touched; the ordered one's dead letters block their keys", async () => {
    const ns = await namespace("expiry");
    const ok = await receiver(() => 200);
    const failing = await receiver(() => 500);
    await apply([
      subscription(ns, "paused", { url: ok.url("/paused"), paused: true }),
      subscription(ns, "no-secret", { url: ok.url("/no-secret"), secretRef: { name: "absent" } }),
      subscription(ns, "breaker", { url: failing.url("/breaker"), circuitBreaker: { failureThreshold: 1, cooldown: "5m" }, retry: { maxAttempts: 20, initialBackoff: "100ms", multiplier: 1, maxBackoff: "100ms", jitterPercent: 0 } }),
      subscription(ns, "live", { url: ok.url("/live") }),
      subscription(ns, "ordered", { url: ok.url("/ordered"), paused: true, ordering: { key: "$.i" } }),
    ]);
    const op = await operator([ns], { HOOKLINE_STREAM_MAX_AGE_MS: "3000" });
    for (const s of ["paused", "no-secret", "breaker", "live", "ordered"]) await waitForConsumer(jsm, ns, s);
    for (let i = 0; i < 4; i++) await publishEvent(conn, ns, "order.paid", `evt-${i}`, { i });

    // The live one delivers at once, long before the age.
    await ok.waitForRequests(4);
    expect(ok.requests.every((r) => r.path === "/live")).toBe(true);
    // The breaker opened on the first answer (the four were already in flight): its retries,
    // handed back for the breaker's 5 minutes, come back at the age limit instead.
    await failing.waitForRequests(1);

    const expired = await waitFor(
      async () => {
        const dead = (await listObjs("whdel", ns)).filter((d) => d.status?.phase === "DeadLettered");
        return dead.length === 16 ? dead : undefined;
      },
      { description: "4 events x 4 held subscriptions dead-lettered", timeoutMs: 30_000 },
    );
    for (const d of expired) {
      const s = d.spec as { subscriptionRef: { name: string }; eventId: string; payload: { i: number } };
      expect(d.status?.deadLetter?.reason, `${s.subscriptionRef.name}/${s.eventId}`).toBe("Expired");
      expect(d.status?.deadLetter?.message).toMatch(/the event waited \d+s in the stream without being delivered \(stored .*\); the limit is 3s \(HOOKLINE_STREAM_MAX_AGE_MS\)/);
      expect(d.metadata.annotations?.["hookline.dev/stream-message"]).toMatch(new RegExp(`^${streamOf(ns)}/\\d+$`));
      expect(s.payload).toEqual({ i: Number(s.eventId.slice(4)) });
    }
    const by = (sub: string) => expired.filter((d) => (d.spec as { subscriptionRef: { name: string } }).subscriptionRef.name === sub).map((d) => (d.spec as { eventId: string }).eventId).sort();
    for (const sub of ["paused", "no-secret", "breaker", "ordered"]) expect(by(sub), sub).toEqual(["evt-0", "evt-1", "evt-2", "evt-3"]);
    // The ordered subscription's dead letters name their lane (spec.ordering: the value at $.i).
    for (const d of expired.filter((x) => (x.spec as { subscriptionRef: { name: string } }).subscriptionRef.name === "ordered")) {
      expect(d.status?.ordering).toEqual({ key: "$.i", value: String((d.spec as { payload: { i: number } }).payload.i) });
    }
    // The attempts the breaker's subscription made are in its dead letters' history.
    const breakerAttempts = expired.filter((d) => (d.spec as { subscriptionRef: { name: string } }).subscriptionRef.name === "breaker").reduce((n, d) => n + ((d.status?.history as unknown[] | undefined)?.length ?? 0), 0);
    expect(breakerAttempts).toBe(failing.requests.length);
    for (const sub of ["paused", "no-secret", "breaker", "live", "ordered"]) await waitForDrained(jsm, ns, sub);
    expect((await jsm.streams.info(streamOf(ns))).state.messages).toBe(0);
    expect(await op.metric("webhook_deliveries_finished_total", { namespace: ns, phase: "DeadLettered", reason: "Expired" })).toBe(16);
    expect(ok.requests).toHaveLength(4);

    // Resumed, the ordered subscription's next event of key 0 waits behind its key's dead letter;
    // key 7 has none and is delivered.
    await kubectlOk(["patch", "whsub", "ordered", "-n", ns, "--type=merge", "-p", '{"spec":{"paused":false}}']);
    await publishEvent(conn, ns, "order.paid", "evt-8", { i: 0 });
    await publishEvent(conn, ns, "order.paid", "evt-9", { i: 7 });
    await waitFor(() => ok.requests.some((r) => r.path === "/ordered" && r.headers["webhook-id"] === "evt-9"), { description: "key 7 delivered" });
    const blocked = await waitFor(
      async () => {
        const d = await getObj("whdel", ns, deliveryName("evt-8", "ordered"));
        return d?.status?.conditions?.some((c: { reason: string }) => c.reason === "OrderingBlocked") ? d : undefined;
      },
      { description: "key 0 blocked by its dead letter" },
    );
    expect(blocked.status?.conditions?.find((c: { reason: string }) => c.reason === "OrderingBlocked")?.message).toContain(deliveryName("evt-0", "ordered"));
    expect(ok.requests.filter((r) => r.path === "/ordered").map((r) => r.headers["webhook-id"])).toEqual(["evt-9"]);
  });
});

describe("stream mode: a replica's held-bytes budget", () => {
  it("a subscription whose messages are all in requests to a slow endpoint cannot starve another namespace's pulls: the quiet one delivers every event meanwhile", async () => {
    const [slow, quiet] = [await namespace("held-slow"), await namespace("held-quiet")];
    const hang = await receiver(() => "hang");
    const ok = await receiver(() => 200);
    await apply([subscription(slow, "big", { url: hang.url("/big"), maxInFlight: 1000, timeout: "60s", paused: true }), subscription(quiet, "small", { url: ok.url("/small") })]);
    // Its requests hang until the operator stops: the stop does not wait out the 25 s drain for them.
    const op = await operator([slow, quiet], { HOOKLINE_STREAM_MAX_HELD_BYTES: String(4 * 1024 * 1024), WEBHOOK_DRAIN_TIMEOUT_MS: "1000" });
    for (const [ns, name] of [[slow, "big"], [quiet, "small"]] as const) await waitForConsumer(jsm, ns, name);
    // 100 events of 30 KiB: more than the budget holds (each counts about 60 KiB).
    const pad = "x".repeat(30 * 1024);
    for (let i = 0; i < 100; i++) await publishEvent(conn, slow, "order.paid", `big-${i}`, { i, pad });
    await kubectlOk(["patch", "whsub", "big", "-n", slow, "--type", "merge", "-p", '{"spec":{"paused":false}}']);
    // The slow one takes all the budget but its headroom while nobody else wants any (idle shares
    // are lent), every message in a request that hangs: none can be handed back.
    await waitFor(async () => (await op.metric("webhook_stream_held_bytes", { namespace: slow })) > 3 * 1024 * 1024, { description: "the slow subscription holds most of the budget", timeoutMs: 20_000 });
    await waitFor(() => hang.requests.length * 2 * 30 * 1024 > 3 * 1024 * 1024, { description: "its messages in requests" });

    for (let i = 0; i < 40; i++) await publishEvent(conn, quiet, "order.paid", `small-${i}`, { i });
    await ok.waitForRequests(40, 30_000);
    await waitForDrained(jsm, quiet, "small");
    expect(new Set(ok.requests.map((r) => String(r.headers["webhook-id"])))).toEqual(new Set(Array.from({ length: 40 }, (_, i) => `small-${i}`)));
    // Never more than the budget; the slow one keeps its share and nothing of it was lost.
    expect(await op.metric("webhook_stream_held_bytes")).toBeLessThanOrEqual(4 * 1024 * 1024);
    expect(await op.metric("webhook_stream_held_bytes", { namespace: slow })).toBeGreaterThan(0);
    const big = (await jsm.consumers.info(streamOf(slow), (await waitForConsumer(jsm, slow, "big")).consumer));
    expect(big.num_pending + big.num_ack_pending).toBe(100);
    expect(await listObjs("whdel", slow)).toHaveLength(0);
  });
});

