// Nothing stalls: one object's bad luck (a refused status write, a conflict, an endpoint that
// recovers, an edited subscription) affects that object alone, and every wait ends with the
// event that ends it. Real API server, real operator, real receivers.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, delivery, events, getObj, listObjs, subscription } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";

const phase = (ns: string, name: string, p: string, timeoutMs = 30_000) =>
  waitFor(async () => {
    const d = await getObj("whdel", ns, name);
    return d?.status?.phase === p ? d : undefined;
  }, { description: `${ns}/${name} ${p}`, timeoutMs });
const succeededCondition = (d: any) => d?.status?.conditions?.find((c: any) => c.type === "Succeeded");
const annotate = (ns: string, kind: string, name: string, ...kv: string[]) => kubectlOk(["annotate", "--overwrite", kind, name, "-n", ns, ...kv]);
const failFast = { retry: { maxAttempts: 1 }, circuitBreaker: { failureThreshold: 100 } };
const orderOf = (body: string) => (JSON.parse(body) as { data: { order: string } }).data.order;

describe("a refused status write affects only its own object", () => {
  let ns: string;
  let op: TestOperator;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    ns = await createNamespace("refused");
    op = await startOperator({ namespaces: [ns], statusIntervalMs: 500 });
  });
  afterAll(async () => {
    await op?.stop();
    await Promise.all(receivers.map((r) => r.close()));
    await deleteNamespace(ns);
  });

  it("refuses a replay reason longer than status can hold, and other deliveries keep flowing", async () => {
    let fixed = false;
    const r = await Receiver.start(() => (fixed ? 200 : 500));
    const healthy = await Receiver.start(() => 200);
    receivers.push(r, healthy);
    await apply([subscription(ns, "down", { url: r.url(), ...failFast }), subscription(ns, "up", { url: healthy.url() }), delivery(ns, "dl", "down")]);
    await phase(ns, "dl", "DeadLettered");
    fixed = true;
    const sent = r.requests.length;

    const long = "incident ".repeat(400); // 3,600 characters: status.lastReplay.reason holds 1,024
    await annotate(ns, "whdel", "dl", `hookline.dev/replay=${long}`);
    await waitFor(async () => (await events(ns, "dl")).find((e) => e.reason === "ReplayRefused" && /1024 characters/.test(e.message)), { description: "ReplayRefused naming the limit" });
    await waitFor(async () => (await getObj("whdel", ns, "dl"))?.metadata.annotations?.["hookline.dev/replay"] === undefined, { description: "annotation removed" });

    // A new delivery elsewhere gets its attempt: nothing waits behind the refused one.
    await apply(delivery(ns, "fresh", "up"));
    await phase(ns, "fresh", "Succeeded", 20_000);
    expect(r.requests.length).toBe(sent); // the refused replay sent nothing
    expect((await getObj("whdel", ns, "dl"))?.status?.phase).toBe("DeadLettered");

    // A valid reason still works afterwards.
    await annotate(ns, "whdel", "dl", "hookline.dev/replay=endpoint fixed, INC-42");
    await phase(ns, "dl", "Succeeded");
  });

  it("cuts a message listing 40 long event types to the status limit, and dead-letters (not discards) the event", async () => {
    const r = await Receiver.start(() => 200);
    receivers.push(r);
    const eventTypes = Array.from({ length: 40 }, (_, i) => `invoice.${String(i).padStart(3, "0")}.${"x".repeat(240)}`);
    await apply([subscription(ns, "many-types", { url: r.url(), eventTypes }), subscription(ns, "plain", { url: r.url("/plain") })]);
    await apply(delivery(ns, "unlisted", "many-types", { eventType: "order.paid" }));
    const d = await phase(ns, "unlisted", "DeadLettered");
    expect(d.status!.deadLetter.reason).toBe("EventTypeNotSubscribed");
    expect(d.status!.deadLetter.message.length).toBeLessThanOrEqual(1024);
    expect(d.status!.deadLetter.message.endsWith("…")).toBe(true);
    await apply(delivery(ns, "after", "plain"));
    await phase(ns, "after", "Succeeded", 20_000);
    expect(r.requests.filter((q) => q.path === "/")).toHaveLength(0);
  });
});

describe("every wait ends with the event that ends it", () => {
  let ns: string;
  let op: TestOperator;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    ns = await createNamespace("recover");
    // The default probe interval (30 min): a recovered endpoint must not wait for it.
    op = await startOperator({ namespaces: [ns], statusIntervalMs: 500 });
  });
  afterAll(async () => {
    await op?.stop();
    await Promise.all(receivers.map((r) => r.close()));
    await deleteNamespace(ns);
  });

  it("attempts deliveries held by a Disabled endpoint as soon as a replay shows it recovered", async () => {
    let fixed = false;
    const r = await Receiver.start(() => (fixed ? 200 : 500));
    receivers.push(r);
    const names = Array.from({ length: 6 }, (_, i) => `d${i}`);
    await apply([
      // One request at a time: exactly ten failures disable the endpoint, so deliveries are left
      // to wait (with more in flight, all twelve attempts could be admitted before the tenth fails).
      subscription(ns, "sick", { url: r.url(), maxInFlight: 1, retry: { maxAttempts: 2, initialBackoff: "100ms", jitterPercent: 0 }, circuitBreaker: { failureThreshold: 100 } }),
      ...names.map((n) => delivery(ns, n, "sick")),
    ]);
    // The tenth failure disables the endpoint: the deliveries not dead-lettered by then wait.
    await waitFor(async () => (await getObj("whsub", ns, "sick"))?.status?.health?.state === "Disabled", { description: "endpoint Disabled" });
    const held = await waitFor(async () => {
      const all = await listObjs("whdel", ns);
      const waiting = all.filter((d) => succeededCondition(d)?.reason === "EndpointDisabled");
      const settled = all.filter((d) => d.status?.phase === "DeadLettered").length + waiting.length;
      return settled === names.length && waiting.length > 0 ? waiting : undefined;
    }, { description: "the rest wait, saying so" });
    expect(succeededCondition(held[0])!.message).toMatch(/disabled after repeated failures.*next probe at .*waiting since/);

    fixed = true;
    await annotate(ns, "whsub", "sick", "hookline.dev/replay-dead-letters=endpoint fixed, INC-7");
    await waitFor(async () => (await getObj("whsub", ns, "sick"))?.status?.health?.state === "Healthy", { description: "endpoint Healthy" });
    // Not the 30-minute probe: the held deliveries go at once.
    for (const d of held) await phase(ns, d.metadata.name, "Succeeded", 20_000);
  });
});

describe("replays go through the work queue", () => {
  let ns: string;
  let op: TestOperator;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    ns = await createNamespace("replayq");
    op = await startOperator({ namespaces: [ns], statusIntervalMs: 500, env: { WEBHOOK_MAX_IN_FLIGHT: "2", WEBHOOK_HEALTH_PROBE_INTERVAL_MS: "1000" } });
  });
  afterAll(async () => {
    await op?.stop();
    await Promise.all(receivers.map((r) => r.close()));
    await deleteNamespace(ns);
  });

  it("a single and a bulk replay of the same dead letter send it once, and a delivered event stays Succeeded", async () => {
    let fixed = false;
    let replays = 0;
    // When fixed: the first replay request succeeds slowly; any second one would fail.
    const r = await Receiver.start(() => {
      if (!fixed) return 500;
      return ++replays === 1 ? { status: 200, delayMs: 800 } : 500;
    });
    receivers.push(r);
    await apply([subscription(ns, "twice", { url: r.url(), ...failFast }), delivery(ns, "once", "twice")]);
    await phase(ns, "once", "DeadLettered");
    fixed = true;
    await Promise.all([
      annotate(ns, "whdel", "once", "hookline.dev/replay=endpoint fixed, single"),
      annotate(ns, "whsub", "twice", "hookline.dev/replay-dead-letters=endpoint fixed, bulk"),
    ]);
    await phase(ns, "once", "Succeeded");
    await waitFor(async () => (await getObj("whsub", ns, "twice"))?.status?.lastReplay?.finishedAt, { description: "bulk replay finished" });
    await waitFor(async () => (await getObj("whdel", ns, "once"))?.metadata.annotations?.["hookline.dev/replay"] === undefined, { description: "annotation handled" });
    const final = await getObj("whdel", ns, "once");
    expect(final!.status!.phase).toBe("Succeeded");
    expect(replays).toBe(1);
  });

  it("a bulk replay keeps within maxInFlight and the operator's request slots", async () => {
    let fixed = false;
    const r = await Receiver.start(() => (fixed ? { status: 200, delayMs: 150 } : 500));
    receivers.push(r);
    const names = Array.from({ length: 12 }, (_, i) => `slot-${i}`);
    await apply([subscription(ns, "narrow", { url: r.url(), maxInFlight: 1, ...failFast }), ...names.map((n) => delivery(ns, n, "narrow"))]);
    for (const n of names) await phase(ns, n, "DeadLettered");
    fixed = true;
    r.maxConcurrent = 0;
    await annotate(ns, "whsub", "narrow", "hookline.dev/replay-dead-letters=endpoint fixed, INC-9", "hookline.dev/replay-concurrency=10");
    for (const n of names) await phase(ns, n, "Succeeded");
    expect(r.maxConcurrent).toBe(1);
    const sub = await waitFor(async () => {
      const s = await getObj("whsub", ns, "narrow");
      return s?.status?.lastReplay?.finishedAt ? s : undefined;
    }, { description: "bulk replay finished" });
    expect(sub.status!.lastReplay).toMatchObject({ attempted: 12, succeeded: 12, failed: 0 });
  });

  it("refuses single and bulk replays while the subscription is paused, sending nothing", async () => {
    let fixed = false;
    const r = await Receiver.start(() => (fixed ? 200 : 500));
    receivers.push(r);
    await apply([subscription(ns, "pausing", { url: r.url(), ...failFast }), delivery(ns, "p1", "pausing"), delivery(ns, "p2", "pausing")]);
    await phase(ns, "p1", "DeadLettered");
    await phase(ns, "p2", "DeadLettered");
    fixed = true;
    await apply(subscription(ns, "pausing", { url: r.url(), ...failFast, paused: true }));
    await waitFor(async () => (await getObj("whsub", ns, "pausing"))?.status?.conditions?.some((c: any) => c.type === "Ready" && c.reason === "Paused"), { description: "paused" });
    await annotate(ns, "whsub", "pausing", "hookline.dev/replay-dead-letters=endpoint fixed, INC-11");
    await waitFor(async () => (await events(ns, "pausing")).find((e) => e.reason === "ReplayRefused" && /paused/.test(e.message)), { description: "bulk replay refused while paused" });
    await annotate(ns, "whdel", "p1", "hookline.dev/replay=endpoint fixed, INC-11");
    await waitFor(async () => (await events(ns, "p1")).find((e) => e.reason === "ReplayRefused" && /paused/.test(e.message)), { description: "single replay refused while paused" });
    expect(r.requests).toHaveLength(2); // the two first attempts, no replay
  });
});

describe("editing eventTypes keeps the events it no longer lists", () => {
  let ns: string;
  let op: TestOperator;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    ns = await createNamespace("edit-types");
    op = await startOperator({ namespaces: [ns], statusIntervalMs: 500 });
  });
  afterAll(async () => {
    await op?.stop();
    await Promise.all(receivers.map((r) => r.close()));
    await deleteNamespace(ns);
  });

  it("dead-letters pending deliveries of a type removed from the subscription; they replay once it is listed again", async () => {
    const r = await Receiver.start(() => 200);
    receivers.push(r);
    const spec = { url: r.url(), eventTypes: ["order.paid", "order.refunded"], paused: true };
    const names = ["refund-1", "refund-2", "refund-3"];
    await apply([subscription(ns, "shop", spec), ...names.map((n) => delivery(ns, n, "shop", { eventType: "order.refunded" }))]);
    await waitFor(async () => succeededCondition(await getObj("whdel", ns, "refund-3"))?.reason === "Paused", { description: "held while paused" });

    await apply(subscription(ns, "shop", { ...spec, eventTypes: ["order.paid"], paused: false }));
    for (const n of names) {
      const d = await phase(ns, n, "DeadLettered");
      expect(d.status!.deadLetter.reason).toBe("EventTypeNotSubscribed");
    }
    expect(r.requests).toHaveLength(0);

    // Replaying while the type is still not listed is refused, and sends nothing.
    await annotate(ns, "whdel", "refund-1", "hookline.dev/replay=types fixed, INC-3");
    await waitFor(async () => (await events(ns, "refund-1")).find((e) => e.reason === "ReplayRefused" && /order\.refunded/.test(e.message)), { description: "replay refused" });
    expect(r.requests).toHaveLength(0);

    await apply(subscription(ns, "shop", { ...spec, paused: false }));
    await annotate(ns, "whsub", "shop", "hookline.dev/replay-dead-letters=types fixed, INC-3");
    for (const n of names) await phase(ns, n, "Succeeded");
    expect(r.requests.map((q) => orderOf(q.body)).sort()).toEqual(names);
  });
});
