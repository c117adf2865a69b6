// Stream mode and event ids published before the doors refused ids that cannot be a header
// value: such a message is still in the stream after an upgrade. It cannot be sent (the
// webhook-id header would carry a line break), and its dead letter cannot hold the id
// (spec.eventId refuses it): the dead letter holds `sha256:<hex>` of the id, as the message's
// Nats-Msg-Id does, and is recorded once; the message is not refused again and again. Real
// nats-server, real API server, the real operator.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeMessage, hashedId } from "../../src/jetstream/message.js";
import type { StreamConnection } from "../../src/jetstream/jetstream.js";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { apply, listObjs, subscription } from "../helpers/kube.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";
import { waitForConsumer, waitForDrained } from "../helpers/stream.js";

describe("stream mode: a message whose event id cannot be a header value", () => {
  let nats: TestNats;
  let conn: StreamConnection;
  let ns: string;
  let op: TestOperator;
  let receiver: Receiver;

  beforeAll(async () => {
    nats = await startNats("legacy-ids");
    conn = await connectStream(nats.adminUrl); // the test looks into the buckets as an admin (the operator may only use them its way)
    ns = await createNamespace("stream-legacy-ids");
    receiver = await Receiver.start(() => 200);
    op = await startOperator({ namespaces: [ns], env: { HOOKLINE_NATS_URL: nats.url } });
  });
  afterAll(async () => {
    await op?.stop();
    await receiver?.close();
    await conn?.close();
    await nats?.close();
    if (ns) await deleteNamespace(ns);
  });

  it("is dead-lettered once, its dead letter holding the hashed id; the next message is delivered", async () => {
    await apply(subscription(ns, "acme", { url: receiver.url(), eventTypes: ["order.*"] }));
    const jsm = await conn.jetstreamManager();
    await waitForConsumer(jsm, ns, "acme");
    // What an earlier version's door let through, written to the stream as it wrote it.
    const id = "evt-1\r\nX-Injected: 1";
    await conn.publish(encodeMessage({ id, type: "order.paid", namespace: ns, timestamp: new Date().toISOString(), data: { order: 1 } }));
    await conn.publish(encodeMessage({ id: "evt-2", type: "order.paid", namespace: ns, timestamp: new Date().toISOString(), data: { order: 2 } }));

    const [letter] = await waitFor(
      async () => {
        const items = (await listObjs("whdel", ns)).filter((d) => d.status?.phase === "DeadLettered");
        return items.length ? items : undefined;
      },
      { description: "the dead letter of the message with the unsendable id" },
    );
    expect(letter!.spec).toMatchObject({ subscriptionRef: { name: "acme" }, eventType: "order.paid", eventId: hashedId(id), payload: { order: 1 } });
    expect(letter!.spec.eventId).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(letter!.status).toMatchObject({ deadLetter: { reason: "PermanentFailure" }, lastAttempt: { reason: "invalid_request" } });
    await waitForDrained(jsm, ns, "acme");
    expect(receiver.requests.map((r) => r.headers["webhook-id"])).toEqual(["evt-2"]);
    // Recorded once: the API server never refused it.
    expect(op.logs.filter((l) => l.includes("is invalid: spec.eventId"))).toEqual([]);
  });
});
