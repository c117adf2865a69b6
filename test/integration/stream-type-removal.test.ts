// Removing an event type from a stream-mode subscription, against a real nats-server, the real
// API server and the real operator: the events of that type already waiting in the
// subscription's consumer become dead letters (EventTypeNotSubscribed, replayable once the type
// is listed again) instead of vanishing with the narrowed filter; events of that type published
// after the removal were never the subscription's (neither sent nor dead-lettered); and the
// consumer's filter is narrowed once the backlog of the removed type is through
// (src/jetstream/type-removal.ts).
import type { JetStreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deliveryName } from "../../src/publish/naming.js";
import { listConsumers } from "../../src/jetstream/consumers.js";
import type { StreamConnection } from "../../src/jetstream/jetstream.js";
import { createNamespace, deleteNamespace, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, getObj, listObjs, secret, subscription, waitForPhase } from "../helpers/kube.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";
import { publishEvent, streamOf, waitForConsumer, waitForDrained } from "../helpers/stream.js";

describe("stream mode: removing an event type from a subscription", () => {
  let nats: TestNats;
  let conn: StreamConnection;
  let jsm: JetStreamManager;
  let ns: string;
  let op: TestOperator;
  let rcv: Receiver;

  beforeAll(async () => {
    nats = await startNats("type-removal");
    conn = await connectStream(nats.url);
    jsm = await conn.jetstreamManager();
    ns = await createNamespace("stream-types");
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

  const consumerConfig = async () => {
    const c = (await listConsumers(jsm, streamOf(ns))).find((x) => x.namespace === ns && x.name === "shop")!;
    const info = await jsm.consumers.info(streamOf(ns), c.consumer);
    return JSON.stringify({ filters: info.config.filter_subjects ?? [info.config.filter_subject], metadata: info.config.metadata });
  };
  const typesSent = () => rcv.requests.map((r) => (JSON.parse(r.body) as { id: string }).id).sort();

  it("dead-letters the waiting events of the removed type, never sends or dead-letters the ones published after, and narrows the filter once through", async () => {
    const spec = { url: rcv.url(), secretRef: { name: "signing" }, eventTypes: ["order.paid", "order.refunded"], paused: true };
    await apply(subscription(ns, "shop", spec));
    await waitForConsumer(jsm, ns, "shop");
    // Waiting in the consumer while the subscription is paused (nothing fetched).
    for (const id of ["r-1", "r-2", "r-3"]) await publishEvent(conn, ns, "order.refunded", id, { refund: id });
    for (const id of ["p-1", "p-2"]) await publishEvent(conn, ns, "order.paid", id, { order: id });
    await waitFor(async () => (await listConsumers(jsm, streamOf(ns))).find((c) => c.namespace === ns && c.name === "shop")?.pending === 5, { description: "5 events waiting" });

    // order.refunded removed; the leader has acted on it (the consumer changed) before resuming.
    const before = await consumerConfig();
    await apply(subscription(ns, "shop", { ...spec, eventTypes: ["order.paid"] }));
    await waitFor(async () => (await consumerConfig()) !== before, { description: "the consumer follows the new eventTypes" });
    // Published after the removal, while the removed type's backlog still waits: r-4 was never
    // the subscription's; p-3 is.
    await publishEvent(conn, ns, "order.refunded", "r-4", { refund: "r-4" });
    await publishEvent(conn, ns, "order.paid", "p-3", { order: "p-3" });
    await kubectlOk(["patch", "whsub", "shop", "-n", ns, "--type=merge", "-p", '{"spec":{"paused":false}}']);

    // The three refunds that were waiting: dead letters naming why, with their payload, not sent.
    const dead = await waitForPhase(ns, ["r-1", "r-2", "r-3"].map((id) => deliveryName(id, "shop")), "DeadLettered", 30_000);
    for (const d of dead) {
      expect(d.status!.deadLetter.reason).toBe("EventTypeNotSubscribed");
      expect(d.spec).toMatchObject({ eventType: "order.refunded", payload: { refund: d.spec.eventId } });
      expect(d.status!.attempts).toBe(0);
    }
    await rcv.waitForRequests(3);
    await waitForDrained(jsm, ns, "shop");
    expect(typesSent()).toEqual(["p-1", "p-2", "p-3"]);
    expect(await getObj("whdel", ns, deliveryName("r-4", "shop"))).toBeUndefined();
    expect((await listObjs("whdel", ns)).map((d) => d.metadata.name).sort()).toEqual(["r-1", "r-2", "r-3"].map((id) => deliveryName(id, "shop")).sort());

    // Once the removed type's backlog is through, the filter is the new eventTypes only, and the
    // stream (interest retention) keeps nothing for the subscription.
    await waitFor(async () => (await consumerConfig()) === JSON.stringify({ filters: [`hookline.${ns}.order.paid`], metadata: JSON.parse(before).metadata }), { description: "the filter narrowed to order.paid", timeoutMs: 30_000 });
    await waitFor(async () => (await jsm.streams.info(streamOf(ns))).state.messages === 0, { description: "the stream emptied" });

    // A dead letter of the removed type replays once the type is listed again.
    await apply(subscription(ns, "shop", { ...spec, paused: false }));
    await kubectlOk(["annotate", "whdel", deliveryName("r-1", "shop"), "-n", ns, "hookline.dev/replay=order.refunded listed again"]);
    await waitForPhase(ns, deliveryName("r-1", "shop"), "Succeeded", 30_000);
    expect(typesSent()).toEqual(["p-1", "p-2", "p-3", "r-1"]);
  });
  it("an ordered subscription: a waiting event of the removed type is a dead letter that blocks its key; its key's later events wait, other keys go on", async () => {
    const spec = { url: rcv.url("/ordered"), secretRef: { name: "signing" }, eventTypes: ["removal.a", "removal.b"], ordering: { key: "$.customer.id" }, paused: true };
    await apply(subscription(ns, "ordered-shop", spec));
    await waitForConsumer(jsm, ns, "ordered-shop");
    await publishEvent(conn, ns, "removal.b", "rt-1", { customer: { id: "x" } });
    await publishEvent(conn, ns, "removal.a", "rt-2", { customer: { id: "x" } });
    await publishEvent(conn, ns, "removal.a", "rt-3", { customer: { id: "y" } });
    await waitFor(async () => (await listConsumers(jsm, streamOf(ns))).find((c) => c.namespace === ns && c.name === "ordered-shop")?.pending === 3, { description: "3 events waiting" });
    const config = async () => {
      const c = (await listConsumers(jsm, streamOf(ns))).find((x) => x.namespace === ns && x.name === "ordered-shop")!;
      const info = await jsm.consumers.info(streamOf(ns), c.consumer);
      return JSON.stringify({ filters: info.config.filter_subjects ?? [info.config.filter_subject], metadata: info.config.metadata });
    };
    const before = await config();
    await apply(subscription(ns, "ordered-shop", { ...spec, eventTypes: ["removal.a"] }));
    await waitFor(async () => (await config()) !== before, { description: "the consumer follows the new eventTypes" });
    await kubectlOk(["patch", "whsub", "ordered-shop", "-n", ns, "--type=merge", "-p", '{"spec":{"paused":false}}']);

    const [dead] = await waitForPhase(ns, [deliveryName("rt-1", "ordered-shop")], "DeadLettered", 30_000);
    expect(dead!.status!.deadLetter.reason).toBe("EventTypeNotSubscribed");
    expect(dead!.status!.ordering).toMatchObject({ key: "$.customer.id", value: '"x"' });
    // Key y goes on; key x's next event waits behind the dead letter.
    await waitForPhase(ns, [deliveryName("rt-3", "ordered-shop")], "Succeeded", 30_000);
    await waitFor(
      async () => (await getObj("whdel", ns, deliveryName("rt-2", "ordered-shop")))?.status?.conditions?.some((c: { reason: string }) => c.reason === "OrderingBlocked"),
      { description: "rt-2 OrderingBlocked behind rt-1" },
    );
    expect(rcv.requests.filter((r) => r.path === "/ordered").map((r) => (JSON.parse(r.body) as { id: string }).id)).toEqual(["rt-3"]);
  });
});
