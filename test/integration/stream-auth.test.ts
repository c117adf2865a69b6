// Stream mode's access control against a real nats-server with accounts and users (the
// permissions of src/jetstream/permissions.ts): NATS itself refuses a publisher of one namespace
// everything but that namespace's events (another namespace's subject, any stream, its own
// included, consumers, buckets, acknowledgements, the operator's replies), and anyone without
// credentials; with one stream per namespace a publisher cannot reach another namespace's
// duplicate window either; the operator's user does what stream mode needs, end to end; the
// operator refuses a NATS that lets anyone in (HOOKLINE_NATS_ALLOW_INSECURE=true accepts one); a
// message that does not belong to its subject is terminated, not delivered; two installations on
// one NATS account never take each other's streams or consumers, and the sweeps remove only
// their own; over TLS the operator trusts the CA it is given, and a client certificate the server
// verifies is a credential.
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { JetStreamManager } from "@nats-io/jetstream";
import { headers as natsHeaders } from "@nats-io/transport-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CONSUMER_METADATA, listConsumers } from "../../src/jetstream/consumers.js";
import { StreamUnavailableError, type StreamConnection } from "../../src/jetstream/jetstream.js";
import { DEFAULT_LAYOUT, namespaceStreamConfig } from "../../src/jetstream/layout.js";
import { encodeMessage } from "../../src/jetstream/message.js";
import { OPERATOR_INBOX_PREFIX } from "../../src/jetstream/permissions.js";
import { eventSubject } from "../../src/jetstream/subjects.js";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { apply, listObjs, secret, subscription, TEST_SECRET } from "../helpers/kube.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";
import { TestCa } from "../helpers/pki.js";
import { publishEvent, streamOf, waitForConsumer, waitForDrained } from "../helpers/stream.js";

const T0 = "2026-12-01T10:00:00.000Z";
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});
const later = <T>(what: T, close: (t: T) => Promise<unknown>): T => {
  cleanups.push(() => close(what));
  return what;
};

/** A publisher's connection: replies on the default inbox, the only one it may read. */
const connectPublisher = (url: string) => connectStream(url, { inboxPrefix: "_INBOX", source: "publisher" });
/** Why NATS refused a request: the client's Permissions Violation, however deep in the causes. */
const refusal = async (p: Promise<unknown>): Promise<string> => {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "refused").toBeInstanceOf(Error);
  const messages: string[] = [];
  for (let e: unknown = err; e instanceof Error; e = e.cause) messages.push(e.message);
  return messages.join(" / ");
};
const opLine = (op: TestOperator, msg: string | RegExp) => op.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => (typeof msg === "string" ? l.msg === msg : msg.test(String(l.msg))));

describe("NATS refuses a publisher everything but its namespace's events, and anyone without credentials", () => {
  let nats: TestNats;
  let admin: StreamConnection;
  let jsm: JetStreamManager;
  let a: string;
  let b: string;
  let op: TestOperator;
  let receiver: Receiver;

  beforeAll(async () => {
    nats = await startNats("auth");
    admin = await connectStream(nats.adminUrl);
    a = await createNamespace("stream-auth-a");
    b = await createNamespace("stream-auth-b");
    for (const ns of [a, b]) await apply(secret(ns, "signing"));
    receiver = await Receiver.start(() => 200);
    // The operator authenticates with a user and a password file (the chart's Secret, cluster up's file).
    const { user, passwordFile } = nats.server.operator!;
    op = await startOperator({ namespaces: [a, b], env: { HOOKLINE_NATS_URL: nats.address, HOOKLINE_NATS_USER: user, HOOKLINE_NATS_PASSWORD_FILE: passwordFile, HOOKLINE_INSTALLATION: "team-a" } });
    for (const ns of [a, b]) await apply(subscription(ns, "all", { url: receiver.url(`/${ns}`), secretRef: { name: "signing" } }));
    jsm = await admin.jetstreamManager();
    for (const ns of [a, b]) await waitForConsumer(jsm, ns, "all");
  });
  afterAll(async () => {
    await op?.stop();
    await admin?.close();
    await receiver?.close();
    await nats?.close();
    for (const ns of [a, b]) if (ns) await deleteNamespace(ns);
  });

  it("the operator's user does what stream mode needs: a publisher's event is delivered, signed, and acknowledged", async () => {
    await waitFor(() => op.op.ready.ready, { description: "the operator ready" });
    const pub = later(await connectPublisher(await nats.publisherUrl(a)), (c) => c.close());
    expect((await publishEvent(pub, a, "order.paid", "evt-a1", { n: 1 })).result).toBe("published");
    const [req] = await receiver.waitForRequests(1);
    expect(req!.path).toBe(`/${a}`);
    expect(req!.headers["webhook-id"]).toBe("evt-a1");
    expect(() => Receiver.verify(req!, TEST_SECRET)).not.toThrow();
    await waitForDrained(jsm, a, "all");
    expect(nats.operatorViolations()).toEqual([]);
  });

  it("a publisher of A: NATS refuses B's subject, every stream (B's and its own), consumers, buckets, acknowledgements and the operator's replies", async () => {
    const pub = later(await connectPublisher(await nats.publisherUrl(a)), (c) => c.close());
    const stored = async () => [(await jsm.streams.info(streamOf(a))).state.messages, (await jsm.streams.info(streamOf(b))).state.messages];
    const before = await stored();

    const intoB = await publishEvent(pub, b, "order.paid", "evt-into-b", { n: 1 }).catch((e: unknown) => e);
    expect(intoB).toBeInstanceOf(StreamUnavailableError);
    expect((intoB as StreamUnavailableError).reason).toBe("refused");
    expect((intoB as Error).message).toContain(`Permissions Violation for Publish to "${eventSubject(b, "order.paid")}"`);
    expect(await stored()).toEqual(before);

    // Reading: events (any namespace's, its own too), the operator's replies (pulled messages).
    for (const subject of ["hookline.>", `hookline.${a}.>`, `${OPERATOR_INBOX_PREFIX}.>`, "$JS.ACK.>"]) {
      const sub = pub.nc.subscribe(subject);
      expect(String(await sub.closed), subject).toContain(`Permissions Violation for Subscription to "${subject}"`);
    }
    // The JetStream API: B's stream and its own (read, purge, delete, change, a message's get or delete), the list of
    // streams, a stream of its own making on B's subjects, B's consumers and a pull, the buckets (read and write).
    const consumer = (await listConsumers(jsm, streamOf(b))).find((c) => c.namespace === b)!.consumer;
    const refused: Array<[string, string]> = [["$JS.API.INFO", ""], ["$JS.API.STREAM.LIST", ""], ["$JS.API.STREAM.NAMES", ""]];
    for (const stream of [streamOf(b), streamOf(a)]) {
      refused.push(
        [`$JS.API.STREAM.INFO.${stream}`, ""],
        [`$JS.API.STREAM.DELETE.${stream}`, ""],
        [`$JS.API.STREAM.PURGE.${stream}`, ""],
        [`$JS.API.STREAM.UPDATE.${stream}`, JSON.stringify({ ...namespaceStreamConfig(DEFAULT_LAYOUT, b), name: stream, max_msgs: 1 })],
        [`$JS.API.STREAM.MSG.GET.${stream}`, JSON.stringify({ seq: 1 })],
        [`$JS.API.STREAM.MSG.DELETE.${stream}`, JSON.stringify({ seq: 1 })],
        [`$JS.API.DIRECT.GET.${stream}`, JSON.stringify({ seq: 1 })],
        [`$JS.API.CONSUMER.LIST.${stream}`, ""],
      );
    }
    refused.push(
      ["$JS.API.STREAM.CREATE.EVIL", JSON.stringify({ name: "EVIL", subjects: [`hookline.${b}.x`] })],
      [`$JS.API.CONSUMER.INFO.${streamOf(b)}.${consumer}`, ""],
      [`$JS.API.CONSUMER.DELETE.${streamOf(b)}.${consumer}`, ""],
      [`$JS.API.CONSUMER.DURABLE.CREATE.${streamOf(b)}.spy`, JSON.stringify({ stream_name: streamOf(b), config: { durable_name: "spy", ack_policy: "none" } })],
      [`$JS.API.CONSUMER.MSG.NEXT.${streamOf(b)}.${consumer}`, JSON.stringify({ batch: 1, expires: 1_000_000_000 })],
      ["$JS.API.DIRECT.GET.KV_hookline-endpoints.$KV.hookline-endpoints.replica.x", ""],
      ["$KV.hookline-endpoints.endpoint.forged", JSON.stringify({ breaker: { state: "Open" } })],
      ["$KV.hookline-attempts.x.1", "{}"],
    );
    for (const [subject, body] of refused) expect(await refusal(pub.nc.request(subject, body, { timeout: 5_000 })), subject).toContain(`Permissions Violation for Publish to "${subject}"`);
    expect((await jsm.streams.info(streamOf(b))).config.max_msgs).toBe(DEFAULT_LAYOUT.namespaceMaxMessages);
    expect((await listConsumers(jsm, streamOf(b))).map((c) => c.consumer)).toContain(consumer);

    // On its own subject, JetStream's message-control headers are off: no purging others' events with a rollup, no expiring them.
    const own = encodeMessage({ id: "evt-rollup", type: "order.paid", namespace: a, timestamp: T0, data: {} });
    for (const [name, value, why] of [
      ["Nats-Rollup", "all", /rollup/i],
      ["Nats-TTL", "1s", /TTL/i],
    ] as const) {
      const h = natsHeaders();
      h.set(name, value);
      expect(await refusal(pub.js.publish(own.subject, own.body, { msgID: own.msgId, headers: h })), name).toMatch(why);
    }
    expect(await stored()).toEqual(before);
  });

  it("a publisher cannot acknowledge or drop another's message: the ack is refused and the message is still delivered", async () => {
    // Held back (the receiver answers 503 first, then 200), so there is a message out to ack.
    let calls = 0;
    const held = later(await Receiver.start(() => (++calls === 1 ? 503 : 200)), (r) => r.close());
    await apply(subscription(b, "held", { url: held.url(), secretRef: { name: "signing" }, retry: { maxAttempts: 5, initialBackoff: "1s", multiplier: 2, maxBackoff: "5s", jitterPercent: 0 } }));
    const info = await waitForConsumer(jsm, b, "held");
    const pubB = later(await connectPublisher(await nats.publisherUrl(b)), (c) => c.close());
    const { seq } = await publishEvent(pubB, b, "order.paid", "evt-held", { n: 1 });
    await held.waitForRequests(1);
    const pubA = later(await connectPublisher(await nats.publisherUrl(a)), (c) => c.close());
    // The reply subject of a delivered message: $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<ts>.<pending>
    for (const verb of ["+ACK", "-NAK", "+TERM"]) {
      const subject = `$JS.ACK.${streamOf(b)}.${info.consumer}.1.${seq}.1.${Date.now()}000000.0`;
      expect(await refusal(pubA.nc.request(subject, verb, { timeout: 5_000 })), verb).toContain(`Permissions Violation for Publish to "${subject}"`);
    }
    await held.waitForRequests(2, 20_000);
    expect(held.requests.map((r) => r.headers["webhook-id"])).toEqual(["evt-held", "evt-held"]);
    await waitForDrained(jsm, b, "held");
  });

  it("no credentials, a wrong password, or a publisher's password under the operator's name: refused at the door", async () => {
    const anonymous = await connectPublisher(nats.address).catch((e: unknown) => e);
    expect(anonymous).toBeInstanceOf(StreamUnavailableError);
    expect((anonymous as Error).message).toMatch(/^NATS at nats:\/\/127\.0\.0\.1:\d+ \(publisher\) refused the credentials: .*Authorization Violation/);
    const publisher = new URL(await nats.publisherUrl(a));
    for (const url of [`nats://${nats.server.operator!.user}:${publisher.password}@${publisher.host}`, `nats://${publisher.username}:wrong@${publisher.host}`]) {
      const err = await connectPublisher(url).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StreamUnavailableError);
      expect((err as Error).message).toContain("refused the credentials");
      expect((err as Error).message).not.toContain(publisher.password);
    }
  });

  it("a message that does not belong to its subject is terminated, not delivered: another namespace in the event, another namespace's Nats-Msg-Id; and B's own event of that id is still published and delivered", async () => {
    const before = receiver.requests.length;
    const pub = later(await connectPublisher(await nats.publisherUrl(a)), (c) => c.close());
    // B's event on A's subject (A's publisher may publish there): it claims to be B's.
    const asB = encodeMessage({ id: "evt-claims-b", type: "order.paid", namespace: b, timestamp: T0, data: { forged: true } });
    await pub.js.publish(eventSubject(a, "order.paid"), asB.body, { msgID: asB.msgId });
    // A's event whose Nats-Msg-Id is B's: it lands in A's stream, whose duplicate window is A's alone.
    const withBsId = encodeMessage({ id: "evt-7", type: "order.paid", namespace: a, timestamp: T0, data: { forged: true } });
    await pub.js.publish(eventSubject(a, "order.paid"), withBsId.body, { msgID: `${b}/evt-7` });
    await waitFor(async () => (await op.metric("webhook_stream_messages_rejected_total", { namespace: a })) === 2, { description: "both rejected" });
    expect(await op.metric("webhook_stream_messages_rejected_total", { namespace: a, reason: "subject" })).toBe(1);
    expect(await op.metric("webhook_stream_messages_rejected_total", { namespace: a, reason: "msg_id" })).toBe(1);
    const lines = op.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === "stream message rejected: it does not belong to its subject; terminated, not delivered");
    expect(lines.map((l) => l.field).sort()).toEqual(["Nats-Msg-Id", "subject"]);
    await waitForDrained(jsm, a, "all");
    // Nothing sent, nothing recorded in either namespace.
    expect(receiver.requests.length).toBe(before);
    expect(await listObjs("whdel", a)).toEqual([]);
    expect(await listObjs("whdel", b)).toEqual([]);
    // A's next event is delivered as usual.
    await publishEvent(pub, a, "order.paid", "evt-a2", { n: 2 });
    await waitFor(() => receiver.requests.some((r) => r.headers["webhook-id"] === "evt-a2"), { description: "evt-a2 delivered" });
    // B publishes its evt-7 within the duplicate window of A's forgery: a stream per namespace, so
    // JetStream stores it (one shared stream answered "duplicate" and dropped it) and it is delivered.
    const pubB = later(await connectPublisher(await nats.publisherUrl(b)), (c) => c.close());
    expect(await publishEvent(pubB, b, "order.paid", "evt-7", { genuine: true })).toMatchObject({ result: "published", stream: streamOf(b) });
    const genuine = await waitFor(() => receiver.requests.find((r) => r.headers["webhook-id"] === "evt-7"), { description: "B's evt-7 delivered" });
    expect(genuine.path).toBe(`/${b}`);
    expect(JSON.parse(genuine.body)).toMatchObject({ data: { genuine: true } });
  });

  it("a second installation on the same account refuses the streams the first claimed, and leaves them and their consumers alone", async () => {
    const state = async () => Promise.all([a, b].map(async (ns) => ({ config: (await jsm.streams.info(streamOf(ns))).config, consumers: (await listConsumers(jsm, streamOf(ns))).map((c) => c.consumer).sort() })));
    const before = await state();
    expect(before.map((s) => s.config.metadata?.["hookline.dev/installation"])).toEqual(["team-a", "team-a"]);
    const other = later(
      await startOperator({ namespaces: [a, b], env: { HOOKLINE_NATS_URL: nats.url, HOOKLINE_INSTALLATION: "team-b" } }),
      (o) => o.stop(),
    );
    const refused = await waitFor(() => opLine(other, "stream mode: JetStream cannot be used yet"), { description: "team-b refused the streams" });
    const why = `stream ${streamOf(a)} on NATS at ${nats.address.replace("nats://", "nats://hookline-operator:***@")} (HOOKLINE_NATS_URL) belongs to another Hookline installation, "team-a" (this one is "team-b", HOOKLINE_INSTALLATION)`;
    expect(String(refused.err)).toContain(why);
    expect(String(refused.err)).toContain("Give each installation its own NATS account");
    expect(other.op.ready.ready).toBe(false);
    expect(other.op.ready.reason).toContain(why);
    expect(await state()).toEqual(before);
    // team-a goes on delivering.
    const pub = later(await connectPublisher(await nats.publisherUrl(a)), (c) => c.close());
    await publishEvent(pub, a, "order.paid", "evt-a3", { n: 3 });
    await waitFor(() => receiver.requests.some((r) => r.headers["webhook-id"] === "evt-a3"), { description: "evt-a3 delivered by team-a" });
  });

  it("the sweeps remove this installation's orphaned consumers and unused streams, never another installation's consumer or a stream it did not claim", async () => {
    const orphan = (installation: string | undefined, name: string) => {
      const uid = randomUUID();
      return {
        durable_name: `${a}_${name}_${uid.slice(0, 8)}`,
        ack_policy: "explicit" as const,
        filter_subjects: [`hookline.${a}.${name}`],
        metadata: { [CONSUMER_METADATA.namespace]: a, [CONSUMER_METADATA.subscription]: name, [CONSUMER_METADATA.uid]: uid, ...(installation ? { [CONSUMER_METADATA.installation]: installation } : {}) },
      };
    };
    const mine = orphan("team-a", "gone");
    const theirs = orphan("team-b", "theirs");
    for (const c of [mine, theirs]) await jsm.consumers.add(streamOf(a), c);
    // Two served namespaces without subscriptions: one with team-a's empty stream, one with an empty stream nobody claimed (made by hand).
    const [unused, unclaimed] = await Promise.all([createNamespace("stream-auth-unused"), createNamespace("stream-auth-unclaimed")]);
    cleanups.push(() => Promise.all([unused, unclaimed].map((ns) => deleteNamespace(ns))));
    await jsm.streams.add(namespaceStreamConfig({ ...DEFAULT_LAYOUT, owner: "team-a" }, unused));
    await jsm.streams.add(namespaceStreamConfig(DEFAULT_LAYOUT, unclaimed));
    // A term's first sweeps: a second replica of team-a, leading too (no leader election here).
    const replica = later(await startOperator({ namespaces: [a, b, unused, unclaimed], env: { HOOKLINE_NATS_URL: nats.url, HOOKLINE_INSTALLATION: "team-a" } }), (o) => o.stop());
    await waitFor(() => opLine(replica, "stream consumer deleted"), { description: "team-a's orphan deleted" });
    const left = (await listConsumers(jsm, streamOf(a))).map((c) => c.consumer);
    expect(left).not.toContain(mine.durable_name);
    expect(left).toContain(theirs.durable_name);
    await waitFor(async () => (await jsm.streams.info(streamOf(unused)).catch(() => undefined)) === undefined, { description: "team-a's unused stream deleted" });
    // The same sweep looked at the unclaimed one and left it; the streams in use stay.
    const kept = (await jsm.streams.info(streamOf(unclaimed))).config.metadata;
    expect(kept).toMatchObject({ "hookline.dev/namespace": unclaimed });
    expect(kept).not.toHaveProperty(["hookline.dev/installation"]);
    for (const ns of [a, b]) expect((await jsm.streams.info(streamOf(ns))).config.name).toBe(streamOf(ns));
    await jsm.consumers.delete(streamOf(a), theirs.durable_name);
    await jsm.streams.delete(streamOf(unclaimed));
  });
});

describe("the operator refuses a NATS that lets anyone in", () => {
  let open: TestNats;
  let ns: string;
  let receiver: Receiver;

  beforeAll(async () => {
    open = await startNats("open", { auth: false });
    ns = await createNamespace("stream-open");
    await apply(secret(ns, "signing"));
    receiver = await Receiver.start(() => 200);
  });
  afterAll(async () => {
    await receiver?.close();
    await open?.close();
    if (ns) await deleteNamespace(ns);
  });

  it("without credentials: not ready, naming HOOKLINE_NATS_URL and what to do; nothing connects", async () => {
    const op = later(await startOperator({ namespaces: [ns], env: { HOOKLINE_NATS_URL: open.address } }), (o) => o.stop());
    const { reason } = await waitFor(() => (op.op.ready.reason?.startsWith("stream mode is off") ? op.op.ready : undefined), { description: "not ready, for NATS" });
    expect(reason).toBe(
      `stream mode is off: HOOKLINE_NATS_URL=${open.address} gives the operator no NATS credentials, and a NATS that needs none lets in anyone: anyone who can reach it could publish events into any namespace (delivered, signed with that namespace's Secret), read every tenant's events and acknowledge or drop them. ` +
        `Run NATS with accounts and users (docs/stream-mode.md, "NATS with authentication") and give the operator its user: nats://USER:PASSWORD@HOST:4222 in HOOKLINE_NATS_URL, or HOOKLINE_NATS_USER with HOOKLINE_NATS_PASSWORD_FILE (chart: stream.natsCredentialsSecret), or a TLS client certificate the server verifies (HOOKLINE_NATS_TLS_CERT_FILE and _KEY_FILE). ` +
        "HOOKLINE_NATS_ALLOW_INSECURE=true accepts an open NATS: only for a throwaway server on your own machine",
    );
    expect(opLine(op, reason!)).toMatchObject({ level: "error" });
    expect(opLine(op, "stream mode: connected to NATS")).toBeUndefined();
  });

  it("with credentials, to a server that asks for none: not ready, and the stream is never made", async () => {
    const withCreds = open.address.replace("nats://", "nats://hookline:s3cret@");
    const op = later(await startOperator({ namespaces: [ns], env: { HOOKLINE_NATS_URL: withCreds } }), (o) => o.stop());
    const { reason } = await waitFor(() => (op.op.ready.reason?.startsWith("stream mode is off") ? op.op.ready : undefined), { description: "not ready, for NATS" });
    expect(reason).toMatch(/^stream mode is off: NATS at nats:\/\/hookline:\*\*\*@127\.0\.0\.1:\d+ \(HOOKLINE_NATS_URL\) does not require authentication, so anyone who can reach it could publish events into any namespace/);
    expect(op.logs.join("\n")).not.toContain("s3cret");
    const conn = later(await connectStream(open.address), (c) => c.close());
    const made: string[] = [];
    for await (const name of (await conn.jetstreamManager()).streams.names()) made.push(name);
    expect(made).toEqual([]);
  });

  it("HOOKLINE_NATS_ALLOW_INSECURE=true: used, with a warning, and delivers", async () => {
    const op = later(await startOperator({ namespaces: [ns], env: { HOOKLINE_NATS_URL: open.address, HOOKLINE_NATS_ALLOW_INSECURE: "true" } }), (o) => o.stop());
    await apply(subscription(ns, "insecure", { url: receiver.url(), secretRef: { name: "signing" } }));
    const conn = later(await connectStream(open.address), (c) => c.close());
    await waitForConsumer(await conn.jetstreamManager(), ns, "insecure");
    await waitFor(() => op.op.ready.ready, { description: "ready" });
    expect(opLine(op, /^stream mode: NATS does not require authentication; used because HOOKLINE_NATS_ALLOW_INSECURE=true/)).toMatchObject({ level: "warn" });
    await publishEvent(conn, ns, "order.paid", "evt-open", { n: 1 });
    const [req] = await receiver.waitForRequests(1);
    expect(req!.headers["webhook-id"]).toBe("evt-open");
  });
});

describe("TLS to NATS: the operator trusts the CA it is given, and a client certificate the server verifies authenticates it", () => {
  let ca: TestCa;
  let dir: string;
  let ns: string;
  let receiver: Receiver;
  const files: Record<"ca" | "server" | "serverKey" | "client" | "clientKey", string> = { ca: "", server: "", serverKey: "", client: "", clientKey: "" };

  beforeAll(async () => {
    ca = await TestCa.create("Hookline NATS test CA");
    dir = await mkdtemp(join(tmpdir(), "hookline-nats-tls-"));
    const server = await ca.issue("nats", "server");
    const client = await ca.issue("hookline-operator", "client");
    for (const [k, text] of Object.entries({ ca: ca.cert, server: server.cert, serverKey: server.key, client: client.cert, clientKey: client.key })) {
      files[k as keyof typeof files] = join(dir, `${k}.pem`);
      writeFileSync(files[k as keyof typeof files], text, { mode: 0o600 });
    }
    ns = await createNamespace("stream-tls");
    await apply(secret(ns, "signing"));
    receiver = await Receiver.start(() => 200);
    await apply(subscription(ns, "tls", { url: receiver.url(), secretRef: { name: "signing" } }));
  });
  afterAll(async () => {
    await receiver?.close();
    await ca?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
    if (ns) await deleteNamespace(ns);
  });

  it("tls:// with users: with HOOKLINE_NATS_TLS_CA_FILE the operator's user delivers; without it, the server's certificate is not trusted and nothing connects", async () => {
    const nats = later(await startNats("tls", { tls: { certFile: files.server, keyFile: files.serverKey, caFile: files.ca } }), (n) => n.close());
    expect(nats.address).toMatch(/^tls:\/\/127\.0\.0\.1:\d+$/);
    const untrusting = later(await startOperator({ namespaces: [ns], env: { HOOKLINE_NATS_URL: nats.url, HOOKLINE_INSTALLATION: "tls-a" } }), (o) => o.stop());
    const line = await waitFor(() => opLine(untrusting, "stream mode: NATS not reachable yet"), { description: "the server's certificate refused" });
    expect(String(line.err)).toMatch(/certificate/i);
    expect(untrusting.op.ready.ready).toBe(false);
    await untrusting.stop();

    const op = later(await startOperator({ namespaces: [ns], env: { HOOKLINE_NATS_URL: nats.url, HOOKLINE_NATS_TLS_CA_FILE: files.ca, HOOKLINE_INSTALLATION: "tls-a" } }), (o) => o.stop());
    const admin = later(await connectStream(nats.adminUrl, { tls: { caFile: files.ca } }), (c) => c.close());
    await waitForConsumer(await admin.jetstreamManager(), ns, "tls");
    await waitFor(() => op.op.ready.ready, { description: "ready over TLS" });
    const pub = later(await connectStream(await nats.publisherUrl(ns), { inboxPrefix: "_INBOX", tls: { caFile: files.ca } }), (c) => c.close());
    await publishEvent(pub, ns, "order.paid", "evt-tls", { n: 1 });
    await waitFor(() => receiver.requests.some((r) => r.headers["webhook-id"] === "evt-tls"), { description: "evt-tls delivered" });
  });

  it("a server that verifies client certificates: the operator's certificate is its credential; without one it stays off, and NATS refuses a client without one", async () => {
    const nats = later(await startNats("mtls", { auth: false, tls: { certFile: files.server, keyFile: files.serverKey, caFile: files.ca, verify: true } }), (n) => n.close());
    const withoutCert = later(await startOperator({ namespaces: [ns], env: { HOOKLINE_NATS_URL: nats.address, HOOKLINE_NATS_TLS_CA_FILE: files.ca, HOOKLINE_INSTALLATION: "tls-b" } }), (o) => o.stop());
    await waitFor(() => withoutCert.op.ready.reason?.startsWith("stream mode is off") && /gives the operator no NATS credentials/.test(withoutCert.op.ready.reason), { description: "off without a certificate" });
    await withoutCert.stop();
    const refused = await connectStream(nats.address, { inboxPrefix: "_INBOX", tls: { caFile: files.ca }, connectTimeoutMs: 2_000 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StreamUnavailableError);

    const tls = { HOOKLINE_NATS_TLS_CA_FILE: files.ca, HOOKLINE_NATS_TLS_CERT_FILE: files.client, HOOKLINE_NATS_TLS_KEY_FILE: files.clientKey };
    const op = later(await startOperator({ namespaces: [ns], env: { HOOKLINE_NATS_URL: nats.address, ...tls, HOOKLINE_INSTALLATION: "tls-b" } }), (o) => o.stop());
    const conn = later(await connectStream(nats.address, { tls: { caFile: files.ca, certFile: files.client, keyFile: files.clientKey } }), (c) => c.close());
    expect(conn.serverAuthenticates()).toBe(true);
    await waitForConsumer(await conn.jetstreamManager(), ns, "tls");
    await waitFor(() => op.op.ready.ready, { description: "ready with its certificate" });
    await publishEvent(conn, ns, "order.paid", "evt-mtls", { n: 1 });
    await waitFor(() => receiver.requests.some((r) => r.headers["webhook-id"] === "evt-mtls"), { description: "evt-mtls delivered" });
  });
});
