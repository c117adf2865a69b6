// Tracing, end to end with real parts: a producer publishes with its W3C trace context, the
// operator (OTEL_EXPORTER_OTLP_ENDPOINT set) sends every attempt and replay as a CLIENT span to a
// real OpenTelemetry Collector (hack/build-otelcol.sh) and the receiver gets a traceparent whose
// parent id is that span's. In front of the collector, a forwarding server records what the
// exporter sent (OTEL_EXPORTER_OTLP_HEADERS). Without the variable, the producer's context is
// passed through unchanged. Stream mode (a real nats-server) sends and records the same.
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { publish } from "../../src/index.js";
import { deliveryName } from "../../src/publish/naming.js";
import { publishToStream } from "../../src/publish/stream.js";
import type { StreamConnection } from "../../src/jetstream/jetstream.js";
import { closeServer } from "../../src/observability/http-servers.js";
import { createNamespace, deleteNamespace, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, getObj, subscription, waitForPhase } from "../helpers/kube.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { TestCollector, type ReceivedSpan } from "../helpers/otelcol.js";
import { Receiver, type ReceivedRequest } from "../helpers/receiver.js";
import { waitForConsumer } from "../helpers/stream.js";

const OTLP_TOKEN = "otlp-s3cret-9f2c41d7";
const quick = { initialBackoff: "50ms", maxBackoff: "50ms", jitterPercent: 0, maxAttempts: 3 };

/** Forwards OTLP requests to the collector and records their headers. */
async function forwarder(target: string): Promise<{ url: string; headers: IncomingHttpHeaders[]; server: Server }> {
  const headers: IncomingHttpHeaders[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      headers.push(req.headers);
      fetch(`${target}${req.url}`, { method: "POST", headers: { "content-type": req.headers["content-type"] ?? "application/json" }, body: Buffer.concat(chunks) })
        .then(async (r) => res.writeHead(r.status, { "content-type": r.headers.get("content-type") ?? "application/json" }).end(Buffer.from(await r.arrayBuffer())))
        .catch(() => res.writeHead(502).end());
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, headers, server };
}

/** The traceparent a request carried, split. */
function parent(req: ReceivedRequest): { traceId: string; spanId: string; flags: string } {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(String(req.headers.traceparent));
  if (!m) throw new Error(`no valid traceparent on ${req.path}: ${String(req.headers.traceparent)}`);
  return { traceId: m[1]!, spanId: m[2]!, flags: m[3]! };
}

describe("tracing: a CLIENT span per attempt and per replay, exported to an OpenTelemetry Collector", () => {
  let ns: string;
  let collector: TestCollector;
  let front: Awaited<ReturnType<typeof forwarder>>;
  let receiver: Receiver;
  let op: TestOperator;
  let permanentFixed = false;
  let flakyCalls = 0;

  const requestsFor = (id: string) => receiver.requests.filter((r) => r.headers["webhook-id"] === id);
  const spansOf = (delivery: string): ReceivedSpan[] => collector.spans().filter((s) => s.attributes["hookline.delivery"] === delivery);
  const waitForSpans = (delivery: string, n: number) => waitFor(() => (spansOf(delivery).length >= n ? spansOf(delivery) : undefined), { description: `${n} spans of ${delivery} at the collector` });
  const kubeconfig = () => inject("kubeconfig");

  beforeAll(async () => {
    collector = await TestCollector.start("tracing");
    front = await forwarder(collector.endpoint);
    receiver = await Receiver.start((r) => {
      if (r.path === "/flaky") return ++flakyCalls === 1 ? 503 : 200;
      if (r.path.startsWith("/permanent")) return permanentFixed ? 200 : 400;
      return 200;
    });
    ns = await createNamespace("tracing");
    await apply([
      subscription(ns, "flaky", { url: receiver.url("/flaky"), eventTypes: ["order.paid"], retry: quick }),
      subscription(ns, "permanent", { url: receiver.url("/permanent?token=query-s3cret"), eventTypes: ["order.refunded"], retry: quick }),
      subscription(ns, "plain", { url: receiver.url("/plain"), eventTypes: ["ping.*"], retry: quick }),
    ]);
    op = await startOperator({
      namespaces: [ns],
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: front.url,
        OTEL_EXPORTER_OTLP_HEADERS: `x-otlp-token=${OTLP_TOKEN}`,
        OTEL_SERVICE_NAME: "hookline-e2e",
        OTEL_BSP_SCHEDULE_DELAY: "50",
      },
    });
    await waitFor(() => op.op.caches.subscriptions.size === 3, { description: "3 subscriptions cached" });
  });
  afterAll(async () => {
    await op?.stop();
    await receiver?.close();
    if (front) await closeServer(front.server);
    await collector?.close();
    if (ns) await deleteNamespace(ns);
  });

  it("each attempt is a child span of the producer's context, its id in the traceparent the receiver gets, with the HTTP and Hookline attributes", async () => {
    const producer = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", parentId: "00f067aa0ba902b7" };
    const traceContext = { traceparent: `00-${producer.traceId}-${producer.parentId}-01`, tracestate: "rojo=00f067aa0ba902b7, congo=t61rcWkgMzE" };
    await publish({ namespace: ns, type: "order.paid", id: "evt-traced", data: { order: 1 } }, { kubeconfig: kubeconfig(), traceContext });
    await waitForPhase(ns, "evt-traced.flaky", "Succeeded");
    const stored = await getObj("whdel", ns, "evt-traced.flaky");
    expect((stored as unknown as { spec: { traceContext: unknown } }).spec.traceContext).toEqual({ traceparent: traceContext.traceparent, tracestate: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE" });

    const sent = requestsFor("evt-traced");
    expect(sent).toHaveLength(2);
    const ids = sent.map((r) => parent(r));
    for (const p of ids) {
      expect(p.traceId).toBe(producer.traceId);
      expect(p.flags).toBe("01");
      expect(p.spanId).not.toBe(producer.parentId);
    }
    expect(ids[0]!.spanId).not.toBe(ids[1]!.spanId); // a new span per attempt
    for (const r of sent) expect(r.headers.tracestate).toBe("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");

    const spans = (await waitForSpans("evt-traced.flaky", 2)).sort((a, b) => Number(a.attributes["hookline.attempt"]) - Number(b.attributes["hookline.attempt"]));
    expect(spans.map((s) => s.spanId)).toEqual(ids.map((p) => p.spanId));
    for (const s of spans) {
      expect(s).toMatchObject({ traceId: producer.traceId, parentSpanId: producer.parentId, name: "POST", kind: 3, scope: "hookline" });
      expect(s.resource).toMatchObject({ "service.name": "hookline-e2e" });
      expect(s.attributes).toMatchObject({
        "http.request.method": "POST",
        "url.full": `http://127.0.0.1:${receiver.port}/REDACTED`,
        "server.address": "127.0.0.1",
        "server.port": receiver.port,
        "hookline.namespace": ns,
        "hookline.subscription": "flaky",
        "hookline.delivery": "evt-traced.flaky",
        "hookline.event.id": "evt-traced",
        "hookline.replay": false,
      });
    }
    expect(spans[0]!.attributes).toMatchObject({ "hookline.attempt": 1, "http.response.status_code": 503, "error.type": "503" });
    expect(spans[0]!.statusCode).toBe(2);
    expect(spans[1]!.attributes).toMatchObject({ "hookline.attempt": 2, "http.response.status_code": 200 });
    expect(spans[1]!.attributes).not.toHaveProperty("error.type");
    expect(spans[1]!.statusCode).toBe(0);

    // The attempt's log lines carry the trace.
    const lines = op.logs.filter((l) => l.includes('"msg":"webhook_attempt"') && l.includes("evt-traced.flaky")).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => [l.trace_id, l.span_id, l.status])).toEqual([
      [producer.traceId, ids[0]!.spanId, 503],
      [producer.traceId, ids[1]!.spanId, 200],
    ]);
  });

  it("a replay is a span too (hookline.replay true), in the producer's trace; query values are redacted from url.full", async () => {
    const traceId = "0af7651916cd43dd8448eb211c80319c";
    await publish({ namespace: ns, type: "order.refunded", id: "evt-replayed", data: { order: 2 } }, { kubeconfig: kubeconfig(), traceContext: { traceparent: `00-${traceId}-b7ad6b7169203331-01` } });
    await waitForPhase(ns, "evt-replayed.permanent", "DeadLettered");
    permanentFixed = true;
    await kubectlOk(["annotate", "whdel", "-n", ns, "evt-replayed.permanent", "hookline.dev/replay=receiver fixed, INC-7"]);
    await waitForPhase(ns, "evt-replayed.permanent", "Succeeded");

    const sent = requestsFor("evt-replayed");
    expect(sent).toHaveLength(2);
    expect(sent.every((r) => !("tracestate" in r.headers))).toBe(true);
    const spans = (await waitForSpans("evt-replayed.permanent", 2)).sort((a, b) => Number(a.attributes["hookline.attempt"]) - Number(b.attributes["hookline.attempt"]));
    expect(spans.map((s) => [s.traceId, s.parentSpanId, s.attributes["hookline.attempt"], s.attributes["hookline.replay"], s.attributes["http.response.status_code"], s.attributes["error.type"]])).toEqual([
      [traceId, "b7ad6b7169203331", 1, false, 400, "400"],
      [traceId, "b7ad6b7169203331", 2, true, 200, undefined],
    ]);
    expect(spans.map((s) => s.spanId)).toEqual(sent.map((r) => parent(r).spanId));
    expect(spans[0]!.attributes["url.full"]).toBe(`http://127.0.0.1:${receiver.port}/REDACTED?token=REDACTED`);
  });

  it("starts a trace for an event published without one; records nothing for a producer that did not sample, while still sending a child traceparent", async () => {
    await publish({ namespace: ns, type: "ping.unsampled", id: "evt-unsampled", data: {} }, { kubeconfig: kubeconfig(), traceContext: { traceparent: "00-11111111111111111111111111111111-2222222222222222-00" } });
    await waitForPhase(ns, "evt-unsampled.plain", "Succeeded");
    const unsampled = parent(requestsFor("evt-unsampled")[0]!);
    expect(unsampled).toMatchObject({ traceId: "11111111111111111111111111111111", flags: "00" });
    expect(unsampled.spanId).not.toBe("2222222222222222");

    await publish({ namespace: ns, type: "ping.root", id: "evt-root", data: {} }, { kubeconfig: kubeconfig() });
    await waitForPhase(ns, "evt-root.plain", "Succeeded");
    const root = parent(requestsFor("evt-root")[0]!);
    expect(root.flags).toBe("01");
    const [span] = await waitForSpans("evt-root.plain", 1);
    expect(span).toMatchObject({ traceId: root.traceId, spanId: root.spanId, parentSpanId: "" });
    // Exported after the unsampled attempt ended: had that one been recorded, it would be here by now.
    expect(collector.spans().some((s) => s.traceId === "11111111111111111111111111111111")).toBe(false);
  });

  it("sends OTEL_EXPORTER_OTLP_HEADERS with every export and never logs their values", () => {
    expect(front.headers.length).toBeGreaterThan(0);
    for (const h of front.headers) expect(h["x-otlp-token"]).toBe(OTLP_TOKEN);
    const all = op.logs.join("\n");
    expect(all).not.toContain(OTLP_TOKEN);
    expect(all).not.toContain("query-s3cret");
    const start = op.logs.find((l) => l.includes("exporting a span per attempt"));
    expect(start).toBeDefined();
    expect(JSON.parse(start!)).toMatchObject({ endpoint: `${front.url}/v1/traces`, headers: ["x-otlp-token"], serviceName: "hookline-e2e" });
  });
});

describe("tracing off: the producer's trace context passes through", () => {
  let ns: string;
  let receiver: Receiver;
  let op: TestOperator;

  beforeAll(async () => {
    receiver = await Receiver.start(() => 200);
    ns = await createNamespace("tracing-off");
    await apply([subscription(ns, "plain", { url: receiver.url("/plain") })]);
    op = await startOperator({ namespaces: [ns] });
    await waitFor(() => op.op.caches.subscriptions.size === 1, { description: "the subscription cached" });
  });
  afterAll(async () => {
    await op?.stop();
    await receiver?.close();
    if (ns) await deleteNamespace(ns);
  });

  it("sends the stored traceparent and tracestate unchanged, nothing when the event has none, and logs the producer's trace id", async () => {
    const traceContext = { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03", tracestate: "rojo=00f067aa0ba902b7" };
    await publish({ namespace: ns, type: "order.paid", id: "evt-passed", data: {} }, { kubeconfig: inject("kubeconfig"), traceContext });
    await publish({ namespace: ns, type: "order.paid", id: "evt-untraced", data: {} }, { kubeconfig: inject("kubeconfig") });
    await waitForPhase(ns, ["evt-passed.plain", "evt-untraced.plain"], "Succeeded");
    const passed = receiver.requests.find((r) => r.headers["webhook-id"] === "evt-passed")!;
    expect(passed.headers.traceparent).toBe(traceContext.traceparent);
    expect(passed.headers.tracestate).toBe(traceContext.tracestate);
    const untraced = receiver.requests.find((r) => r.headers["webhook-id"] === "evt-untraced")!;
    expect(untraced.headers).not.toHaveProperty("traceparent");
    expect(untraced.headers).not.toHaveProperty("tracestate");
    const line = op.logs.find((l) => l.includes('"msg":"webhook_attempt"') && l.includes("evt-passed.plain"));
    expect(JSON.parse(line!)).toMatchObject({ trace_id: "4bf92f3577b34da6a3ce929d0e0e4736" });
    expect(JSON.parse(line!)).not.toHaveProperty("span_id");
    expect(op.logs.some((l) => l.includes("exporting a span per attempt"))).toBe(false);
  });
});

describe("tracing in stream mode: the message's trace context, a span per attempt, and the dead letter's replay in the same trace", () => {
  let nats: TestNats;
  let conn: StreamConnection;
  let ns: string;
  let collector: TestCollector;
  let receiver: Receiver;
  let op: TestOperator;
  let flakyCalls = 0;
  let permanentFixed = false;

  const requestsFor = (id: string) => receiver.requests.filter((r) => r.headers["webhook-id"] === id);
  const spansOf = (id: string): ReceivedSpan[] => collector.spans().filter((s) => s.attributes["hookline.event.id"] === id);
  const waitForSpans = (id: string, n: number) => waitFor(() => (spansOf(id).length >= n ? spansOf(id) : undefined), { description: `${n} spans of ${id} at the collector`, timeoutMs: 60_000 });
  const byAttempt = (spans: ReceivedSpan[]) => [...spans].sort((a, b) => Number(a.attributes["hookline.attempt"]) - Number(b.attributes["hookline.attempt"]));

  beforeAll(async () => {
    collector = await TestCollector.start("tracing-stream");
    receiver = await Receiver.start((r) => {
      if (r.path === "/flaky") return ++flakyCalls === 1 ? 503 : 200;
      if (r.path === "/permanent") return permanentFixed ? 200 : 400;
      return 200;
    });
    nats = await startNats("tracing");
    conn = await connectStream(nats.url);
      const jsm = await conn.jetstreamManager();
    ns = await createNamespace("tracing-stream");
    await apply([
      subscription(ns, "flaky", { url: receiver.url("/flaky"), eventTypes: ["order.paid"], retry: quick }),
      subscription(ns, "permanent", { url: receiver.url("/permanent"), eventTypes: ["order.refunded"], retry: quick }),
    ]);
    op = await startOperator({
      namespaces: [ns],
      env: { HOOKLINE_NATS_URL: nats.url, OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint, OTEL_SERVICE_NAME: "hookline-stream", OTEL_BSP_SCHEDULE_DELAY: "50" },
    });
    for (const s of ["flaky", "permanent"]) await waitForConsumer(jsm, ns, s);
  });
  afterAll(async () => {
    await op?.stop();
    await conn?.close();
    await nats?.close();
    await receiver?.close();
    await collector?.close();
    if (ns) await deleteNamespace(ns);
  });

  it("each attempt of a stream message is a CLIENT span, child of the producer's context from the message's headers, and its id the receiver's parent id", async () => {
    const producer = { traceId: "5bf92f3577b34da6a3ce929d0e0e4737", parentId: "10f067aa0ba902b8" };
    const traceContext = { traceparent: `00-${producer.traceId}-${producer.parentId}-01`, tracestate: "vendor=stream" };
    await publishToStream(conn, { namespace: ns, type: "order.paid", id: "evt-stream-traced", data: { order: 1 } }, { traceContext });
    await waitFor(() => (requestsFor("evt-stream-traced").length >= 2 ? true : undefined), { description: "two attempts of evt-stream-traced", timeoutMs: 60_000 });

    const sent = requestsFor("evt-stream-traced");
    expect(sent).toHaveLength(2);
    const ids = sent.map((r) => parent(r));
    for (const p of ids) expect(p).toMatchObject({ traceId: producer.traceId, flags: "01" });
    for (const r of sent) expect(r.headers.tracestate).toBe("vendor=stream");
    expect(new Set(ids.map((p) => p.spanId)).size).toBe(2);

    const spans = byAttempt(await waitForSpans("evt-stream-traced", 2));
    expect(spans.map((s) => s.spanId)).toEqual(ids.map((p) => p.spanId));
    for (const s of spans) {
      expect(s).toMatchObject({ traceId: producer.traceId, parentSpanId: producer.parentId, name: "POST", kind: 3 });
      expect(s.resource).toMatchObject({ "service.name": "hookline-stream" });
      expect(s.attributes).toMatchObject({ "hookline.namespace": ns, "hookline.subscription": "flaky", "hookline.event.id": "evt-stream-traced", "hookline.replay": false });
    }
    expect(spans.map((s) => [s.attributes["hookline.attempt"], s.attributes["http.response.status_code"], s.attributes["error.type"], s.statusCode])).toEqual([
      [1, 503, "503", 2],
      [2, 200, undefined, 0],
    ]);
  });

  it("a stream dead letter keeps the trace context (spec.traceContext), and its replay is a span in the producer's trace", async () => {
    const traceId = "1af7651916cd43dd8448eb211c80319d";
    const traceContext = { traceparent: `00-${traceId}-c7ad6b7169203332-01` };
    await publishToStream(conn, { namespace: ns, type: "order.refunded", id: "evt-stream-dead", data: { order: 2 } }, { traceContext });
    const name = deliveryName("evt-stream-dead", "permanent");
    const [dead] = await waitForPhase(ns, name, "DeadLettered", 60_000);
    expect((dead as unknown as { spec: { traceContext: unknown } }).spec.traceContext).toEqual(traceContext);

    permanentFixed = true;
    await kubectlOk(["annotate", "whdel", "-n", ns, name, "hookline.dev/replay=receiver fixed, INC-9"]);
    await waitForPhase(ns, name, "Succeeded", 60_000);

    const sent = requestsFor("evt-stream-dead");
    expect(sent).toHaveLength(2);
    const spans = byAttempt(await waitForSpans("evt-stream-dead", 2));
    expect(spans.map((s) => [s.traceId, s.parentSpanId, s.attributes["hookline.attempt"], s.attributes["hookline.replay"], s.attributes["http.response.status_code"]])).toEqual([
      [traceId, "c7ad6b7169203332", 1, false, 400],
      [traceId, "c7ad6b7169203332", 2, true, 200],
    ]);
    expect(spans.map((s) => s.spanId)).toEqual(sent.map((r) => parent(r).spanId));
    expect(spans[1]!.attributes["hookline.delivery"]).toBe(name);
  });
});
