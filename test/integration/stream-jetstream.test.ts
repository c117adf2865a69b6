// The JetStream layer of stream mode (src/jetstream) against a real nats-server: the namespaces'
// streams and their quotas, the one stream of earlier versions, the consumers of subscriptions,
// JetStream's own subject matching of hostile event types, interest retention, duplicates, and
// nats-server going away and coming back mid-test.
import { randomUUID } from "node:crypto";
import type { ConsumerMessages, JetStreamManager, JsMsg } from "@nats-io/jetstream";
import { AckPolicy, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { matchesEventType } from "../../src/core/attempt/policy.js";
import { pull, type Received } from "../../src/transports/stream/pull.js";
import { consumerName, deleteConsumer, ensureConsumer, listConsumers, orphanedConsumers, type ConsumerPolicy } from "../../src/jetstream/consumers.js";
import { DEFAULT_LAYOUT, namespaceStreamConfig } from "../../src/jetstream/layout.js";
import { STREAM_NAME, StreamQuotaExceededError, StreamUnavailableError, type StreamConnection, type StreamConnectionEvent } from "../../src/jetstream/jetstream.js";
import { decodeMessage, encodeMessage, type StreamEvent } from "../../src/jetstream/message.js";
import { freePorts } from "../../src/cluster/ports.js";
import { waitFor } from "../helpers/cluster.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";
import { streamOf } from "../helpers/stream.js";

const T0 = "2026-12-01T10:00:00.000Z";
const policy = (eventTypes: string[] | undefined, maxInFlight = 10): ConsumerPolicy => ({ eventTypes, maxInFlight, timeoutMs: 10_000 });
const sub = (namespace: string, name: string) => ({ namespace, name, uid: randomUUID() });

describe("stream mode's JetStream layer (real nats-server)", () => {
  let nats: TestNats;
  let conn: StreamConnection;
  let jsm: JetStreamManager;
  const events: StreamConnectionEvent[] = [];

  beforeAll(async () => {
    nats = await startNats("jetstream");
    conn = await connectStream(nats.url, { onEvent: (e) => events.push(e) });
    jsm = await conn.jetstreamManager();
  });

  afterAll(async () => {
    await conn?.close();
    await nats?.close();
  });

  const publish = (e: Partial<StreamEvent> & { namespace: string; type: string }) => conn.publish(encodeMessage({ id: randomUUID(), timestamp: T0, data: { n: 1 }, ...e }));
  /** The namespace's stream, made as the operator makes it. */
  const stream = async (ns: string): Promise<string> => {
    await conn.ensureStream(ns);
    return streamOf(ns);
  };
  const storedMessages = async (ns: string) => (await jsm.streams.info(streamOf(ns))).state.messages;
  /** A consumer's counts; its namespace is the first part of its name. */
  const pendingOf = async (name: string) => {
    const ci = await jsm.consumers.info(streamOf(name.split("_")[0]!), name);
    return { pending: ci.num_pending, ackPending: ci.num_ack_pending };
  };
  /** Fetches exactly `n` messages (waiting up to 10 s for them). */
  const take = async (name: string, n: number): Promise<JsMsg[]> => {
    const c = await conn.js.consumers.get(streamOf(name.split("_")[0]!), name);
    const out: JsMsg[] = [];
    const deadline = Date.now() + 10_000;
    while (out.length < n && Date.now() < deadline) {
      const batch: ConsumerMessages = await c.fetch({ max_messages: n - out.length, expires: 1_000 });
      for await (const m of batch) out.push(m);
    }
    expect(out, `messages from ${name}`).toHaveLength(n);
    return out;
  };

  it("ensureStream creates one interest-retention stream per namespace once, leaves it alone, and updates what may change (the quota among them)", async () => {
    expect((await conn.ensureStream("made")).action).toBe("created");
    expect((await conn.ensureStream("made")).action).toBe("unchanged");
    const info = await jsm.streams.info(streamOf("made"));
    expect(info.config).toMatchObject({ name: "HOOKLINE_made", subjects: ["hookline.made.>"], retention: "interest", storage: "file", discard: "new", duplicate_window: 120_000_000_000, max_msgs: 1_000_000, max_bytes: 256 * 1024 ** 2, max_age: 14 * 86_400_000 * 1_000_000, metadata: { "hookline.dev/namespace": "made" } });
    const other = await connectStream(nats.url, { stream: { duplicateWindowMs: 300_000, namespaceMaxMessages: 50, maxAgeMs: 60_000 } });
    try {
      expect((await other.ensureStream("made")).action).toBe("updated");
      expect((await jsm.streams.info(streamOf("made"))).config).toMatchObject({ duplicate_window: 300_000_000_000, max_msgs: 50, max_age: (60_000 + 86_400_000) * 1_000_000 });
    } finally {
      await other.close();
    }
    expect((await conn.ensureStream("made")).action).toBe("updated"); // back to the default
    // A publisher never makes a stream: a namespace without one is said so, naming it.
    const err = await publish({ namespace: "nostream", type: "order.paid" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StreamUnavailableError);
    expect((err as StreamUnavailableError).reason).toBe("no-stream");
    expect((err as Error).message).toMatch(/stream HOOKLINE_nostream is missing\. The operator \(stream mode\) makes it with the namespace's first WebhookSubscription/);
    await expect(jsm.streams.info(streamOf("nostream"))).rejects.toThrow(/stream not found/);
  });

  it("a namespace over its quota of messages or bytes is refused by JetStream with StreamQuotaExceededError; stored events are kept and other namespaces publish", async () => {
    const small = await connectStream(nats.url, { stream: { namespaceMaxMessages: 3, namespaceMaxBytes: 1024 * 1024 } });
    try {
      for (const ns of ["full", "roomy"]) await small.ensureStream(ns);
      for (const ns of ["full", "roomy"]) await ensureConsumer(jsm, streamOf(ns), sub(ns, "holder"), policy(undefined));
      for (let i = 0; i < 3; i++) await small.publish(encodeMessage({ id: `evt-${i}`, type: "order.paid", namespace: "full", timestamp: T0, data: { i } }));
      const err = await small.publish(encodeMessage({ id: "evt-3", type: "order.paid", namespace: "full", timestamp: T0, data: { i: 3 } })).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StreamQuotaExceededError);
      expect(err).toMatchObject({ namespace: "full", stream: "HOOKLINE_full", quota: "messages" });
      expect((err as Error).message).toMatch(/^namespace full is over its stream quota of messages \(HOOKLINE_STREAM_NAMESPACE_MAX_MESSAGES\).*Publish it again with the same id/);
      expect(await storedMessages("full")).toBe(3);
      // Another namespace is not affected.
      expect((await small.publish(encodeMessage({ id: "evt-0", type: "order.paid", namespace: "roomy", timestamp: T0, data: {} }))).duplicate).toBe(false);
      // Bytes (under a quota of 100 messages): events of 250 KiB fill 1 MiB after four.
      const heavy = await connectStream(nats.url, { stream: { namespaceMaxMessages: 100, namespaceMaxBytes: 1024 * 1024 } });
      try {
        await heavy.ensureStream("heavy");
        await ensureConsumer(jsm, streamOf("heavy"), sub("heavy", "holder"), policy(undefined));
        const big = { pad: "x".repeat(250 * 1024) };
        let stored = 0;
        let bytesErr: unknown;
        while (!bytesErr && stored < 10) {
          await heavy.publish(encodeMessage({ id: `big-${stored}`, type: "order.paid", namespace: "heavy", timestamp: T0, data: big })).then(() => stored++, (e: unknown) => (bytesErr = e));
        }
        expect(bytesErr).toMatchObject({ name: "StreamQuotaExceededError", namespace: "heavy", quota: "bytes" });
        expect((bytesErr as Error).message).toContain("quota of bytes (HOOKLINE_STREAM_NAMESPACE_MAX_BYTES)");
        expect(stored).toBe(4);
        expect(await storedMessages("heavy")).toBe(4);
      } finally {
        await heavy.close();
      }
    } finally {
      await small.close();
    }
  });

  it("a quota the servers' JetStream storage cannot reserve: the namespace's stream is refused, saying what to do", async () => {
    const huge = await connectStream(nats.url, { stream: { namespaceMaxBytes: 1024 ** 4 } });
    try {
      const err = await huge.ensureStream("huge").catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StreamUnavailableError);
      expect(err).toMatchObject({ reason: "refused" });
      expect((err as Error).message).toMatch(/has no room for stream HOOKLINE_huge: every namespace's stream reserves its quota of 1099511627776 bytes \(HOOKLINE_STREAM_NAMESPACE_MAX_BYTES\).*Give the NATS servers more JetStream storage/);
      await expect(jsm.streams.info(streamOf("huge"))).rejects.toThrow(/stream not found/);
    } finally {
      await huge.close();
    }
  });

  it("the one stream of earlier versions: refused, untouched, while it holds an event; removed once empty (nothing lost)", async () => {
    const legacyNats = await startNats("legacy");
    // The earlier version's stream, consumer and event (made by the admin: today's operator user is not that version's).
    const earlier = await connectStream(legacyNats.adminUrl);
    const c = await connectStream(legacyNats.url);
    try {
      const m = await earlier.jetstreamManager();
      await m.streams.add({ name: STREAM_NAME, subjects: ["hookline.>"], retention: RetentionPolicy.Interest, storage: StorageType.File });
      const old = "shop_acme_0123456789abcdef";
      await m.consumers.add(STREAM_NAME, { durable_name: old, ack_policy: AckPolicy.Explicit, filter_subject: "hookline.shop.>" });
      await earlier.js.publish("hookline.shop.order.paid", encodeMessage({ id: "old", type: "order.paid", namespace: "shop", timestamp: T0, data: {} }).body);
      const refused = await c.prepare().catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(StreamUnavailableError);
      expect(refused).toMatchObject({ reason: "legacy-stream" });
      expect((refused as Error).message).toMatch(/stream HOOKLINE on NATS at .* holds 1 events not yet delivered; this version keeps one stream per namespace \(HOOKLINE_<namespace>\) and neither deletes nor moves them/);
      const kept = await m.streams.info(STREAM_NAME);
      expect(kept.state.messages).toBe(1);
      expect(kept.config.subjects).toEqual(["hookline.>"]);
      // The consumer's count follows the stream a moment after the publish is acknowledged.
      await waitFor(async () => (await m.consumers.info(STREAM_NAME, old)).num_pending === 1, { description: "the old stream's event pending at its consumer", timeoutMs: 5_000 });
      // Its event delivered (by the version that wrote it): then it goes, and the namespaces' streams can be made.
      const got: JsMsg[] = [];
      for await (const x of await (await earlier.js.consumers.get(STREAM_NAME, old)).fetch({ max_messages: 1, expires: 2_000 })) got.push(x);
      await got[0]!.ackAck();
      await waitFor(async () => (await m.streams.info(STREAM_NAME)).state.messages === 0, { description: "the old stream emptied" });
      expect(await c.prepare()).toEqual({ legacy: "removed" });
      await expect(m.streams.info(STREAM_NAME)).rejects.toThrow(/stream not found/);
      expect((await c.ensureStream("shop")).action).toBe("created");
      expect(await c.prepare()).toEqual({ legacy: "none" });
    } finally {
      await c.close();
      await earlier.close();
      await legacyNats.close();
    }
  });

  it("another installation's streams are refused and left as they are: the old single stream even when empty, a namespace's stream at start and when ensured", async () => {
    const claimNats = await startNats("claims");
    const admin = await connectStream(claimNats.adminUrl);
    const teamA = await connectStream(claimNats.url, { stream: { owner: "team-a" } });
    const teamB = await connectStream(claimNats.url, { stream: { owner: "team-b" } });
    try {
      const m = await admin.jetstreamManager();
      const theirs = /belongs to another Hookline installation, "team-a" \(this one is "team-b", HOOKLINE_INSTALLATION\).*Give each installation its own NATS account/;
      // The old single stream of an installation of the earlier version, empty: team-b neither deletes nor retires it.
      await m.streams.add({ name: STREAM_NAME, subjects: ["hookline.>"], retention: RetentionPolicy.Interest, storage: StorageType.File, metadata: { "hookline.dev/installation": "team-a" } });
      const legacy = await teamB.prepare().catch((e: unknown) => e);
      expect(legacy).toMatchObject({ reason: "refused" });
      expect((legacy as Error).message).toMatch(new RegExp(`^stream ${STREAM_NAME} on NATS at .*${theirs.source}`));
      expect((await m.streams.info(STREAM_NAME)).config.subjects).toEqual(["hookline.>"]);
      await m.streams.delete(STREAM_NAME);

      // team-a's namespace stream: claimed in its metadata; team-b refuses it at start and when asked to make it, and changes nothing.
      expect((await teamA.ensureStream("shop")).action).toBe("created");
      const before = (await m.streams.info(streamOf("shop"))).config;
      expect(before.metadata).toMatchObject({ "hookline.dev/namespace": "shop", "hookline.dev/installation": "team-a" });
      for (const attempt of [() => teamB.prepare(), () => teamB.ensureStream("shop")]) {
        const err = await attempt().catch((e: unknown) => e);
        expect(err).toMatchObject({ reason: "refused" });
        expect((err as Error).message).toMatch(new RegExp(`^stream HOOKLINE_shop on NATS at .*${theirs.source}`));
      }
      expect((await m.streams.info(streamOf("shop"))).config).toEqual(before);
      expect((await teamB.namespaceStreams()).map((s) => [s.stream, s.owner])).toEqual([["HOOKLINE_shop", "team-a"]]);

      // A namespace stream nobody claimed (made by hand, or before installations claimed streams) is claimed by the next ensureStream.
      await m.streams.add({ ...namespaceStreamConfig(DEFAULT_LAYOUT, "cart") });
      expect((await teamB.ensureStream("cart")).action).toBe("updated");
      expect((await m.streams.info(streamOf("cart"))).config.metadata).toMatchObject({ "hookline.dev/namespace": "cart", "hookline.dev/installation": "team-b" });
      expect((await teamB.ensureStream("cart")).action).toBe("unchanged");
    } finally {
      for (const c of [teamA, teamB, admin]) await c.close();
      await claimNats.close();
    }
  });

  it("refuses a stream of its name that keeps messages by limits instead of interest", async () => {
    // Made by someone else (the admin), not the operator.
    const admin = await connectStream(nats.adminUrl);
    await (await admin.jetstreamManager()).streams.add({ name: "LIMITS_x", subjects: ["limits.>"], retention: RetentionPolicy.Limits, storage: StorageType.File });
    await admin.close();
    const other = await connectStream(nats.url, { stream: { name: "LIMITS" } });
    try {
      const err = await other.ensureStream("x").catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StreamUnavailableError);
      expect((err as Error).message).toMatch(/has retention limits .* Hookline needs retention interest/);
    } finally {
      await other.close();
    }
  });

  it("publishes with Nats-Msg-Id = <namespace>/<event id> and acknowledges a re-publish within the window as a duplicate, stored once", async () => {
    const s = sub("dup", "acme");
    await stream("dup-2");
    const { name } = await ensureConsumer(jsm, await stream("dup"), s, policy(["order.paid"]));
    const first = await publish({ namespace: "dup", type: "order.paid", id: "evt-1" });
    const again = await publish({ namespace: "dup", type: "order.paid", id: "evt-1", data: { n: 2 } });
    expect(first.duplicate).toBe(false);
    expect(again).toEqual({ ...first, duplicate: true });
    // The same id in another namespace is another event.
    const elsewhere = await publish({ namespace: "dup-2", type: "order.paid", id: "evt-1" });
    expect(elsewhere.duplicate).toBe(false);
    // The consumer's count follows the stream a moment after the publish is acknowledged (CI saw 0).
    await waitFor(async () => (await pendingOf(name)).pending > 0, { description: "the event pending at the consumer", timeoutMs: 5_000 });
    expect(await pendingOf(name)).toEqual({ pending: 1, ackPending: 0 });
    const [m] = await take(name, 1);
    expect(m!.headers?.get("Nats-Msg-Id")).toBe("dup/evt-1");
    expect(decodeMessage(m!).id).toBe("evt-1");
    expect(JSON.parse(new TextDecoder().decode(decodeMessage(m!).data))).toEqual({ n: 1 });
    await m!.ackAck();
    await deleteConsumer(jsm, streamOf("dup"), name);
  });

  it("JetStream's matching of the subjects of hostile event types equals Hookline's rule for every pattern", async () => {
    const ns = "match";
    const types = ["order.paid", "order.paid.v2", "order", "order.", "order..paid", "order._", "order.__x", "orders.x", "a:b/c-d_e.f", "order.-", "Order.paid", "x...", "x.._"];
    const patterns = [["*"], ["order.*"], ["order.paid"], ["order..*"], ["order._"], ["order.*", "order.paid"], ["x..*"], ["x.*"], ["a:b/c-d_e.*"], ["order", "orders.*"], []];
    await stream("match-other");
    const matchStream = await stream(ns);
    const consumers = await Promise.all(patterns.map(async (p, i) => ({ p, name: (await ensureConsumer(jsm, matchStream, sub(ns, `p${i}`), policy(p, 100))).name })));
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
    const lifeStream = await stream("life");
    const created = await ensureConsumer(jsm, lifeStream, s, policy(["order.paid"], 3));
    expect(created.action).toBe("created");
    expect(created.name).toBe(consumerName(s));
    expect(created.info.config).toMatchObject({ filter_subjects: ["hookline.life.order.paid"], max_ack_pending: 3, ack_wait: 40_000_000_000, ack_policy: "explicit", deliver_policy: "new" });
    expect((await ensureConsumer(jsm, lifeStream, s, policy(["order.paid"], 3))).action).toBe("unchanged");

    await publish({ namespace: "life", type: "order.paid", id: "held" });
    const [held] = await take(created.name, 1); // delivered, not acknowledged
    expect((await pendingOf(created.name)).ackPending).toBe(1);

    const updated = await ensureConsumer(jsm, lifeStream, s, policy(["order.*", "invoice.paid"], 5));
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

    const listed = await listConsumers(jsm, lifeStream);
    const mine = listed.find((c) => c.consumer === created.name);
    expect(mine).toMatchObject({ namespace: "life", name: "acme", uid: s.uid, filterSubjects: ["hookline.life.invoice.paid", "hookline.life.order.>"] });
    expect(orphanedConsumers(listed, [], ["life"]).map((c) => c.consumer)).toEqual([created.name]);
    expect(orphanedConsumers(listed, [s], ["life"])).toEqual([]);

    expect(await deleteConsumer(jsm, lifeStream, created.name)).toBe(true);
    expect(await deleteConsumer(jsm, lifeStream, created.name)).toBe(false);
    expect((await listConsumers(jsm, lifeStream)).some((c) => c.consumer === created.name)).toBe(false);
  });

  it("a pull takes a count and a byte limit together; one cut by its byte limit loses nothing, and one whose first message is larger says so", async () => {
    const { name } = await ensureConsumer(jsm, await stream("pulls"), sub("pulls", "acme"), policy(undefined, 100));
    const small = { pad: "s".repeat(1_000) };
    const big = { pad: "b".repeat(100_000) };
    for (let i = 0; i < 5; i++) await publish({ namespace: "pulls", type: "order.paid", id: `small-${i}`, data: small });
    await publish({ namespace: "pulls", type: "order.paid", id: "big", data: big });
    const got: Received[] = [];
    const take = (batch: number, maxBytes: number) => pull(conn.nc, streamOf("pulls"), name, { inboxPrefix: conn.inboxPrefix, batch, maxBytes, expiresMs: 1_000 }, (m) => got.push(m));
    // The count ends it first.
    expect(await take(2, 1_000_000)).toMatchObject({ got: 2, end: "batch" });
    // The byte limit ends it: the three small ones fit, the big one does not; all three are handed out.
    const cut = await take(10, 8_000);
    expect(cut).toMatchObject({ got: 3, end: "too-big" });
    expect(cut.bytes).toBeLessThanOrEqual(8_000);
    // The big one first, with too little room: nothing, and said so.
    expect(await take(10, 50_000)).toEqual({ got: 0, bytes: 0, end: "too-big" });
    expect(await take(10, 200_000)).toMatchObject({ got: 1, end: "expired" });
    expect(got.map((m) => decodeMessage(m).id)).toEqual(["small-0", "small-1", "small-2", "small-3", "small-4", "big"]);
    expect(got.map((m) => m.seq)).toEqual([...got.map((m) => m.seq)].sort((a, b) => a - b));
    expect(got.every((m) => m.deliveryCount === 1 && m.storedAt > Date.now() - 60_000 && m.size > m.data.length)).toBe(true);
    // Answered through the detached message: handed back with a delay, it comes again after it; acknowledged, it goes.
    got[0]!.nak(1_500);
    for (const m of got.slice(1)) m.ack();
    await waitFor(async () => (await pendingOf(name)).ackPending === 1, { description: "five acknowledged" });
    const again: Received[] = [];
    await pull(conn.nc, streamOf("pulls"), name, { inboxPrefix: conn.inboxPrefix, batch: 1, maxBytes: 10_000, expiresMs: 5_000 }, (m) => again.push(m));
    expect(again.map((m) => [decodeMessage(m).id, m.deliveryCount])).toEqual([["small-0", 2]]);
    again[0]!.term();
    await waitFor(async () => (await pendingOf(name)).ackPending === 0, { description: "terminated" });
    // A consumer that does not exist: an error, not a silent empty pull.
    await expect(pull(conn.nc, streamOf("pulls"), "nobody", { inboxPrefix: conn.inboxPrefix, batch: 1, maxBytes: 10_000, expiresMs: 1_000 }, () => undefined)).rejects.toThrow(/JetStream answered the pull|503/);
    await deleteConsumer(jsm, streamOf("pulls"), name);
  });

  it("maxInFlight caps what a subscription's consumer hands out before acknowledgements come back", async () => {
    const { name } = await ensureConsumer(jsm, await stream("inflight"), sub("inflight", "acme"), policy(["order.*"], 2));
    for (let i = 0; i < 5; i++) await publish({ namespace: "inflight", type: "order.paid", id: `evt-${i}` });
    await waitFor(async () => (await pendingOf(name)).pending === 5, { description: "5 pending" });
    const c = await conn.js.consumers.get(streamOf("inflight"), name);
    const asked: JsMsg[] = [];
    for await (const m of await c.fetch({ max_messages: 5, expires: 1_500 })) asked.push(m);
    expect(asked).toHaveLength(2);
    expect(await pendingOf(name)).toEqual({ pending: 3, ackPending: 2 });
    await asked[0]!.ackAck();
    const [third] = await take(name, 1);
    expect(decodeMessage(third!).id).toBe("evt-2");
    await deleteConsumer(jsm, streamOf("inflight"), name);
  });

  it("interest retention: a message stays until every interested consumer acknowledged it, and one nobody wants is not kept", async () => {
    const keep = await stream("keep");
    const wide = await ensureConsumer(jsm, keep, sub("keep", "wide"), policy(["order.*"]));
    const narrow = await ensureConsumer(jsm, keep, sub("keep", "narrow"), policy(["order.paid"]));
    const before = await storedMessages("keep");
    await publish({ namespace: "keep", type: "order.paid", id: "both" });
    expect(await storedMessages("keep")).toBe(before + 1);
    const [a] = await take(wide.name, 1);
    await a!.ackAck();
    // The narrow consumer has not acknowledged it: still stored.
    await waitFor(async () => (await pendingOf(wide.name)).ackPending === 0, { description: "wide acknowledged" });
    expect(await storedMessages("keep")).toBe(before + 1);
    const [b] = await take(narrow.name, 1);
    await b!.ackAck();
    await waitFor(async () => (await storedMessages("keep")) === before, { description: "the message dropped once both acknowledged", timeoutMs: 10_000 });
    // Matching no consumer: acknowledged to the publisher, and not kept.
    const ack = await publish({ namespace: "keep", type: "invoice.paid", id: "nobody" });
    expect(ack.seq).toBeGreaterThan(0);
    await waitFor(async () => (await storedMessages("keep")) === before, { description: "an event nobody wants is not kept", timeoutMs: 10_000 });
    await deleteConsumer(jsm, keep, wide.name);
    await deleteConsumer(jsm, keep, narrow.name);
  });

  it("nats-server killed mid-test: publishes fail fast as unavailable, and after a restart on the same store the connection, stream, consumer and unacknowledged message are back", async () => {
    const s = sub("crash", "acme");
    const { name } = await ensureConsumer(jsm, await stream("crash"), s, policy(["order.*"]));
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
    const ci = await waitFor(() => jsm.consumers.info(streamOf("crash"), name), { description: "consumer after restart", timeoutMs: 20_000 });
    expect(ci.config.filter_subjects).toEqual(["hookline.crash.order.>"]);
    // Its only delivery was never acknowledged: JetStream redelivers it (after ack_wait; a nak now).
    expect(ci.num_ack_pending + ci.num_pending).toBe(1);
    await publish({ namespace: "crash", type: "order.paid", id: "after-restart" });
    // Both are there: the new message and the held one. Which count holds the held one depends on
    // whether the consumer's delivered sequence reached the disk before the SIGKILL (then it is
    // ack-pending; if not, it is pending again, as if never delivered), so the sum is the promise.
    await waitFor(async () => {
      const p = await pendingOf(name);
      return p.pending >= 1 && p.pending + p.ackPending === 2;
    }, { description: "the new message pending beside the held one", timeoutMs: 10_000 });
    await deleteConsumer(jsm, streamOf("crash"), name);
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
      expect((await late.ensureStream("crash")).action).toBe("unchanged");
    } finally {
      await late.close();
    }
    await waitFor(() => conn.isConnected(), { description: "the first connection back too", timeoutMs: 20_000 });
  });
});
