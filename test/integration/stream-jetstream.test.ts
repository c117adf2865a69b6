// The JetStream layer of stream mode (src/stream) against a real nats-server: the stream, the
// consumers of subscriptions, JetStream's own subject matching of hostile event types, interest
// retention, duplicates, and nats-server going away and coming back mid-test.
import { randomUUID } from "node:crypto";
import type { ConsumerMessages, JetStreamManager, JsMsg } from "@nats-io/jetstream";
import { RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { matchesEventType } from "../../src/core/policy.js";
import { consumerName, deleteConsumer, ensureConsumer, listConsumers, orphanedConsumers, type ConsumerPolicy } from "../../src/stream/consumers.js";
import { STREAM_NAME, StreamUnavailableError, type StreamConnection, type StreamConnectionEvent } from "../../src/stream/jetstream.js";
import { decodeMessage, encodeMessage, type StreamEvent } from "../../src/stream/message.js";
import { freePorts } from "../../src/cluster/ports.js";
import { waitFor } from "../helpers/cluster.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";

const T0 = "2026-12-01T10:00:00.000Z";
const policy = (eventTypes: string[] | undefined, maxInFlight = 10): ConsumerPolicy => ({ eventTypes, maxInFlight, timeoutMs: 10_000 });
const sub = (namespace: string, name: string) => ({ namespace, name, uid: randomUUID() });

describe("stream mode's JetStream layer (real nats-server)", () => {
  let nats: TestNats;
  let conn: StreamConnection;
  let jsm: JetStreamManager;
  let firstEnsure: string;
  const events: StreamConnectionEvent[] = [];

  beforeAll(async () => {
    nats = await startNats("jetstream");
    conn = await connectStream(nats.url, { onEvent: (e) => events.push(e) });
    firstEnsure = (await conn.ensureStream()).action;
    jsm = await conn.jetstreamManager();
  });

  afterAll(async () => {
    await conn?.close();
    await nats?.close();
  });

  const publish = (e: Partial<StreamEvent> & { namespace: string; type: string }) => conn.publish(encodeMessage({ id: randomUUID(), timestamp: T0, data: { n: 1 }, ...e }));
  const storedMessages = async () => (await jsm.streams.info(STREAM_NAME)).state.messages;
  const pendingOf = async (name: string) => {
    const ci = await jsm.consumers.info(STREAM_NAME, name);
    return { pending: ci.num_pending, ackPending: ci.num_ack_pending };
  };
  /** Fetches exactly `n` messages (waiting up to 10 s for them). */
  const take = async (name: string, n: number): Promise<JsMsg[]> => {
    const c = await conn.js.consumers.get(STREAM_NAME, name);
    const out: JsMsg[] = [];
    const deadline = Date.now() + 10_000;
    while (out.length < n && Date.now() < deadline) {
      const batch: ConsumerMessages = await c.fetch({ max_messages: n - out.length, expires: 1_000 });
      for await (const m of batch) out.push(m);
    }
    expect(out, `messages from ${name}`).toHaveLength(n);
    return out;
  };

  it("ensureStream creates one interest-retention stream once, leaves it alone, and updates what may change", async () => {
    expect(firstEnsure).toBe("created");
    expect((await conn.ensureStream()).action).toBe("unchanged");
    const info = await jsm.streams.info(STREAM_NAME);
    expect(info.config).toMatchObject({ subjects: ["hookline.>"], retention: "interest", storage: "file", discard: "new", duplicate_window: 120_000_000_000 });
    const wider = await connectStream(nats.url, { stream: { duplicateWindowMs: 300_000 } });
    try {
      expect((await wider.ensureStream()).action).toBe("updated");
      expect((await jsm.streams.info(STREAM_NAME)).config.duplicate_window).toBe(300_000_000_000);
    } finally {
      await wider.close();
    }
    expect((await conn.ensureStream()).action).toBe("updated"); // back to the default
  });

  it("refuses a stream of its name that keeps messages by limits instead of interest", async () => {
    // The operator's user may touch no other stream than HOOKLINE: the admin makes and reads this one.
    const other = await connectStream(nats.adminUrl, { stream: { name: "LIMITS" } });
    try {
      await (await other.jetstreamManager()).streams.add({ name: "LIMITS", subjects: ["limits.>"], retention: RetentionPolicy.Limits, storage: StorageType.File });
      const err = await other.ensureStream().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StreamUnavailableError);
      expect((err as Error).message).toMatch(/has retention limits .* Hookline needs retention interest/);
    } finally {
      await other.close();
    }
  });

  it("publishes with Nats-Msg-Id = <namespace>/<event id> and acknowledges a re-publish within the window as a duplicate, stored once", async () => {
    const s = sub("dup", "acme");
    const { name } = await ensureConsumer(jsm, STREAM_NAME, s, policy(["order.paid"]));
    const first = await publish({ namespace: "dup", type: "order.paid", id: "evt-1" });
    const again = await publish({ namespace: "dup", type: "order.paid", id: "evt-1", data: { n: 2 } });
    expect(first.duplicate).toBe(false);
    expect(again).toEqual({ ...first, duplicate: true });
    // The same id in another namespace is another event.
    const elsewhere = await publish({ namespace: "dup-2", type: "order.paid", id: "evt-1" });
    expect(elsewhere.duplicate).toBe(false);
    expect(await pendingOf(name)).toEqual({ pending: 1, ackPending: 0 });
    const [m] = await take(name, 1);
    expect(m!.headers?.get("Nats-Msg-Id")).toBe("dup/evt-1");
    expect(decodeMessage(m!).id).toBe("evt-1");
    expect(JSON.parse(new TextDecoder().decode(decodeMessage(m!).data))).toEqual({ n: 1 });
    await m!.ackAck();
    await deleteConsumer(jsm, STREAM_NAME, name);
  });

  it("JetStream's matching of the subjects of hostile event types equals Hookline's rule for every pattern", async () => {
    const ns = "match";
    const types = ["order.paid", "order.paid.v2", "order", "order.", "order..paid", "order._", "order.__x", "orders.x", "a:b/c-d_e.f", "order.-", "Order.paid", "x...", "x.._"];
    const patterns = [["*"], ["order.*"], ["order.paid"], ["order..*"], ["order._"], ["order.*", "order.paid"], ["x..*"], ["x.*"], ["a:b/c-d_e.*"], ["order", "orders.*"], []];
    const consumers = await Promise.all(patterns.map(async (p, i) => ({ p, name: (await ensureConsumer(jsm, STREAM_NAME, sub(ns, `p${i}`), policy(p, 100))).name })));
    for (const type of types) await publish({ namespace: ns, type, id: `evt-${type}` });
    await publish({ namespace: "match-other", type: "order.paid" });
    for (const { p, name } of consumers) {
      const expected = types.filter((t) => matchesEventType(p, t)).sort();
      await waitFor(async () => (await pendingOf(name)).pending === expected.length, { description: `${expected.length} pending for ${JSON.stringify(p)}`, timeoutMs: 10_000 });
      const got = (await take(name, expected.length)).map((m) => {
        void m.ack();
        return decodeMessage(m).type;
      });
      expect(got.sort(), JSON.stringify(p)).toEqual(expected);
      expect((await pendingOf(name)).pending).toBe(0);
    }
  });

  it("creates, updates and deletes a subscription's consumer; an update of its eventTypes keeps the unacknowledged message", async () => {
    const s = sub("life", "acme");
    const created = await ensureConsumer(jsm, STREAM_NAME, s, policy(["order.paid"], 3));
    expect(created.action).toBe("created");
    expect(created.name).toBe(consumerName(s));
    expect(created.info.config).toMatchObject({ filter_subjects: ["hookline.life.order.paid"], max_ack_pending: 3, ack_wait: 40_000_000_000, ack_policy: "explicit", deliver_policy: "new" });
    expect((await ensureConsumer(jsm, STREAM_NAME, s, policy(["order.paid"], 3))).action).toBe("unchanged");

    await publish({ namespace: "life", type: "order.paid", id: "held" });
    const [held] = await take(created.name, 1); // delivered, not acknowledged
    expect((await pendingOf(created.name)).ackPending).toBe(1);

    const updated = await ensureConsumer(jsm, STREAM_NAME, s, policy(["order.*", "invoice.paid"], 5));
    expect(updated.action).toBe("updated");
    expect(updated.info.config).toMatchObject({ filter_subjects: ["hookline.life.invoice.paid", "hookline.life.order.>"], max_ack_pending: 5 });
    expect((await pendingOf(created.name)).ackPending).toBe(1);
    // Handed back, it comes again, and only then is it gone from the stream.
    held!.nak();
    const [again] = await take(created.name, 1);
    expect(decodeMessage(again!).id).toBe("held");
    expect(again!.info.redelivered).toBe(true);
    await publish({ namespace: "life", type: "invoice.paid", id: "new-type" });
    const [fresh] = await take(created.name, 1);
    expect(decodeMessage(fresh!).id).toBe("new-type");
    await again!.ackAck();
    await fresh!.ackAck();

    const listed = await listConsumers(jsm, STREAM_NAME);
    const mine = listed.find((c) => c.consumer === created.name);
    expect(mine).toMatchObject({ namespace: "life", name: "acme", uid: s.uid, filterSubjects: ["hookline.life.invoice.paid", "hookline.life.order.>"] });
    expect(orphanedConsumers(listed, [], ["life"]).map((c) => c.consumer)).toEqual([created.name]);
    expect(orphanedConsumers(listed, [s], ["life"])).toEqual([]);

    expect(await deleteConsumer(jsm, STREAM_NAME, created.name)).toBe(true);
    expect(await deleteConsumer(jsm, STREAM_NAME, created.name)).toBe(false);
    expect((await listConsumers(jsm, STREAM_NAME)).some((c) => c.consumer === created.name)).toBe(false);
  });

  it("maxInFlight caps what a subscription's consumer hands out before acknowledgements come back", async () => {
    const { name } = await ensureConsumer(jsm, STREAM_NAME, sub("inflight", "acme"), policy(["order.*"], 2));
    for (let i = 0; i < 5; i++) await publish({ namespace: "inflight", type: "order.paid", id: `evt-${i}` });
    await waitFor(async () => (await pendingOf(name)).pending === 5, { description: "5 pending" });
    const c = await conn.js.consumers.get(STREAM_NAME, name);
    const asked: JsMsg[] = [];
    for await (const m of await c.fetch({ max_messages: 5, expires: 1_500 })) asked.push(m);
    expect(asked).toHaveLength(2);
    expect(await pendingOf(name)).toEqual({ pending: 3, ackPending: 2 });
    await asked[0]!.ackAck();
    const [third] = await take(name, 1);
    expect(decodeMessage(third!).id).toBe("evt-2");
    await deleteConsumer(jsm, STREAM_NAME, name);
  });

  it("interest retention: a message stays until every interested consumer acknowledged it, and one nobody wants is not kept", async () => {
    const wide = await ensureConsumer(jsm, STREAM_NAME, sub("keep", "wide"), policy(["order.*"]));
    const narrow = await ensureConsumer(jsm, STREAM_NAME, sub("keep", "narrow"), policy(["order.paid"]));
    const before = await storedMessages();
    await publish({ namespace: "keep", type: "order.paid", id: "both" });
    expect(await storedMessages()).toBe(before + 1);
    const [a] = await take(wide.name, 1);
    await a!.ackAck();
    // The narrow consumer has not acknowledged it: still stored.
    await waitFor(async () => (await pendingOf(wide.name)).ackPending === 0, { description: "wide acknowledged" });
    expect(await storedMessages()).toBe(before + 1);
    const [b] = await take(narrow.name, 1);
    await b!.ackAck();
    await waitFor(async () => (await storedMessages()) === before, { description: "the message dropped once both acknowledged", timeoutMs: 10_000 });
    // Matching no consumer: acknowledged to the publisher, and not kept.
    const ack = await publish({ namespace: "keep", type: "invoice.paid", id: "nobody" });
    expect(ack.seq).toBeGreaterThan(0);
    await waitFor(async () => (await storedMessages()) === before, { description: "an event nobody wants is not kept", timeoutMs: 10_000 });
    await deleteConsumer(jsm, STREAM_NAME, wide.name);
    await deleteConsumer(jsm, STREAM_NAME, narrow.name);
  });

  it("nats-server killed mid-test: publishes fail fast as unavailable, and after a restart on the same store the connection, stream, consumer and unacknowledged message are back", async () => {
    const s = sub("crash", "acme");
    const { name } = await ensureConsumer(jsm, STREAM_NAME, s, policy(["order.*"]));
    await publish({ namespace: "crash", type: "order.paid", id: "before-crash" });
    const [held] = await take(name, 1);
    void held; // never acknowledged: it must come back after the crash

    await nats.server.kill();
    await waitFor(() => !conn.isConnected(), { description: "the client noticed the server is gone" });
    const t0 = Date.now();
    const err = await publish({ namespace: "crash", type: "order.paid", id: "while-down" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StreamUnavailableError);
    expect((err as StreamUnavailableError).reason).toBe("unreachable");
    expect((err as Error).message).toContain("(test)");
    expect(Date.now() - t0).toBeLessThan(1_000);

    await nats.server.restart();
    await waitFor(() => conn.isConnected(), { description: "reconnected by itself", timeoutMs: 20_000 });
    expect(events.some((e) => e.type === "disconnected")).toBe(true);
    expect(events.some((e) => e.type === "reconnected")).toBe(true);
    const ci = await waitFor(() => jsm.consumers.info(STREAM_NAME, name), { description: "consumer after restart", timeoutMs: 20_000 });
    expect(ci.config.filter_subjects).toEqual(["hookline.crash.order.>"]);
    // Its only delivery was never acknowledged: JetStream redelivers it (after ack_wait; a nak now).
    expect(ci.num_ack_pending + ci.num_pending).toBe(1);
    await publish({ namespace: "crash", type: "order.paid", id: "after-restart" });
    await waitFor(async () => (await pendingOf(name)).pending === 1, { description: "the new message pending", timeoutMs: 10_000 });
    await deleteConsumer(jsm, STREAM_NAME, name);
  });

  it("connect names where the URL came from when nothing listens, and waitForServer keeps trying until a server is up", async () => {
    const [port] = await freePorts(1);
    const err = await connectStream(`nats://127.0.0.1:${port}`, { source: "HOOKLINE_NATS_URL", connectTimeoutMs: 1_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StreamUnavailableError);
    expect((err as Error).message).toMatch(new RegExp(`^cannot reach NATS at nats://127\\.0\\.0\\.1:${port} \\(HOOKLINE_NATS_URL\\)`));

    await nats.server.stop();
    const retries: StreamConnectionEvent[] = [];
    const pending = connectStream(nats.url, { waitForServer: true, connectTimeoutMs: 1_000, onEvent: (e) => retries.push(e) });
    await waitFor(() => retries.some((e) => e.type === "retrying"), { description: "a retry while the server is down", timeoutMs: 10_000 });
    await nats.server.restart();
    const late = await pending;
    try {
      expect(late.isConnected()).toBe(true);
      expect((await late.ensureStream()).action).toBe("unchanged");
    } finally {
      await late.close();
    }
    await waitFor(() => conn.isConnected(), { description: "the first connection back too", timeoutMs: 20_000 });
  });
});
