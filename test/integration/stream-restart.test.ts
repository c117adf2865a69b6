// Stream mode across a nats-server crash: the server is killed mid-load and started again on the
// same store; the operator reports not ready meanwhile, reconnects by itself, and every event,
// published before or after, reaches the receiver with its bytes exactly as published.
import type { JetStreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StreamConnection } from "../../src/jetstream/jetstream.js";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { apply, listObjs, subscription } from "../helpers/kube.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";
import { dataBytes, publishEvent, waitForConsumer, waitForDrained } from "../helpers/stream.js";

const dataOf = (id: string) => ({ id, note: `déjà vu — 日本語 — 😀 ${id}`, n: [1.5e-7, -0, 1e21] });

describe("stream mode: nats-server restart mid-load", () => {
  let nats: TestNats;
  let conn: StreamConnection;
  let jsm: JetStreamManager;
  let ns: string;
  let op: TestOperator;
  let r: Receiver;

  beforeAll(async () => {
    nats = await startNats("restart");
    conn = await connectStream(nats.url);
      jsm = await conn.jetstreamManager();
    ns = await createNamespace("stream-restart");
    op = await startOperator({ namespaces: [ns], env: { HOOKLINE_NATS_URL: nats.url } });
    r = await Receiver.start(() => ({ status: 200, delayMs: 50 }));
  });
  afterAll(async () => {
    await op?.stop();
    await conn?.close();
    await nats?.close();
    await r?.close();
    if (ns) await deleteNamespace(ns);
  });

  it("loses nothing and corrupts nothing when nats-server is killed and started again on the same store", async () => {
    await apply(subscription(ns, "steady", { url: r.url(), maxInFlight: 2, timeout: "2s" }));
    await waitForConsumer(jsm, ns, "steady");
    const before = Array.from({ length: 60 }, (_, i) => `evt-before-${i}`);
    const after = Array.from({ length: 40 }, (_, i) => `evt-after-${i}`);
    for (const id of before) await publishEvent(conn, ns, "order.paid", id, dataOf(id));
    await r.waitForRequests(15);

    await nats.server.kill();
    const atKill = r.requests.length;
    expect(atKill, "killed mid-load").toBeLessThan(50);
    await waitFor(() => !op.op.ready.ready, { description: "the operator not ready while NATS is down" });
    expect(op.op.ready.reason).toMatch(/NATS/);
    await nats.server.restart();
    await waitFor(() => op.op.ready.ready, { description: "ready again once reconnected", timeoutMs: 30_000 });
    await waitFor(() => conn.isConnected(), { description: "the test's producer reconnected", timeoutMs: 30_000 });
    for (const id of after) await publishEvent(conn, ns, "order.paid", id, dataOf(id));

    const all = [...before, ...after];
    // Messages out when the server died come again after their ack wait (timeout + 30 s).
    await waitFor(() => all.every((id) => r.requests.some((q) => q.headers["webhook-id"] === id)), { description: "every event delivered", timeoutMs: 90_000 });
    await waitForDrained(jsm, ns, "steady", 60_000);
    for (const q of r.requests) {
      const id = String(q.headers["webhook-id"]);
      expect(dataBytes(q.bytes).equals(Buffer.from(JSON.stringify(dataOf(id)), "utf8")), `${id}: bytes as published`).toBe(true);
    }
    // At least once: a delivery whose acknowledgement died with the server is sent again, with its id.
    const extra = r.requests.length - all.length;
    expect(extra).toBeGreaterThanOrEqual(0);
    expect(extra).toBeLessThanOrEqual(2);
    expect(await listObjs("whdel", ns)).toHaveLength(0);
  });
});
