// spec.transform, a CEL expression that builds the body sent to one subscription, against the
// real API server and operator (CR mode) and a real nats-server (stream mode): the receiver gets
// the transformed body, signed over those bytes; an event the transform fails on is a dead
// letter at once, keeping the original event, and its replay transforms again with the
// subscription's current expression; a transform that does not compile makes the subscription
// Ready=False (InvalidTransform) and its deliveries wait, then go once it is fixed.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deliveryName } from "../../src/publish/naming.js";
import type { StreamConnection } from "../../src/jetstream/jetstream.js";
import { createNamespace, deleteNamespace, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, delivery, getObj, secret, subscription, TEST_SECRET, waitForPhase } from "../helpers/kube.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";
import { publishEvent, waitForConsumer } from "../helpers/stream.js";

const SLACK = '{"text": "Order " + string(data.order) + " paid: " + string(data.amount.value) + " " + data.amount.currency}';
const ready = async (ns: string, name: string) => (await getObj("whsub", ns, name))?.status?.conditions?.find((c: { type: string }) => c.type === "Ready");

describe("spec.transform in CR mode", () => {
  let ns: string;
  let op: TestOperator;
  let rcv: Receiver;

  beforeAll(async () => {
    ns = await createNamespace("transform-cr");
    rcv = await Receiver.start(() => 200);
    await apply(secret(ns, "signing"));
    op = await startOperator({ namespaces: [ns], statusIntervalMs: 500 });
  });
  afterAll(async () => {
    await op?.stop();
    await rcv?.close();
    if (ns) await deleteNamespace(ns);
  });

  it("sends the body the transform builds, signed over it; an event it fails on is a dead letter that a replay transforms again", async () => {
    const spec = { url: rcv.url("/slack"), secretRef: { name: "signing" }, transform: SLACK, retry: { maxAttempts: 3 } };
    await apply([
      subscription(ns, "slack", spec),
      delivery(ns, "paid-1", "slack", { eventId: "evt-paid-1", payload: { order: 1001, amount: { value: 4200, currency: "EUR" } } }),
      delivery(ns, "odd-1", "slack", { eventId: "evt-odd-1", payload: { order: 1002, note: "no amount" } }),
    ]);
    await waitForPhase(ns, "paid-1", "Succeeded", 30_000);
    const req = rcv.requests.find((r) => r.headers["webhook-id"] === "evt-paid-1")!;
    expect(req.body).toBe('{"text":"Order 1001 paid: 4200 EUR"}');
    expect(() => Receiver.verify(req, TEST_SECRET)).not.toThrow();

    // The transform fails on this event: a dead letter at once, nothing sent, the original event kept.
    const [dead] = await waitForPhase(ns, "odd-1", "DeadLettered", 30_000);
    expect(dead!.status!.deadLetter.reason).toBe("PermanentFailure");
    expect(dead!.status!.attempts).toBe(1);
    expect(dead!.status!.lastAttempt.error).toMatch(/^spec\.transform: .*amount/);
    expect(dead!.spec.payload).toEqual({ order: 1002, note: "no amount" });
    expect(rcv.requests.filter((r) => r.headers["webhook-id"] === "evt-odd-1")).toHaveLength(0);

    // Fix the transform, replay: the current expression builds the body.
    await apply(subscription(ns, "slack", { ...spec, transform: '{"text": "Order " + string(data.order) + (has(data.amount) ? " paid" : ": " + data.note)}' }));
    await waitFor(async () => (await getObj("whsub", ns, "slack"))?.metadata.generation === (await getObj("whsub", ns, "slack"))?.status?.observedGeneration, { description: "the new spec seen" });
    await kubectlOk(["annotate", "whdel", "odd-1", "-n", ns, "hookline.dev/replay=transform fixed, INC-9"]);
    await waitForPhase(ns, "odd-1", "Succeeded", 30_000);
    const replayed = rcv.requests.find((r) => r.headers["webhook-id"] === "evt-odd-1")!;
    expect(replayed.body).toBe('{"text":"Order 1002: no amount"}');
    expect(() => Receiver.verify(replayed, TEST_SECRET)).not.toThrow();
  });

  it("a transform that does not compile: Ready=False (InvalidTransform, naming the position); its deliveries wait, then go once it is fixed", async () => {
    const spec = { url: rcv.url("/broken"), secretRef: { name: "signing" }, transform: '{"text": data.order +}' };
    await apply([subscription(ns, "broken", spec), delivery(ns, "waits-1", "broken", { eventId: "evt-waits-1", payload: { order: 7 } })]);
    const c = await waitFor(async () => ((await ready(ns, "broken"))?.reason === "InvalidTransform" ? ready(ns, "broken") : undefined), { description: "InvalidTransform" });
    expect(c).toMatchObject({ status: "False", message: expect.stringMatching(/^spec\.transform does not parse: at 1:\d+/) });
    await waitFor(async () => (await getObj("whdel", ns, "waits-1"))?.status?.conditions?.some((x: { reason: string; message: string }) => x.reason === "InvalidSubscription" && x.message.includes("spec.transform")), { description: "the delivery waits (InvalidSubscription, naming spec.transform)" });
    expect(rcv.requests.filter((r) => r.path === "/broken")).toHaveLength(0);
    await apply(subscription(ns, "broken", { ...spec, transform: '{"order": data.order}' }));
    await waitForPhase(ns, "waits-1", "Succeeded", 30_000);
    expect(rcv.requests.find((r) => r.path === "/broken")!.body).toBe('{"order":7}');
  });
});

describe("spec.transform in stream mode", () => {
  let nats: TestNats;
  let conn: StreamConnection;
  let ns: string;
  let op: TestOperator;
  let rcv: Receiver;

  beforeAll(async () => {
    nats = await startNats("transform");
    conn = await connectStream(nats.url);
    ns = await createNamespace("transform-stream");
    rcv = await Receiver.start(() => 200);
    await apply(secret(ns, "signing"));
    op = await startOperator({ namespaces: [ns], statusIntervalMs: 500, env: { HOOKLINE_NATS_URL: nats.url } });
  });
  afterAll(async () => {
    await op?.stop();
    await conn?.close();
    await nats?.close();
    await rcv?.close();
    if (ns) await deleteNamespace(ns);
  });

  it("sends the transformed body, signed over it; an event it fails on is a dead letter with the original event", async () => {
    const jsm = await conn.jetstreamManager();
    await apply(subscription(ns, "slack", { url: rcv.url("/slack"), secretRef: { name: "signing" }, transform: SLACK }));
    await waitForConsumer(jsm, ns, "slack");
    await publishEvent(conn, ns, "order.paid", "s-paid", { order: 2001, amount: { value: 5, currency: "EUR" } });
    await publishEvent(conn, ns, "order.paid", "s-odd", { order: 2002 });
    await rcv.waitForRequests(1, 30_000);
    const req = rcv.requests.find((r) => r.headers["webhook-id"] === "s-paid")!;
    expect(req.body).toBe('{"text":"Order 2001 paid: 5 EUR"}');
    expect(() => Receiver.verify(req, TEST_SECRET)).not.toThrow();
    const [dead] = await waitForPhase(ns, deliveryName("s-odd", "slack"), "DeadLettered", 30_000);
    expect(dead!.status!.deadLetter.reason).toBe("PermanentFailure");
    expect(dead!.spec.payload).toEqual({ order: 2002 });
    expect(rcv.requests.filter((r) => r.headers["webhook-id"] === "s-odd")).toHaveLength(0);
  });
});
