// Stream mode's shared endpoint state (the JetStream key-value bucket `hookline-endpoints`)
// never holds a subscription's URL: a URL may carry a secret in its path or query. The replicas
// tell whether a record speaks of the URL they deliver to by a hash keyed with the
// subscription's uid. Real nats-server, real API server, the real operator; the same secrets
// are looked for in its log, its metrics, the subscription's status and the namespace's Events.
// A record an earlier version wrote with the URL is rewritten without it.
import { Kvm, type KV } from "@nats-io/kv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StreamConnection } from "../../src/jetstream/jetstream.js";
import { createNamespace, deleteNamespace, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, getObj, subscription } from "../helpers/kube.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";
import { publishEvent, waitForConsumer } from "../helpers/stream.js";

const SECRET_PATH = "s3cr3t-path-7f1c0e";
const SECRET_QUERY = "q5ecret-9d2a41";

describe("stream mode: the shared endpoint state holds no URL", () => {
  let nats: TestNats;
  let conn: StreamConnection;
  let ns: string;
  let op: TestOperator;
  let receiver: Receiver;
  let kv: KV;

  /** Every key and value of the bucket, as text. */
  const bucket = async (): Promise<Array<{ key: string; value: string }>> => {
    const out: Array<{ key: string; value: string }> = [];
    for await (const key of await kv.keys()) {
      const e = await kv.get(key);
      if (e && e.operation === "PUT") out.push({ key, value: e.string() });
    }
    return out;
  };
  const holdsSecret = (text: string) => text.includes(SECRET_PATH) || text.includes(SECRET_QUERY);

  beforeAll(async () => {
    nats = await startNats("endpoint-state");
    conn = await connectStream(nats.adminUrl); // the test looks into the buckets as an admin (the operator may only use them its way)
    ns = await createNamespace("stream-endpoint-state");
    receiver = await Receiver.start(() => 503);
    op = await startOperator({ namespaces: [ns], statusIntervalMs: 500, env: { HOOKLINE_NATS_URL: nats.url } });
    // The operator makes the bucket when it starts.
    kv = await waitFor(() => new Kvm(conn.js).open("hookline-endpoints").catch(() => undefined), { description: "the hookline-endpoints bucket" });
  });
  afterAll(async () => {
    await op?.stop();
    await receiver?.close();
    await conn?.close();
    await nats?.close();
    if (ns) await deleteNamespace(ns);
  });

  it("a breaker opened on a URL with a secret path and query is shared by a keyed hash: no key or value, log line, metric, status or Event holds the secret", async () => {
    const url = receiver.url(`/hooks/${SECRET_PATH}?token=${SECRET_QUERY}&tenant=acme`);
    await apply(subscription(ns, "secretive", { url, eventTypes: ["order.*"], retry: { maxAttempts: 20, initialBackoff: "100ms", jitterPercent: 0 }, circuitBreaker: { failureThreshold: 2, cooldown: "5m" } }));
    await waitForConsumer(await conn.jetstreamManager(), ns, "secretive");
    const uid = (await getObj("whsub", ns, "secretive"))!.metadata.uid;
    await publishEvent(conn, ns, "order.paid", "evt-secretive-1", { n: 1 });
    await receiver.waitForRequests(2);
    // The breaker opened and this replica shared it.
    const record = await waitFor(
      async () => {
        const e = await kv.get(`endpoint.${uid}`);
        const rec = e?.operation === "PUT" ? (e.json<{ breaker?: { state?: string } }>()) : undefined;
        return rec?.breaker?.state === "Open" ? e!.string() : undefined;
      },
      { description: "the Open breaker in the shared state" },
    );
    expect(record).not.toContain("://");
    expect(JSON.parse(record)).toMatchObject({ subscription: `${ns}/secretive`, target: expect.stringMatching(/^hmac-sha256:[A-Za-z0-9_-]{43}$/) });
    await waitFor(async () => (await getObj("whsub", ns, "secretive"))?.status?.breaker?.state === "Open", { description: "status: breaker Open" });

    const entries = await bucket();
    expect(entries.some((e) => e.key === `endpoint.${uid}`)).toBe(true);
    for (const e of entries) expect(holdsSecret(`${e.key} ${e.value}`), e.key).toBe(false);

    expect(op.logs.filter(holdsSecret)).toEqual([]);
    const metrics = await (await fetch(`http://127.0.0.1:${op.op.metricsPort}/metrics`)).text();
    expect(holdsSecret(metrics)).toBe(false);
    expect(metrics).toContain(`subscription="secretive"`);
    const status = (await getObj("whsub", ns, "secretive"))!.status;
    expect(holdsSecret(JSON.stringify(status))).toBe(false);
    const events = await kubectlOk(["get", "events", "-n", ns, "-o", "json"]);
    expect(events).toContain("secretive");
    expect(holdsSecret(events)).toBe(false);
  });

  it("a record an earlier version wrote with the URL is rewritten without it, and its state still taken", async () => {
    const url = receiver.url(`/hooks/${SECRET_PATH}/legacy?token=${SECRET_QUERY}`);
    await apply(subscription(ns, "legacy", { url, eventTypes: ["legacy.*"], circuitBreaker: { failureThreshold: 50, cooldown: "5m" } }));
    await waitForConsumer(await conn.jetstreamManager(), ns, "legacy");
    const uid = (await getObj("whsub", ns, "legacy"))!.metadata.uid;
    await waitFor(() => op.op.caches.subscription(`${ns}/legacy`) !== undefined, { description: "legacy in the operator's cache" });
    // What an earlier version wrote: another replica's Open breaker, with the URL in it.
    const now = Date.now();
    const legacy = {
      subscription: `${ns}/legacy`,
      url,
      breaker: { state: "Open", consecutiveFailures: 50, openedAt: new Date(now).toISOString(), nextProbeAt: new Date(now + 300_000).toISOString() },
      health: { state: "Healthy" },
      by: "hookline-old-replica",
      at: new Date(now).toISOString(),
    };
    await kv.put(`endpoint.${uid}`, JSON.stringify(legacy));
    const rewritten = await waitFor(
      async () => {
        const e = await kv.get(`endpoint.${uid}`);
        return e?.operation === "PUT" && !holdsSecret(e.string()) ? e.json<Record<string, unknown>>() : undefined;
      },
      { description: "the legacy record rewritten without the URL" },
    );
    expect(rewritten).toMatchObject({ subscription: `${ns}/legacy`, target: expect.stringMatching(/^hmac-sha256:/), breaker: { state: "Open" }, by: "hookline-old-replica" });
    expect(rewritten).not.toHaveProperty("url");
    // Its state is taken as any other replica's: Open here too, nothing sent.
    await publishEvent(conn, ns, "legacy.event", "evt-legacy-1", { n: 1 });
    await waitFor(async () => (await getObj("whsub", ns, "legacy"))?.status?.breaker?.state === "Open", { description: "legacy's breaker Open from the shared state" });
    expect(receiver.requests.some((r) => r.path.includes("/legacy"))).toBe(false);
    for (const e of await bucket()) expect(holdsSecret(`${e.key} ${e.value}`), e.key).toBe(false);
  });
});
