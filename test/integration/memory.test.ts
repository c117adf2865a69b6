// Memory that does not grow with the bytes of pending payloads: the delivery cache keeps a
// summary of each payload (size, SHA-256), never the payload; small payloads (64 KiB at most) are
// kept apart within a fixed byte budget (HOOKLINE_PAYLOAD_CACHE_BYTES) for their attempt, and
// any other is read from the API server by its attempt and dropped. In stream mode, what a replica holds of the stream's messages stays
// within its byte budget (HOOKLINE_STREAM_MAX_HELD_BYTES), whatever maxInFlight says: JetStream
// keeps the rest. Real API server, real nats-server, real operator (in process, then as a
// child process whose RSS is read from /proc).
import { readFileSync } from "node:fs";
import { KubeConfig } from "@kubernetes/client-node";
import { afterEach, describe, expect, inject, it } from "vitest";
import { KEPT_PAYLOAD_OVERHEAD_BYTES } from "../../src/delivery/kept-payloads.js";
import { MESSAGE_ROOM_BYTES } from "../../src/transports/stream/held-bytes.js";
import { KubeClient } from "../../src/kube/client.js";
import { createNamespace, deleteNamespace, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, create, delivery, getObj, subscription } from "../helpers/kube.js";
import { connectStream, startNats } from "../helpers/nats.js";
import { startOperator } from "../helpers/operator.js";
import { sample, spawnOperator, type OperatorProcess } from "../helpers/process.js";
import { Receiver } from "../helpers/receiver.js";
import { publishEvent, streamOf, waitForConsumer } from "../helpers/stream.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function namespace(prefix: string): Promise<string> {
  const ns = await createNamespace(prefix);
  cleanups.push(() => deleteNamespace(ns));
  return ns;
}

/** The body the operator must send: the payload exactly as the API server stores it. */
function expectedBody(id: string, type: string, created: string, payload: unknown): string {
  return `{"id":${JSON.stringify(id)},"type":${JSON.stringify(type)},"timestamp":${JSON.stringify(created)},"created_at":${JSON.stringify(created)},"data":${JSON.stringify(payload ?? null)}}`;
}

describe("memory: payloads are not kept in the cache, only small ones within a budget", () => {
  it("caches pending deliveries without their payload, keeps the small ones apart for their attempt, and sends each payload byte for byte", async () => {
    const ns = await namespace("mem-cache");
    const r = await Receiver.start(() => 200);
    cleanups.push(() => r.close());
    const op = await startOperator({ namespaces: [ns] });
    cleanups.push(() => op.stop());
    const payloads: Record<string, unknown> = {
      unicode: { text: "Grüße, 東京 😀 \u2028 \"quoted\" \\ back", nested: { list: [1, 2.5, -0.001, true, null, { z: 1, a: 2 }] } },
      big: { pad: "x".repeat(200 * 1024), n: 7 },
      scalar: "just a string",
    };
    await apply(subscription(ns, "held", { url: r.url(), paused: true }));
    await create([
      ...Object.entries(payloads).map(([name, payload]) => delivery(ns, name, "held", { payload, eventId: `evt-${name}` })),
      delivery(ns, "none", "held", { payload: undefined }),
    ]);
    const names = [...Object.keys(payloads), "none"];
    // Pending on a paused subscription: every one sits in the active cache.
    for (const name of names) {
      await waitFor(() => (op.op.caches.delivery(`${ns}/${name}`)?.status?.conditions ?? []).some((c) => c.reason === "Paused"), { description: `${name} cached and Paused` });
      const cached = op.op.caches.delivery(`${ns}/${name}`)!;
      expect((cached.spec as Record<string, unknown>).payload, `${name}: payload in the cache`).toBeUndefined();
    }
    // unicode and scalar are kept for their attempts; big (200 KiB) is not, none has no payload.
    const keptBytes = op.op.caches.payloads.bytesByNamespace().get(ns) ?? 0;
    const small = ["unicode", "scalar"].map((n) => Buffer.byteLength(JSON.stringify(payloads[n])) + KEPT_PAYLOAD_OVERHEAD_BYTES);
    expect(keptBytes).toBe(small[0]! + small[1]!);

    const stored = Object.fromEntries(await Promise.all(names.map(async (n) => [n, (await getObj("whdel", ns, n))!] as const)));
    await kubectlOk(["patch", "whsub", "held", "-n", ns, "--type", "merge", "-p", '{"spec":{"paused":false}}']);
    await r.waitForRequests(names.length);
    for (const name of names) {
      const s = stored[name]!;
      const req = r.requests.find((q) => q.headers["webhook-id"] === ((s.spec.eventId as string | undefined) ?? s.metadata.uid));
      expect(req, `${name}: request`).toBeDefined();
      const created = (s.metadata as { creationTimestamp?: string }).creationTimestamp!;
      expect(req!.body, `${name}: body`).toBe(expectedBody((s.spec.eventId as string | undefined) ?? s.metadata.uid, "order.paid", created, s.spec.payload));
    }
    for (const name of names) {
      await waitFor(async () => (await getObj("whdel", ns, name))?.status?.phase === "Succeeded", { description: `${name} Succeeded` });
    }
    // The kept two were sent without a read; big was read from the API server.
    expect(await op.metric("hookline_payload_cache_reads_total", { result: "hit" })).toBe(2);
    expect(await op.metric("hookline_payload_cache_reads_total", { result: "miss" })).toBe(1);
    await waitFor(() => !op.op.caches.payloads.bytesByNamespace().has(ns), { description: "the finished deliveries' kept payloads forgotten" });
  });

  it("an operator with 400 pending 250 KiB deliveries (100 MiB of payload) stays within 100 MiB of an empty one, peak included", { timeout: 300_000 }, async () => {
    const ns = await namespace("mem-rss");
    await apply(subscription(ns, "held", { url: "http://127.0.0.1:9/never", paused: true }));

    const empty = await measure(ns, "empty");
    const kc = new KubeConfig();
    kc.loadFromFile(inject("kubeconfig"));
    const client = await KubeClient.create(kc);
    cleanups.push(() => client.destroy());
    const pad = "x".repeat(250 * 1024);
    const path = `/apis/hookline.dev/v1alpha1/namespaces/${ns}/webhookdeliveries`;
    for (let i = 0; i < 400; i += 8) {
      await Promise.all(
        Array.from({ length: 8 }, (_, j) => client.request({ method: "POST", path, body: delivery(ns, `big-${i + j}`, "held", { payload: { seq: i + j, pad } }) })),
      );
    }
    const full = await measure(ns, "full", 400);
    const growthMiB = (full.rss - empty.rss) / 1024;
    const peakGrowthMiB = (full.hwm - empty.rss) / 1024;
    console.log(`RSS empty ${(empty.rss / 1024).toFixed(1)} MiB (peak ${(empty.hwm / 1024).toFixed(1)}); with 400 x 250 KiB pending ${(full.rss / 1024).toFixed(1)} MiB (peak ${(full.hwm / 1024).toFixed(1)}): growth ${growthMiB.toFixed(1)} MiB, peak growth ${peakGrowthMiB.toFixed(1)} MiB`);
    expect(growthMiB).toBeLessThan(100);
    expect(peakGrowthMiB).toBeLessThan(100);
    expect(full.keptBytes, "250 KiB payloads are too big to keep").toBe(0);
  });

  it("an operator with 2,000 pending 32 KiB deliveries (62.5 MiB of payload, twice the default HOOKLINE_PAYLOAD_CACHE_BYTES) keeps 32 MiB of them and grows less than 100 MiB, peak included", { timeout: 300_000 }, async () => {
    const ns = await namespace("mem-kept");
    await apply(subscription(ns, "held", { url: "http://127.0.0.1:9/never", paused: true }));
    const empty = await measure(ns, "empty");
    const kc = new KubeConfig();
    kc.loadFromFile(inject("kubeconfig"));
    const client = await KubeClient.create(kc);
    cleanups.push(() => client.destroy());
    // Non-ASCII: the budget counts UTF-8 bytes, at least what V8 holds.
    const pad = "ü".repeat(16 * 1024 - 32);
    const path = `/apis/hookline.dev/v1alpha1/namespaces/${ns}/webhookdeliveries`;
    for (let i = 0; i < 2_000; i += 25) {
      await Promise.all(Array.from({ length: 25 }, (_, j) => client.request({ method: "POST", path, body: delivery(ns, `k-${i + j}`, "held", { payload: { seq: i + j, pad } }) })));
    }
    const full = await measure(ns, "full", 2_000);
    const growthMiB = (full.rss - empty.rss) / 1024;
    const peakGrowthMiB = (full.hwm - empty.rss) / 1024;
    console.log(`RSS empty ${(empty.rss / 1024).toFixed(1)} MiB; with 2,000 x 32 KiB pending ${(full.rss / 1024).toFixed(1)} MiB (peak ${(full.hwm / 1024).toFixed(1)}), ${(full.keptBytes / 1048576).toFixed(1)} MiB kept: growth ${growthMiB.toFixed(1)} MiB, peak growth ${peakGrowthMiB.toFixed(1)} MiB`);
    expect(full.keptBytes).toBeLessThanOrEqual(32 * 1024 * 1024);
    expect(full.keptBytes).toBeGreaterThan(31 * 1024 * 1024);
    expect(growthMiB).toBeLessThan(100);
    expect(peakGrowthMiB).toBeLessThan(100);
  });
});

describe("memory: stream mode holds at most its byte budget", () => {
  it("two slow subscriptions (maxInFlight 1000 each, the default 100 request slots) and 400 events of 250 KiB (200 MiB for them to hold): RSS grows less than 100 MiB, peak included, and both hold a share", { timeout: 300_000 }, async () => {
    const ns = await namespace("mem-stream");
    const nats = await startNats("mem");
    cleanups.push(() => nats.close());
    const conn = await connectStream(nats.url);
    cleanups.push(() => conn.close());
    const jsm = await conn.jetstreamManager();
    // A slow endpoint: no answer within the test; the request slots stay taken, and every other
    // message waits for one.
    const r = await Receiver.start(() => "hang");
    cleanups.push(() => r.close());
    const slow = (paused: boolean) => ["slow-a", "slow-b"].map((name) => subscription(ns, name, { url: r.url(`/${name}`), maxInFlight: 1000, timeout: "120s", paused }));
    await apply(slow(true));

    const p = await spawnOperator({ name: `mem-stream-${ns}`, namespaces: [ns], env: { LEADER_ELECT: "false", HOOKLINE_NATS_URL: nats.url } });
    cleanups.push(async () => {
      p.kill("SIGKILL");
      await p.exited;
    });
    for (const name of ["slow-a", "slow-b"]) {
      await waitForConsumer(jsm, ns, name);
      await p.waitForLog((l) => l.msg === "stream consumer started" && l.subscription === `${ns}/${name}`, 30_000, `${name} reading`);
    }
    // Paused: the 400 events wait in JetStream, not in the replica.
    const pad = "x".repeat(250 * 1024);
    for (let i = 0; i < 400; i += 10) {
      await Promise.all(Array.from({ length: 10 }, (_, j) => publishEvent(conn, ns, "order.paid", `big-${i + j}`, { seq: i + j, pad })));
    }
    const before = memory(p);
    await apply(slow(false));
    // Until the replica holds what it will: its held bytes at the budget (all but the headroom
    // and the room a pull of the largest message needs), no pull open on either consumer, and
    // every message JetStream handed it received; or, bounded by nothing but maxInFlight, until it
    // has grown by more than the 100 MiB that fail the test (of 200).
    await waitFor(
      async () => {
        if (memory(p).rss - before.rss > 100 * 1024) return true;
        const m = await p.metrics();
        const budget = sample(m, "webhook_stream_held_bytes_budget");
        const held = sample(m, "webhook_stream_held_bytes");
        if (budget === 0 || held < budget - Math.max(MESSAGE_ROOM_BYTES, budget / 8) - 2 * MESSAGE_ROOM_BYTES) return false;
        const infos = await Promise.all(["slow-a", "slow-b"].map(async (name) => jsm.consumers.info(streamOf(ns), (await waitForConsumer(jsm, ns, name)).consumer)));
        if (infos.some((c) => c.num_waiting > 0)) return false;
        // Each held message counts twice its size (its bytes and its request body: held-bytes.ts).
        return held >= infos.reduce((n, c) => n + c.num_ack_pending, 0) * 2 * 250 * 1024;
      },
      { description: "the replica holds what it will", timeoutMs: 120_000 },
    );
    const after = memory(p);
    // Neither starved the other of room: each holds messages.
    for (const name of ["slow-a", "slow-b"]) expect((await jsm.consumers.info(streamOf(ns), (await waitForConsumer(jsm, ns, name)).consumer)).num_ack_pending, name).toBeGreaterThan(0);
    expect(r.requests.length).toBeGreaterThan(0);
    const growthMiB = (after.rss - before.rss) / 1024;
    const peakGrowthMiB = (after.hwm - before.rss) / 1024;
    console.log(`stream mode: RSS ${(before.rss / 1024).toFixed(1)} MiB before, ${(after.rss / 1024).toFixed(1)} MiB (peak ${(after.hwm / 1024).toFixed(1)}) with 2 x 400 x 250 KiB waiting: growth ${growthMiB.toFixed(1)} MiB, peak growth ${peakGrowthMiB.toFixed(1)} MiB`);
    expect(growthMiB).toBeLessThan(100);
    expect(peakGrowthMiB).toBeLessThan(100);
  });
});

/** VmRSS and VmHWM (KiB) of an operator process. */
function memory(p: OperatorProcess): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${p.child.pid}/status`, "utf8");
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)![1]);
  return { rss: kib("VmRSS"), hwm: kib("VmHWM") };
}

/** Starts the operator as a process on `ns`, waits until it has handled `pending` deliveries, reads VmRSS and VmHWM (KiB), stops it. */
async function measure(ns: string, name: string, pending = 0): Promise<{ rss: number; hwm: number; keptBytes: number }> {
  const p: OperatorProcess = await spawnOperator({ name: `mem-${name}-${ns}`, namespaces: [ns], env: { LEADER_ELECT: "false" } });
  try {
    const synced = await p.waitForLog((l) => l.msg === "caches synced", 60_000);
    expect(synced.activeDeliveries).toBe(pending);
    // Every pending delivery reconciled (each records Paused once), then nothing queued.
    await waitFor(async () => {
      const m = await p.metrics();
      const reconciled = sample(m, "hookline_reconcile_total", { controller: "delivery" });
      return reconciled >= pending && sample(m, "hookline_workqueue_depth", { controller: "delivery" }) === 0;
    }, { description: `${name}: ${pending} deliveries reconciled`, timeoutMs: 120_000 });
    // A few seconds for the collector; the peak (VmHWM) holds whatever the sync needed.
    await new Promise((r) => setTimeout(r, 3_000));
    const status = readFileSync(`/proc/${p.child.pid}/status`, "utf8");
    const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)![1]);
    return { rss: kib("VmRSS"), hwm: kib("VmHWM"), keptBytes: sample(await p.metrics(), "hookline_payload_cache_bytes", { namespace: ns }) };
  } finally {
    p.kill("SIGKILL");
    await p.exited;
  }
}
