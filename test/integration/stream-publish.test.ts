// Publishing in stream mode through the three doors (library, `hookline publish --nats`, the
// HTTP door with a JetStream publisher) to a real nats-server: one message per event, returned
// after JetStream's acknowledgement, read back byte for byte by a JetStream consumer; the same id
// again within the duplicate window is acknowledged as a duplicate and stored once; bad input,
// oversize data and an unreachable NATS get the CR path's errors, exit codes and statuses; a
// namespace over its stream quota gets a clear error from each door while another publishes.
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import type { Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import type { JetStreamManager, JsMsg } from "@nats-io/jetstream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH } from "../../src/api/names.js";
import { freePorts } from "../../src/cluster/ports.js";
import { publish as libraryPublish, createPublisher, NatsUrlError, PayloadTooLargeError, PublishInputError, StreamQuotaExceededError, StreamUnavailableError } from "../../src/index.js";
import { KubeClient } from "../../src/kube/client.js";
import { closeServer, listen } from "../../src/observability/http-servers.js";
import { publishServer } from "../../src/publish/server.js";
import { ensureConsumer } from "../../src/jetstream/consumers.js";
import type { StreamConnection } from "../../src/jetstream/jetstream.js";
import { dataText, decodeMessage, type StreamMessage } from "../../src/jetstream/message.js";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { exec } from "../helpers/exec.js";
import { publisherToken } from "../helpers/kube.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";
import { streamOf } from "../helpers/stream.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const hookline = (args: string[]) => exec(process.execPath, [join(ROOT, "bin/hookline.js"), ...args], { env: process.env, cwd: ROOT, timeoutMs: 60_000 });

// Hostile but valid: non-ASCII of every width, control and separator characters, exactly the
// largest serialized size (each "😀" is 4 bytes, "é" 2, the quotes 2).
const HOSTILE = { note: "déjà vu — 日本語 — 😀𝄞 \u0000\u2028\u2029 \"quoted\" \\ end", nested: [[["x"]]], n: 1.5e-7 };
const LARGEST = `${"😀".repeat(Math.floor((MAX_PAYLOAD_BYTES - 2) / 4))}é`;

describe("publishing in stream mode (real nats-server, three doors)", () => {
  let nats: TestNats;
  let conn: StreamConnection;
  let jsm: JetStreamManager;
  let ns: string;
  /** A ServiceAccount token for the HTTP door (audience hookline), allowed to publish in ns. */
  let token: string;
  let consumer: string;
  let client: KubeClient;
  let server: Server;
  let base: string;
  let tmp: string;
  /** What producers publish with: a NATS user that may publish the events of ns, nothing else. */
  let publisherUrl: string;

  const post = async (body: unknown, headers: Record<string, string> = {}, namespace = ns) => {
    const res = await fetch(`${base}/v1/namespaces/${namespace}/events`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}`, ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
    return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
  };
  const stored = async () => (await jsm.streams.info(streamOf(ns))).state.messages;
  /** The next message of the test's consumer, decoded, and acknowledged. */
  const next = async (): Promise<{ msg: JsMsg; decoded: StreamMessage }> => {
    const msg = await (await conn.js.consumers.get(streamOf(ns), consumer)).next({ expires: 5_000 });
    expect(msg, "a message within 5 s").toBeTruthy();
    await msg!.ackAck();
    return { msg: msg!, decoded: decodeMessage(msg!) };
  };
  const noMore = async () => {
    await waitFor(async () => (await jsm.consumers.info(streamOf(ns), consumer)).num_ack_pending === 0, { description: "nothing unacknowledged" });
    expect((await jsm.consumers.info(streamOf(ns), consumer)).num_pending).toBe(0);
  };

  beforeAll(async () => {
    nats = await startNats("publish");
    conn = await connectStream(nats.url);
    jsm = await conn.jetstreamManager();
    ns = await createNamespace("stream-publish");
    // As the operator makes it with the namespace's first subscription.
    await conn.ensureStream(ns);
    publisherUrl = await nats.publisherUrl(ns);
    token = await publisherToken(ns, "publisher");
    consumer = (await ensureConsumer(jsm, streamOf(ns), { namespace: ns, name: "everything", uid: randomUUID() }, { eventTypes: undefined, maxInFlight: 100, timeoutMs: 10_000 })).name;
    const kc = new KubeConfig();
    kc.loadFromFile(inject("kubeconfig"));
    client = await KubeClient.create(kc);
    server = publishServer({ client, log: pino({ level: "silent" }), ready: () => ({ ready: true }), stream: conn });
    base = `http://127.0.0.1:${await listen(server, 0, "127.0.0.1")}`;
    tmp = await mkdtemp(join(tmpdir(), "hookline-stream-publish-"));
  });

  afterAll(async () => {
    if (server) await closeServer(server);
    await client?.close();
    await conn?.close();
    await nats?.close();
    if (ns) await deleteNamespace(ns);
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it("the three doors write one message per event that a consumer reads byte for byte, after JetStream's acknowledgement", async () => {
    const before = await stored();

    // Each door's trace context travels in the message headers, normalized as in CR mode.
    const lib = await libraryPublish({ namespace: ns, type: "order.paid", id: "evt-lib", data: HOSTILE }, { nats: publisherUrl, traceContext: { traceparent: "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-future", tracestate: " rojo=1 , ,congo=2" } });
    expect(lib).toMatchObject({ id: "evt-lib", namespace: ns, type: "order.paid", mode: "stream", stream: streamOf(ns), result: "published" });
    // Returned after the acknowledgement: it is stored at that point, not later.
    expect(await stored()).toBe(before + 1);

    const file = join(tmp, "hostile.json");
    writeFileSync(file, JSON.stringify(HOSTILE));
    const cli = await hookline(["publish", "--nats", publisherUrl, "-n", ns, "-t", "order.paid", "--id", "evt-cli", "-d", `@${file}`, "-o", "json", "--traceparent", "00-11111111111111111111111111111111-2222222222222222-00"]);
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout)).toMatchObject({ id: "evt-cli", mode: "stream", result: "published" });

    const http = await post({ type: "order.paid", id: "evt-http", data: HOSTILE }, { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" });
    expect(http.status).toBe(202);
    expect(http.body).toMatchObject({ id: "evt-http", mode: "stream", result: "published" });

    const expected = Buffer.from(JSON.stringify(HOSTILE), "utf8");
    for (const id of ["evt-lib", "evt-cli", "evt-http"]) {
      const { msg, decoded } = await next();
      expect(decoded.id).toBe(id);
      expect(decoded.namespace).toBe(ns);
      expect(msg.subject).toBe(`hookline.${ns}.order.paid`);
      expect(msg.headers?.get("Nats-Msg-Id")).toBe(`${ns}/${id}`);
      expect(Buffer.from(decoded.data).equals(expected), `${id}: data bytes as published`).toBe(true);
      expect(new Date(decoded.timestamp).getTime()).toBeGreaterThan(Date.now() - 60_000);
      const traces: Record<string, unknown> = {
        "evt-lib": { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracestate: "rojo=1,congo=2" },
        "evt-cli": { traceparent: "00-11111111111111111111111111111111-2222222222222222-00" },
        "evt-http": { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" },
      };
      expect(decoded.traceContext).toEqual(traces[id]);
    }
    await noMore();
  });

  it("takes the largest data through every door, byte for byte", async () => {
    const expected = Buffer.from(JSON.stringify(LARGEST), "utf8");
    expect(expected.length).toBe(MAX_PAYLOAD_BYTES);
    const publisher = await createPublisher({ nats: publisherUrl });
    try {
      await publisher.publish({ namespace: ns, type: "big.one", id: "big-lib", data: LARGEST });
    } finally {
      await publisher.close();
    }
    const file = join(tmp, "largest.json");
    writeFileSync(file, JSON.stringify(LARGEST));
    const cli = await hookline(["publish", "--nats", publisherUrl, "-n", ns, "-t", "big.one", "--id", "big-cli", "-d", `@${file}`]);
    expect(cli.code, cli.stderr).toBe(0);
    expect((await post({ type: "big.one", id: "big-http", data: LARGEST })).status).toBe(202);
    for (const id of ["big-lib", "big-cli", "big-http"]) {
      const { decoded } = await next();
      expect(decoded.id).toBe(id);
      expect(Buffer.from(decoded.data).equals(expected), id).toBe(true);
      expect(dataText(decoded)).toBe(JSON.stringify(LARGEST));
    }
    await noMore();
  });

  it("the same id again within the duplicate window is acknowledged as a duplicate by every door and stored once", async () => {
    const event = { namespace: ns, type: "order.paid", id: "evt-twice", data: { n: 1 } };
    const first = await libraryPublish(event, { nats: publisherUrl });
    expect(first.result).toBe("published");
    const lib = await libraryPublish(event, { nats: publisherUrl });
    expect(lib).toMatchObject({ result: "duplicate", seq: first.seq });
    const cli = await hookline(["publish", "--nats", publisherUrl, "-n", ns, "-t", "order.paid", "--id", "evt-twice", "-d", '{"n": 1}']);
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stdout).toMatch(new RegExp(`evt-twice\\s+${streamOf(ns)}\\s+\\d+\\s+duplicate`));
    expect(cli.stderr).toContain("already published within the duplicate window");
    const http = await post({ type: "order.paid", id: "evt-twice", data: { n: 1 } });
    expect(http.status).toBe(202);
    expect(http.body).toMatchObject({ result: "duplicate", seq: first.seq });
    const { decoded } = await next();
    expect(decoded.id).toBe("evt-twice");
    await noMore();
  });

  it("refuses bad events as the CR path does: typed errors, exit 2, HTTP 400 and 413 naming the field; nothing is stored", async () => {
    const before = await stored();
    const deep = JSON.parse(`${"[".repeat(MAX_PAYLOAD_DEPTH + 1)}${"]".repeat(MAX_PAYLOAD_DEPTH + 1)}`) as unknown;
    const cases: Array<[string, { type: unknown; id?: unknown; data: unknown }, string, number]> = [
      ["bad type", { type: "order paid", data: 1 }, "type", 400],
      ["wildcard type", { type: "order.*", data: 1 }, "type", 400],
      ["empty id", { type: "order.paid", id: "", data: 1 }, "id", 400],
      ["id that cannot be a header value", { type: "order.paid", id: "evt-1\r\nX-Injected: 1", data: 1 }, "id", 400],
      ["non-ASCII id", { type: "order.paid", id: "évènement", data: 1 }, "id", 400],
      ["too deep", { type: "order.paid", data: deep }, "data", 400],
      ["too large", { type: "order.paid", data: `${LARGEST}x` }, "data", 413],
    ];
    for (const [what, body, field, status] of cases) {
      const lib = await libraryPublish({ namespace: ns, ...body } as never, { nats: publisherUrl }).catch((e: unknown) => e);
      expect(lib, what).toBeInstanceOf(status === 413 ? PayloadTooLargeError : PublishInputError);
      expect((lib as PublishInputError).field, what).toBe(field);
      const http = await post(body);
      expect(http.status, what).toBe(status);
      expect(http.body.field, what).toBe(field);
    }
    const cli = await hookline(["publish", "--nats", publisherUrl, "-n", ns, "-t", "order paid", "-d", "1"]);
    expect(cli.code).toBe(2);
    expect(cli.stderr).toMatch(/--type: type must be a dotted name/);
    const cliId = await hookline(["publish", "--nats", nats.url, "-n", ns, "-t", "order.paid", "--id", "évènement", "-d", "1"]);
    expect(cliId.code).toBe(2);
    expect(cliId.stderr).toMatch(/--id: id must be printable ASCII with no leading or trailing space: it is sent as the webhook-id header/);
    const badUrl = await hookline(["publish", "--nats", "http://127.0.0.1:4222", "-n", ns, "-t", "order.paid", "-d", "1"]);
    expect(badUrl.code).toBe(2);
    expect(badUrl.stderr).toContain("--nats: ");
    await expect(libraryPublish({ namespace: ns, type: "order.paid", data: 1 }, { nats: "http://127.0.0.1:4222" })).rejects.toThrow(NatsUrlError);
    expect(await stored()).toBe(before);
  });

  it("NATS not reachable: StreamUnavailableError, exit 1 and HTTP 503 with Retry-After, each naming where the URL came from", async () => {
    const [port] = await freePorts(1);
    const nowhere = `nats://127.0.0.1:${port}`;
    const lib = await libraryPublish({ namespace: ns, type: "order.paid", data: 1 }, { nats: nowhere }).catch((e: unknown) => e);
    expect(lib).toBeInstanceOf(StreamUnavailableError);
    expect((lib as Error).message).toContain(`cannot reach NATS at ${nowhere} (the nats option)`);
    const cli = await hookline(["publish", "--nats", nowhere, "-n", ns, "-t", "order.paid", "-d", "1"]);
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain(`cannot reach NATS at ${nowhere} (--nats)`);
    // An input problem is still reported as one when NATS is down.
    expect((await hookline(["publish", "--nats", nowhere, "-n", ns, "-t", "order paid", "-d", "1"])).code).toBe(2);

    await nats.server.stop();
    try {
      await waitFor(() => !conn.isConnected(), { description: "the door's connection noticed" });
      const http = await post({ type: "order.paid", id: "evt-down", data: 1 });
      expect(http.status).toBe(503);
      expect(http.headers.get("retry-after")).toBe("1");
      expect(http.body).toMatchObject({ reason: "unreachable" });
      expect(String(http.body.error)).toContain("(test)");
    } finally {
      await nats.server.restart();
    }
    await waitFor(() => conn.isConnected(), { description: "the door's connection is back", timeoutMs: 20_000 });
    expect((await post({ type: "order.paid", id: "evt-back", data: 1 })).status).toBe(202);
    expect((await next()).decoded.id).toBe("evt-back");
  });

  it("a namespace over its stream quota: StreamQuotaExceededError, exit 1 and HTTP 429 with Retry-After, each naming the quota; nothing more is stored, and another namespace publishes", async () => {
    const full = await createNamespace("stream-quota");
    const other = await connectStream(nats.url, { stream: { namespaceMaxMessages: 2 } });
    const fullToken = await publisherToken(full, "publisher");
    // The namespace's producers publish as its publisher user (the operator's user may not: its replies come on its own inbox).
    const fullUrl = await nats.publisherUrl(full);
    const door = publishServer({ client, log: pino({ level: "silent" }), ready: () => ({ ready: true }), stream: other, streamQuota: { messages: 2, bytes: 1024 ** 3 } });
    const doorBase = `http://127.0.0.1:${await listen(door, 0, "127.0.0.1")}`;
    try {
      await other.ensureStream(full);
      await ensureConsumer(jsm, streamOf(full), { namespace: full, name: "slow", uid: randomUUID() }, { eventTypes: undefined, maxInFlight: 10, timeoutMs: 10_000 });
      for (const id of ["a", "b"]) expect((await libraryPublish({ namespace: full, type: "order.paid", id, data: 1 }, { nats: fullUrl })).result).toBe("published");

      const lib = await libraryPublish({ namespace: full, type: "order.paid", id: "c", data: 1 }, { nats: fullUrl }).catch((e: unknown) => e);
      expect(lib).toBeInstanceOf(StreamQuotaExceededError);
      expect(lib).toMatchObject({ namespace: full, stream: streamOf(full), quota: "messages" });
      const cli = await hookline(["publish", "--nats", fullUrl, "-n", full, "-t", "order.paid", "--id", "c", "-d", "1"]);
      expect(cli.code).toBe(1);
      expect(cli.stderr).toContain(`hookline publish: namespace ${full} is over its stream quota of messages (HOOKLINE_STREAM_NAMESPACE_MAX_MESSAGES)`);
      const res = await fetch(`${doorBase}/v1/namespaces/${full}/events`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${fullToken}` }, body: JSON.stringify({ type: "order.paid", id: "c", data: 1 }) });
      expect(res.status).toBe(429);
      expect(res.headers.get("retry-after")).toBe("10");
      const body = (await res.json()) as Record<string, unknown>;
      expect(body).toMatchObject({ namespace: full, stream: streamOf(full), quota: "messages", limit: 2 });
      expect(String(body.error)).toContain("Publish it again with the same id");
      expect((await jsm.streams.info(streamOf(full))).state.messages).toBe(2);

      // The test's namespace, through the same door and connection, is not affected.
      const elsewhere = await fetch(`${doorBase}/v1/namespaces/${ns}/events`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body: JSON.stringify({ type: "order.paid", id: "evt-other", data: 1 }) });
      expect(elsewhere.status).toBe(202);
      expect((await next()).decoded.id).toBe("evt-other");
    } finally {
      await closeServer(door);
      await other.close();
      await deleteNamespace(full);
    }
  });
});
