// Stream mode's pulls on a JetStream cluster of three, from a node that is not the consumer's
// leader: the leader's word that it handed out the whole batch (409 Batch Completed) comes
// straight back while the messages come through the routes, so it can arrive first. A pull that
// ended on it lost the batch until the ack wait (the soak on three nodes delivered a few events
// per ack wait, with or without faults). Every message of every batch must arrive, in order,
// none sent twice.
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { JetStreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { urlWithCredentials } from "../../src/cluster/nats-auth.js";
import { LocalNatsCluster } from "../../src/cluster/nats-cluster.js";
import { pull } from "../../src/transports/stream/pull.js";
import { ensureConsumer } from "../../src/jetstream/consumers.js";
import { StreamConnection } from "../../src/jetstream/jetstream.js";
import { OPERATOR_INBOX_PREFIX, STREAM_AUTH_POLICY } from "../../src/jetstream/permissions.js";
import { natsServerBinary } from "../helpers/nats.js";
import { streamOf } from "../helpers/stream.js";

const NS = "shop";
const EVENTS = 30;
const BATCH = 5;

describe("stream mode on a JetStream cluster of three", () => {
  let dir: string;
  let cluster: LocalNatsCluster;
  let conn: StreamConnection | undefined;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "hookline-cluster-pull-"));
    cluster = await LocalNatsCluster.start({ dir, binary: await natsServerBinary(), nodes: 3, auth: STREAM_AUTH_POLICY });
  }, 120_000);

  afterAll(async () => {
    await conn?.close();
    await cluster?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  }, 60_000);

  it("a pull from a node that does not lead the consumer gets every message of its batch, in order, none twice", async () => {
    const all = await StreamConnection.connect({ url: cluster.operatorUrl, source: "test", name: "hookline test", inboxPrefix: OPERATOR_INBOX_PREFIX, stream: { replicas: 3 } });
    const stream = streamOf(NS);
    let leader: string | undefined;
    try {
      await all.ensureStream(NS);
      const allJsm = await all.jetstreamManager();
      const c = await ensureConsumer(allJsm, stream, { namespace: NS, name: "hooks", uid: randomUUID() }, { eventTypes: undefined, maxInFlight: 10, timeoutMs: 10_000 });
      leader = (await allJsm.consumers.info(stream, c.name)).cluster?.leader;
    } finally {
      await all.close();
    }
    expect(leader).toMatch(/^hookline-local-\d$/);
    // The operator's user on one node only, one that does not lead the consumer.
    const away = cluster.nodes.findIndex((_, i) => `hookline-local-${i + 1}` !== leader) + 1;
    conn = await StreamConnection.connect({ url: urlWithCredentials(`nats://127.0.0.1:${cluster.node(away).ports.client}`, cluster.operator), source: "test", name: "hookline test", inboxPrefix: OPERATOR_INBOX_PREFIX, stream: { replicas: 3 } });
    jsm = await conn.jetstreamManager();
    const consumer = (await jsm.consumers.list(stream).next()).map((ci) => ci.name)[0]!;
    for (let i = 0; i < EVENTS; i++) await conn.js.publish(`hookline.${NS}.order.paid`, `event ${i}`, { msgID: `${NS}/evt-${i}` });

    const seqs: number[] = [];
    for (let round = 0; round < EVENTS / BATCH; round++) {
      const r = await pull(conn.nc, stream, consumer, { inboxPrefix: OPERATOR_INBOX_PREFIX, batch: BATCH, maxBytes: 1 << 20, expiresMs: 5_000 }, (m) => {
        seqs.push(m.seq);
        m.ack();
      });
      expect(r, `pull ${round + 1}`).toMatchObject({ got: BATCH, end: "batch" });
    }
    expect(seqs).toEqual(Array.from({ length: EVENTS }, (_, i) => i + 1));
    const info = await jsm.consumers.info(stream, consumer);
    expect(info.num_redelivered).toBe(0);
    expect(info.num_pending).toBe(0);
  }, 120_000);
});
