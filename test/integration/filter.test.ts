// spec.filter, a CEL expression over the event, against the real API server and operator: in CR
// mode (the publish fan-out creates no WebhookDelivery for an event the filter does not match,
// and says why in `skipped`) and in stream mode on a real nats-server (the message is
// acknowledged for that subscription alone and counted in webhook_events_filtered_total). A
// filter that does not compile makes its subscription Ready=False (InvalidFilter, naming the
// position) and refuses nothing to the others; a filter that fails on one event, or whose
// evaluation would cost too much, skips that event for its own subscription only.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { publish } from "../../src/index.js";
import { deliveryName } from "../../src/publish/naming.js";
import type { StreamConnection } from "../../src/jetstream/jetstream.js";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { apply, getObj, listObjs, secret, subscription, waitForPhase } from "../helpers/kube.js";
import { connectStream, startNats, type TestNats } from "../helpers/nats.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";
import { publishEvent, waitForConsumer } from "../helpers/stream.js";

const BIG_EUR = 'data.amount.value > 1000 && data.currency == "EUR"';
const ready = async (ns: string, name: string) => (await getObj("whsub", ns, name))?.status?.conditions?.find((c: { type: string }) => c.type === "Ready");

describe("spec.filter in CR mode: the publish fan-out", () => {
  let ns: string;
  let op: TestOperator;
  let rcv: Receiver;

  beforeAll(async () => {
    ns = await createNamespace("filter-cr");
    rcv = await Receiver.start(() => 200);
    op = await startOperator({ namespaces: [ns], statusIntervalMs: 500 });
    await apply([
      subscription(ns, "big-eur", { url: rcv.url("/big-eur"), filter: BIG_EUR }),
      subscription(ns, "all", { url: rcv.url("/all") }),
      subscription(ns, "broken", { url: rcv.url("/broken"), filter: "data.amount.value >\n  1000 &&" }),
      subscription(ns, "nested", { url: rcv.url("/nested"), filter: "data.items.all(a, data.items.exists(b, b == a))" }),
    ]);
  });
  afterAll(async () => {
    await op?.stop();
    await rcv?.close();
    if (ns) await deleteNamespace(ns);
  });

  it("a filter that does not compile: Ready=False, InvalidFilter, naming the position; the others are Ready", async () => {
    const c = await waitFor(async () => ((await ready(ns, "broken"))?.reason === "InvalidFilter" ? ready(ns, "broken") : undefined), { description: "broken is InvalidFilter" });
    expect(c).toMatchObject({ status: "False", message: expect.stringMatching(/^spec\.filter does not parse: at 2:\d+: .*; this subscription gets no events until it is fixed$/) });
    await waitFor(async () => (await ready(ns, "big-eur"))?.status === "True", { description: "big-eur Ready" });
  });

  it("creates deliveries only for the subscriptions whose filter matches; the publisher is told why each other was skipped", async () => {
    const kubeconfig = inject("kubeconfig");
    const big = await publish({ namespace: ns, type: "order.paid", id: "evt-big", data: { amount: { value: 4200 }, currency: "EUR", items: [1, 2] } }, { kubeconfig });
    expect(big.deliveries.map((d) => d.subscription)).toEqual(["all", "big-eur", "nested"]);
    expect(big.skipped).toEqual([{ subscription: "broken", reason: "InvalidFilter", message: expect.stringContaining("spec.filter does not parse") }]);

    const small = await publish({ namespace: ns, type: "order.paid", id: "evt-small", data: { amount: { value: 10 }, currency: "EUR", items: [] } }, { kubeconfig });
    expect(small.deliveries.map((d) => d.subscription)).toEqual(["all", "nested"]);
    expect(small.skipped).toContainEqual({ subscription: "big-eur", reason: "Filtered" });

    // A field the filter reads is missing: an error for this event and this subscription only.
    const odd = await publish({ namespace: ns, type: "order.paid", id: "evt-odd", data: { note: "no amount, no items" } }, { kubeconfig });
    expect(odd.deliveries.map((d) => d.subscription)).toEqual(["all"]);
    expect(odd.skipped).toEqual(expect.arrayContaining([{ subscription: "big-eur", reason: "FilterError", message: expect.stringContaining("amount") }]));

    // Nested loops over a 20,000-item list: over the cost budget, skipped at once for "nested"; "all" gets it.
    const items = Array.from({ length: 20_000 }, (_, i) => i);
    const heavy = await publish({ namespace: ns, type: "order.paid", id: "evt-heavy", data: { amount: { value: 1 }, currency: "EUR", items } }, { kubeconfig });
    expect(heavy.deliveries.map((d) => d.subscription)).toEqual(["all"]);
    expect(heavy.skipped).toContainEqual({ subscription: "nested", reason: "FilterError", message: expect.stringContaining("over the budget") });

    await waitForPhase(ns, [deliveryName("evt-big", "big-eur"), deliveryName("evt-big", "all"), deliveryName("evt-small", "all"), deliveryName("evt-heavy", "all")], "Succeeded", 30_000);
    const names = (await listObjs("whdel", ns)).map((d) => d.metadata.name);
    expect(names).not.toContain(deliveryName("evt-small", "big-eur"));
    expect(names).not.toContain(deliveryName("evt-big", "broken"));
    expect(rcv.requests.filter((r) => r.path === "/broken")).toHaveLength(0);
  });
});

describe("spec.filter in stream mode", () => {
  let nats: TestNats;
  let conn: StreamConnection;
  let ns: string;
  let op: TestOperator;
  let rcv: Receiver;

  beforeAll(async () => {
    nats = await startNats("filter");
    conn = await connectStream(nats.url);
    ns = await createNamespace("filter-stream");
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

  it("delivers only what matches, acknowledges the rest for that subscription alone, and counts each result", async () => {
    const jsm = await conn.jetstreamManager();
    await apply([
      subscription(ns, "big-eur", { url: rcv.url("/big-eur"), secretRef: { name: "signing" }, filter: BIG_EUR }),
      subscription(ns, "all", { url: rcv.url("/all"), secretRef: { name: "signing" } }),
    ]);
    await waitForConsumer(jsm, ns, "big-eur");
    await waitForConsumer(jsm, ns, "all");
    await publishEvent(conn, ns, "order.paid", "s-big", { amount: { value: 4200 }, currency: "EUR" });
    await publishEvent(conn, ns, "order.paid", "s-small", { amount: { value: 5 }, currency: "EUR" });
    await publishEvent(conn, ns, "order.paid", "s-odd", { note: "é€😀 no amount" });
    const ids = (path: string) => rcv.requests.filter((r) => r.path === path).map((r) => (JSON.parse(r.body) as { id: string }).id).sort();
    await waitFor(() => ids("/all").length === 3, { description: "all gets the three" });
    await waitFor(async () => (await op.metric("webhook_events_filtered_total", { subscription: "big-eur" })) === 3, { description: "three results counted for big-eur" });
    expect(ids("/big-eur")).toEqual(["s-big"]);
    expect(await op.metric("webhook_events_filtered_total", { subscription: "big-eur", result: "matched" })).toBe(1);
    expect(await op.metric("webhook_events_filtered_total", { subscription: "big-eur", result: "filtered" })).toBe(1);
    expect(await op.metric("webhook_events_filtered_total", { subscription: "big-eur", result: "error" })).toBe(1);
    // Nothing of big-eur's is left waiting or dead-lettered.
    expect((await listObjs("whdel", ns)).filter((d) => (d.spec as { subscriptionRef?: { name?: string } } | undefined)?.subscriptionRef?.name === "big-eur")).toEqual([]);
  });

  it("filter and ordering together: only what matches becomes an ordered delivery, its payload as published, sent as published", async () => {
    const jsm = await conn.jetstreamManager();
    await apply(subscription(ns, "big-eur-ordered", { url: rcv.url("/big-eur-ordered"), secretRef: { name: "signing" }, eventTypes: ["invoice.*"], filter: BIG_EUR, ordering: { key: "$.customer.id" } }));
    await waitForConsumer(jsm, ns, "big-eur-ordered");
    const matching = { amount: { value: 9000 }, currency: "EUR", customer: { id: "c-1" }, note: "Zoë é€😀", nested: [[{ a: [1, 2.5, null, true] }]] };
    await publishEvent(conn, ns, "invoice.paid", "o-big", matching);
    await publishEvent(conn, ns, "invoice.paid", "o-small", { amount: { value: 5 }, currency: "EUR", customer: { id: "c-1" } });
    const got = () => rcv.requests.filter((r) => r.path === "/big-eur-ordered");
    await waitFor(() => got().length === 1, { description: "the matching event delivered" });
    await waitFor(async () => (await op.metric("webhook_events_filtered_total", { subscription: "big-eur-ordered" })) === 2, { description: "both results counted" });
    expect((JSON.parse(got()[0]!.body) as { data: unknown }).data).toEqual(matching);
    // It went through a WebhookDelivery (ordering), made only for the matching event.
    const made = (await listObjs("whdel", ns)).filter((d) => (d.spec as { subscriptionRef?: { name?: string } } | undefined)?.subscriptionRef?.name === "big-eur-ordered");
    expect(made.length).toBeLessThanOrEqual(1);
    expect(made.map((d) => (d.spec as { eventId?: string }).eventId)).not.toContain("o-small");
    expect(await op.metric("webhook_events_filtered_total", { subscription: "big-eur-ordered", result: "filtered" })).toBe(1);
  });
});
