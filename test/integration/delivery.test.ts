// The delivery engine end to end: a real API server, the real operator, real receivers.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, kubectl, kubectlOk, waitFor } from "../helpers/cluster.js";
import { apply, create, delivery, events, getObj, listObjs, rawSubscription, secret, subscription, TEST_SECRET } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";

const fastRetry = { initialBackoff: "50ms", multiplier: 2, maxAttempts: 6, maxBackoff: "5s", jitterPercent: 0 };

describe("delivery: three customers", () => {
  let ns: string;
  let op: TestOperator;
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    ns = await createNamespace("delivery");
    op = await startOperator({ namespaces: [ns] });
  });
  afterAll(async () => {
    await op?.stop();
    await Promise.all(receivers.map((r) => r.close()));
    await deleteNamespace(ns);
  });

  it("retries 503s to success, dead-letters 410 at once and exhausts a 500", async () => {
    const flaky = await Receiver.start(Receiver.sequence([503, 503], 200));
    const gone = await Receiver.start(() => 410);
    const broken = await Receiver.start(() => 500);
    receivers.push(flaky, gone, broken);
    await apply([
      secret(ns, "signing"),
      subscription(ns, "flaky", { url: flaky.url(), secretRef: { name: "signing" }, retry: fastRetry }),
      subscription(ns, "gone", { url: gone.url(), secretRef: { name: "signing" }, retry: fastRetry }),
      subscription(ns, "broken", { url: broken.url(), secretRef: { name: "signing" }, retry: fastRetry, circuitBreaker: { failureThreshold: 100 } }),
      delivery(ns, "to-flaky", "flaky", { eventId: "evt-1" }),
      delivery(ns, "to-gone", "gone", { eventId: "evt-2" }),
      delivery(ns, "to-broken", "broken", { eventId: "evt-3" }),
    ]);

    const done = (name: string, phase: string) =>
      waitFor(async () => {
        const d = await getObj("whdel", ns, name);
        return d?.status?.phase === phase ? d : undefined;
      }, { description: `${name} ${phase}`, timeoutMs: 30_000 });

    const ok = await done("to-flaky", "Succeeded");
    expect(flaky.requests).toHaveLength(3);
    expect(ok.status!.attempts).toBe(3);
    expect(ok.status!.conditions.find((c: any) => c.type === "Succeeded").status).toBe("True");

    const g = await done("to-gone", "DeadLettered");
    expect(gone.requests).toHaveLength(1);
    expect(g.status!.deadLetter.reason).toBe("Gone");
    await waitFor(async () => (await getObj("whsub", ns, "gone"))?.status?.health?.state === "Disabled", { description: "gone endpoint Disabled" });

    const b = await done("to-broken", "DeadLettered");
    expect(broken.requests).toHaveLength(6);
    expect(b.status!.deadLetter.reason).toBe("Exhausted");
    expect(b.status!.history).toHaveLength(6);
    // Gaps grow twofold: 50, 100, 200, 400, 800 ms. Never earlier than scheduled; later only by
    // the processing on top (a status write, a watch event): a few ms, ~100 ms on a loaded
    // machine, so the upper bound leaves 1 s. The exact schedule is unit-tested (core/attempt/backoff).
    const gaps = broken.requests.slice(1).map((r, i) => r.at - broken.requests[i]!.at);
    gaps.forEach((g, i) => expect(g).toBeGreaterThanOrEqual(50 * 2 ** i - 5));
    gaps.forEach((g, i) => expect(g).toBeLessThan(50 * 2 ** i + 1_000));
    // The lower bounds are the growth: a schedule that did not double would send the 5th retry
    // about 750 ms early. (A ratio of the gaps is not: one late watch event in the first gap on
    // a loaded machine shrinks it without anything being wrong.)

    for (const [r, id] of [[flaky, "evt-1"], [gone, "evt-2"], [broken, "evt-3"]] as const) {
      for (const req of r.requests) {
        expect(req.headers["webhook-id"]).toBe(id);
        expect(() => Receiver.verify(req, TEST_SECRET)).not.toThrow();
        const body = JSON.parse(req.body) as { timestamp: string; created_at: string };
        expect(body).toMatchObject({ id, type: "order.paid" });
        // The specification's created_at beside timestamp: the event's creation time, the same on every attempt.
        expect(body.created_at).toBe(body.timestamp);
        expect(body.created_at).toBe(JSON.parse(r.requests[0]!.body).created_at);
        expect(new Date(body.created_at).toISOString().replace(".000", "")).toBe(body.created_at);
      }
    }
  });
});

const until = (ns: string, name: string, phase: string, timeoutMs = 30_000) =>
  waitFor(async () => {
    const d = await getObj("whdel", ns, name);
    return d?.status?.phase === phase ? d : undefined;
  }, { description: `${ns}/${name} ${phase}`, timeoutMs });
const succeededCondition = (d: any) => d?.status?.conditions?.find((c: any) => c.type === "Succeeded");

describe("delivery: durability and timeouts", () => {
  let ns: string;
  const receivers: Receiver[] = [];
  const operators: TestOperator[] = [];

  beforeAll(async () => {
    ns = await createNamespace("durable");
    await apply(secret(ns, "signing"));
  });
  afterAll(async () => {
    await Promise.all(operators.map((o) => o.stop()));
    await Promise.all(receivers.map((r) => r.close()));
    await deleteNamespace(ns);
  });

  it("keeps the backoff schedule and attempt count across an operator restart", async () => {
    const r = await Receiver.start(Receiver.sequence([500], 200));
    receivers.push(r);
    const first = await startOperator({ namespaces: [ns] });
    operators.push(first);
    await apply([
      subscription(ns, "slow-backoff", { url: r.url(), secretRef: { name: "signing" }, retry: { initialBackoff: "3s", jitterPercent: 0, maxAttempts: 5 } }),
      delivery(ns, "restart-me", "slow-backoff"),
    ]);
    const retrying = await until(ns, "restart-me", "Retrying");
    expect(retrying.status!.attempts).toBe(1);
    const due = Date.parse(retrying.status!.nextAttemptAt);
    await first.stop();
    const second = await startOperator({ namespaces: [ns] });
    operators.push(second);
    const done = await until(ns, "restart-me", "Succeeded");
    expect(r.requests).toHaveLength(2);
    // No early attempt: the restarted operator waited for the stored nextAttemptAt.
    expect(r.requests[1]!.at).toBeGreaterThanOrEqual(due - 50);
    expect(done.status!.attempts).toBe(2);
    expect(r.requests[0]!.headers["webhook-id"]).toBe(r.requests[1]!.headers["webhook-id"]);
    await second.stop();
  });

  it("ends an attempt to a receiver that never answers at the timeout, as a retryable failure", async () => {
    const r = await Receiver.start(() => "hang");
    receivers.push(r);
    const op = await startOperator({ namespaces: [ns] });
    operators.push(op);
    await apply([
      subscription(ns, "hangs", { url: r.url(), timeout: "300ms", retry: { initialBackoff: "50ms", maxAttempts: 2, jitterPercent: 0 } }),
      delivery(ns, "to-hang", "hangs"),
    ]);
    const d = await until(ns, "to-hang", "DeadLettered");
    expect(r.requests).toHaveLength(2);
    expect(d.status!.deadLetter.reason).toBe("Exhausted");
    for (const a of d.status!.history) {
      expect(a.reason).toBe("timeout");
      expect(a.outcome).toBe("Failed");
      expect(a.durationMs).toBeGreaterThanOrEqual(250);
      expect(a.durationMs).toBeLessThan(3000);
    }
    expect(await op.metric("webhook_delivery_attempts_total", { reason: "timeout" })).toBe(2);
    await op.stop();
  });
});

describe("delivery: no double attempts, API writes per delivery", () => {
  it("sends exactly one request per delivery for ten created at once, with at most 2 writes each", async () => {
    const ns = await createNamespace("ten");
    const r = await Receiver.start(() => 200);
    const op = await startOperator({ namespaces: [ns] });
    try {
      await apply([secret(ns, "signing"), subscription(ns, "ten", { url: r.url(), secretRef: { name: "signing" } })]);
      await waitFor(async () => (await getObj("whsub", ns, "ten"))?.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True"), { description: "subscription Ready" });
      const before = await op.apiRequests();
      const writes = (c: Record<string, number>) => (c.create ?? 0) + (c.patch ?? 0) + (c.update ?? 0) + (c.delete ?? 0);
      await apply(Array.from({ length: 10 }, (_, i) => delivery(ns, `d-${i}`, "ten")));
      for (let i = 0; i < 10; i++) await until(ns, `d-${i}`, "Succeeded");
      // Let the bounded-rate subscription rollup happen, then count.
      await waitFor(async () => (await getObj("whsub", ns, "ten"))?.status?.deliveries?.succeeded === 10, { description: "rollup counts 10" });
      const after = await op.apiRequests();
      expect(r.requests).toHaveLength(10);
      expect(new Set(r.requests.map((q) => q.headers["webhook-id"])).size).toBe(10);
      const statusPatches = (await op.apiRequests("webhookdeliveries/status")).patch ?? 0;
      expect(statusPatches).toBe(10); // one status write per attempt outcome
      const perDelivery = (writes(after) - writes(before)) / 10;
      expect(perDelivery).toBeLessThanOrEqual(2);
      console.log(`[writes] ${perDelivery} API writes per delivery (first-attempt success, including subscription status rollups)`);
    } finally {
      await op.stop();
      await r.close();
      await deleteNamespace(ns);
    }
  });
});

describe("delivery: retention.succeeded 0s", () => {
  it("deletes a delivered event without writing its Succeeded status: one operator write per delivery, counts and metrics kept", async () => {
    const ns = await createNamespace("two-writes");
    const r = await Receiver.start(() => 200);
    const op = await startOperator({ namespaces: [ns], statusIntervalMs: 500 });
    try {
      await apply(subscription(ns, "gone-fast", { url: r.url(), retention: { succeeded: "0s" } }));
      await waitFor(async () => (await getObj("whsub", ns, "gone-fast"))?.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True"), { description: "subscription Ready" });
      const before = await op.apiRequests("webhookdeliveries");
      const patchesBefore = (await op.apiRequests("webhookdeliveries/status")).patch ?? 0;
      await apply(Array.from({ length: 10 }, (_, i) => delivery(ns, `z-${i}`, "gone-fast")));
      await waitFor(async () => (await listObjs("whdel", ns)).length === 0 && r.requests.length === 10, { description: "10 delivered and deleted" });
      await waitFor(async () => (await getObj("whsub", ns, "gone-fast"))?.status?.deliveries?.succeeded === 10, { description: "the rollup counts 10 succeeded" });
      const after = await op.apiRequests("webhookdeliveries");
      expect(new Set(r.requests.map((q) => q.headers["webhook-id"])).size).toBe(10);
      // No status write for a delivery nobody will read: the delete is the only write.
      expect(((await op.apiRequests("webhookdeliveries/status")).patch ?? 0) - patchesBefore).toBe(0);
      expect((after.delete ?? 0) - (before.delete ?? 0)).toBe(10);
      expect(await op.metric("webhook_deliveries_finished_total", { subscription: "gone-fast", phase: "Succeeded" })).toBe(10);
      expect(await op.metric("webhook_delivery_attempts_total", { subscription: "gone-fast", status: "success" })).toBe(10);
    } finally {
      await op.stop();
      await r.close();
      await deleteNamespace(ns);
    }
  });

  it("a delivery that needed retries is deleted at once when it finally succeeds", async () => {
    const ns = await createNamespace("two-writes-retry");
    const r = await Receiver.start(Receiver.sequence([503], 200));
    const op = await startOperator({ namespaces: [ns] });
    try {
      await apply([subscription(ns, "retry-fast", { url: r.url(), retention: { succeeded: "0s" }, retry: { initialBackoff: "100ms", jitterPercent: 0 } }), delivery(ns, "y-0", "retry-fast")]);
      await waitFor(async () => r.requests.length === 2 && (await getObj("whdel", ns, "y-0")) === undefined, { description: "delivered on the 2nd attempt, then deleted" });
      // One status write: the failed first attempt's outcome.
      expect((await op.apiRequests("webhookdeliveries/status")).patch ?? 0).toBe(1);
    } finally {
      await op.stop();
      await r.close();
      await deleteNamespace(ns);
    }
  });
});

describe("delivery: waiting, never losing", () => {
  let ns: string;
  let op: TestOperator;
  let r: Receiver;

  beforeAll(async () => {
    ns = await createNamespace("waits");
    r = await Receiver.start(() => 200);
    op = await startOperator({ namespaces: [ns] });
  });
  afterAll(async () => {
    await op?.stop();
    await r?.close();
    await deleteNamespace(ns);
  });

  it("waits for a missing Secret with a condition and an Event, then delivers", async () => {
    await apply([subscription(ns, "needs-secret", { url: r.url("/s"), secretRef: { name: "late-secret" } }), delivery(ns, "wait-secret", "needs-secret")]);
    const waiting = await waitFor(async () => {
      const d = await getObj("whdel", ns, "wait-secret");
      return succeededCondition(d)?.reason === "SecretNotFound" ? d : undefined;
    }, { description: "SecretNotFound condition" });
    expect(succeededCondition(waiting).status).toBe("Unknown");
    expect(waiting.status!.phase).toBe("Pending");
    await waitFor(async () => (await events(ns, "wait-secret")).some((e) => e.reason === "SecretNotFound" && e.type === "Warning"), { description: "SecretNotFound Event" });
    await waitFor(async () => (await getObj("whsub", ns, "needs-secret"))?.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "False" && c.reason === "SecretNotFound"), { description: "subscription not Ready" });
    expect(r.requests.filter((q) => q.path === "/s")).toHaveLength(0);
    await apply(secret(ns, "late-secret"));
    await until(ns, "wait-secret", "Succeeded");
    const req = r.requests.find((q) => q.path === "/s")!;
    expect(() => Receiver.verify(req, TEST_SECRET)).not.toThrow();
  });

  it("sends nothing unsigned by default: without secretRef the subscription is Ready=False (SecretRequired) and its delivery waits; signature.scheme None sends it unsigned", async () => {
    await apply([rawSubscription(ns, "no-secret", { url: r.url("/no-secret") }), delivery(ns, "wait-unsigned", "no-secret")]);
    const ready = await waitFor(
      async () => (await getObj("whsub", ns, "no-secret"))?.status?.conditions?.find((c: any) => c.type === "Ready" && c.status === "False" && c.reason === "SecretRequired"),
      { description: "subscription Ready=False SecretRequired" },
    );
    expect(ready.message).toContain("spec.secretRef is not set");
    const waiting = await waitFor(async () => {
      const d = await getObj("whdel", ns, "wait-unsigned");
      return succeededCondition(d)?.reason === "SecretNotFound" ? d : undefined;
    }, { description: "the delivery waits" });
    expect(succeededCondition(waiting).message).toContain("signature: {scheme: None}");
    expect(waiting.status!.phase).toBe("Pending");
    await waitFor(async () => (await events(ns, "wait-unsigned")).some((e) => e.reason === "SecretNotFound" && e.type === "Warning" && e.message.includes("spec.secretRef")), { description: "a Warning Event naming spec.secretRef" });
    expect(r.requests.filter((q) => q.path === "/no-secret")).toHaveLength(0);
    await kubectlOk(["patch", "whsub", "no-secret", "-n", ns, "--type=merge", "-p", '{"spec":{"signature":{"scheme":"None"}}}']);
    await until(ns, "wait-unsigned", "Succeeded");
    const [req] = r.requests.filter((q) => q.path === "/no-secret");
    expect(req!.headers["webhook-id"]).toBeDefined();
    expect(req!.headers["webhook-timestamp"]).toBeDefined();
    expect(req!.headers).not.toHaveProperty("webhook-signature");
    await waitFor(async () => (await getObj("whsub", ns, "no-secret"))?.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True" && c.message.includes("not signed")), { description: "Ready=True, not signed" });
    // A secretRef beside scheme None is refused by the API server, naming the field.
    const both = await kubectl(["patch", "whsub", "no-secret", "-n", ns, "--type=merge", "-p", '{"spec":{"secretRef":{"name":"late-secret"}}}']);
    expect(both.code).not.toBe(0);
    expect(both.stderr).toContain("spec.secretRef: Invalid value");
    expect(both.stderr).toContain("signature.scheme None sends unsigned requests");
  });

  it("its attempts carry the subscription's provider label (hookline.dev/provider) when it is allowed, else generic", async () => {
    const labelled = (name: string, provider: string) => {
      const o = subscription(ns, name, { url: r.url(`/provider-${name}`) }) as { metadata: Record<string, unknown> };
      return { ...o, metadata: { ...o.metadata, labels: { "hookline.dev/provider": provider } } };
    };
    await apply([labelled("prov-stripe", "Stripe"), labelled("prov-other", "acme-internal"), delivery(ns, "prov-1", "prov-stripe"), delivery(ns, "prov-2", "prov-other")]);
    await until(ns, "prov-1", "Succeeded");
    await until(ns, "prov-2", "Succeeded");
    await waitFor(async () => (await op.metric("webhook_delivery_attempts_total", { subscription: "prov-stripe", provider: "stripe", status: "success" })) === 1, { description: "stripe's attempt" });
    expect(await op.metric("webhook_delivery_attempts_total", { subscription: "prov-other", provider: "generic", status: "success" })).toBe(1);
    // A value not in HOOKLINE_METRIC_PROVIDERS never becomes a label value.
    expect(await op.metric("webhook_delivery_attempts_total", { provider: "acme-internal" })).toBe(0);
  });

  it("waits for a missing subscription, then delivers when it appears", async () => {
    await apply(delivery(ns, "wait-sub", "not-yet"));
    await waitFor(async () => succeededCondition(await getObj("whdel", ns, "wait-sub"))?.reason === "SubscriptionNotFound", { description: "SubscriptionNotFound condition" });
    await waitFor(async () => (await events(ns, "wait-sub")).some((e) => e.reason === "SubscriptionNotFound" && e.type === "Warning"), { description: "SubscriptionNotFound Event" });
    await apply(subscription(ns, "not-yet", { url: r.url("/late") }));
    await until(ns, "wait-sub", "Succeeded");
    expect(r.requests.filter((q) => q.path === "/late")).toHaveLength(1);
  });

  it("holds deliveries of a paused subscription until it is unpaused", async () => {
    await apply([subscription(ns, "paused", { url: r.url("/paused"), paused: true }), delivery(ns, "held", "paused")]);
    await waitFor(async () => succeededCondition(await getObj("whdel", ns, "held"))?.reason === "Paused", { description: "Paused condition" });
    expect(r.requests.filter((q) => q.path === "/paused")).toHaveLength(0);
    await apply(subscription(ns, "paused", { url: r.url("/paused"), paused: false }));
    await until(ns, "held", "Succeeded");
    expect(r.requests.filter((q) => q.path === "/paused")).toHaveLength(1);
  });

  it("dead-letters an event type the subscription does not list (replayable), discards an oversized payload, without a request", async () => {
    await apply([subscription(ns, "picky", { url: r.url("/picky"), eventTypes: ["invoice.*"] }), delivery(ns, "wrong-type", "picky")]);
    // kubectl apply would store the payload again in its last-applied annotation (256 KiB max).
    await create(delivery(ns, "too-big", "picky", { eventType: "invoice.paid", payload: { blob: "x".repeat(300 * 1024) } }));
    const wrong = await until(ns, "wrong-type", "DeadLettered");
    expect(wrong.status!.deadLetter.reason).toBe("EventTypeNotSubscribed");
    expect(succeededCondition(wrong)).toMatchObject({ status: "False", reason: "EventTypeNotSubscribed" });
    const big = await until(ns, "too-big", "Discarded");
    expect(big.status!.discard.reason).toBe("PayloadTooLarge");
    expect(r.requests.filter((q) => q.path === "/picky")).toHaveLength(0);
    await waitFor(async () => (await events(ns, "too-big")).some((e) => e.reason === "Discarded"), { description: "Discarded Event" });
  });
});

describe("delivery: network guard (loopback not allowed)", () => {
  it("refuses link-local, private, loopback literals and names resolving to loopback without connecting", async () => {
    const ns = await createNamespace("guard");
    const r = await Receiver.start(() => 200);
    const op = await startOperator({ namespaces: [ns], env: { WEBHOOK_ALLOWED_NETWORKS: "" } });
    try {
      const targets = {
        metadata: "http://169.254.169.254/latest/meta-data",
        private: "http://10.0.0.1/hook",
        "ipv6-loopback": `http://[::1]:${r.port}/hook`,
        "name-to-loopback": `https://localhost:${r.port}/hook`,
        "ipv4-loopback": `https://127.0.0.1:${r.port}/hook`,
      };
      await apply(Object.entries(targets).flatMap(([name, url]) => [subscription(ns, name, { url, retry: { maxAttempts: 3, initialBackoff: "50ms" } }), delivery(ns, `to-${name}`, name)]));
      for (const name of Object.keys(targets)) {
        const d = await until(ns, `to-${name}`, "DeadLettered");
        expect(d.status!.deadLetter.reason, name).toBe("Blocked");
        expect(d.status!.attempts, name).toBe(1);
        expect(d.status!.lastAttempt.reason, name).toBe("blocked");
        expect(d.status!.lastAttempt.error, name).toMatch(/not in WEBHOOK_ALLOWED_NETWORKS/);
      }
      expect(r.requests).toHaveLength(0);
      expect(await op.metric("webhook_delivery_attempts_total", { reason: "blocked" })).toBe(5);
    } finally {
      await op.stop();
      await r.close();
      await deleteNamespace(ns);
    }
  });
});

describe("delivery: secret hygiene", () => {
  it("never puts a secret value in logs, status or Events", async () => {
    const ns = await createNamespace("hygiene");
    const plain = `plain-secret-${Math.random().toString(36).slice(2)}-value`;
    const whsec = `whsec_${Buffer.from(`hygiene-${Math.random()}`).toString("base64")}`;
    const ok = await Receiver.start(() => 200);
    const bad = await Receiver.start(() => 401);
    const op = await startOperator({ namespaces: [ns] });
    try {
      await apply([
        secret(ns, "s1", { secret: whsec, previous: `whsec_${Buffer.from(plain).toString("base64")}` }),
        secret(ns, "s2", { secret: plain }),
        subscription(ns, "std", { url: ok.url(), secretRef: { name: "s1", previousKey: "previous" }, headers: { "X-Tenant": "acme" } }),
        subscription(ns, "hex", { url: bad.url(), secretRef: { name: "s2" }, signature: { scheme: "HMACSHA256Hex" } }),
        subscription(ns, "missing-key", { url: ok.url(), secretRef: { name: "s2", key: "nope" } }),
        delivery(ns, "h1", "std"),
        delivery(ns, "h2", "hex"),
        delivery(ns, "h3", "missing-key"),
      ]);
      await until(ns, "h1", "Succeeded");
      await until(ns, "h2", "DeadLettered");
      await waitFor(async () => succeededCondition(await getObj("whdel", ns, "h3"))?.reason === "SecretNotFound", { description: "h3 waits for its key" });
      // Rotation: two signatures while previousKey exists.
      expect(String(ok.requests[0]!.headers["webhook-signature"]).split(" ")).toHaveLength(2);
      expect(bad.requests[0]!.headers["x-webhook-signature"]).toMatch(/^sha256=[0-9a-f]{64}$/);
      const everything = [
        op.logs.join("\n"),
        await kubectlOk(["get", "whdel,whsub", "-n", ns, "-o", "json"]),
        await kubectlOk(["get", "events", "-n", ns, "-o", "json"]),
        await (await fetch(`http://127.0.0.1:${op.op.metricsPort}/metrics`)).text(),
      ].join("\n");
      expect(everything.length).toBeGreaterThan(1000);
      for (const needle of [plain, whsec, whsec.slice("whsec_".length), Buffer.from(plain).toString("base64")]) {
        expect(everything.includes(needle), `found ${needle}`).toBe(false);
      }
    } finally {
      await op.stop();
      await ok.close();
      await bad.close();
      await deleteNamespace(ns);
    }
  });
});

describe("delivery: retention", () => {
  it("deletes finished deliveries after their retention, and keeps them until then", async () => {
    const ns = await createNamespace("retention");
    const ok = await Receiver.start(() => 200);
    const bad = await Receiver.start(() => 500);
    const op = await startOperator({ namespaces: [ns] });
    try {
      await apply([
        subscription(ns, "short", { url: ok.url(), retention: { succeeded: "0s", deadLettered: "720h" } }),
        subscription(ns, "failing", { url: bad.url(), retry: { maxAttempts: 1 }, retention: { succeeded: "1h", deadLettered: "2s" } }),
        subscription(ns, "kept", { url: ok.url() }),
        delivery(ns, "gone-soon", "short"),
        delivery(ns, "dead-soon", "failing"),
        delivery(ns, "stays", "kept"),
      ]);
      await until(ns, "stays", "Succeeded");
      await waitFor(async () => (await getObj("whdel", ns, "gone-soon")) === undefined, { description: "succeeded delivery deleted at once (retention 0s)" });
      const dead = await until(ns, "dead-soon", "DeadLettered");
      const deadAt = Date.parse(dead.status!.finishedAt);
      await waitFor(async () => (await getObj("whdel", ns, "dead-soon")) === undefined, { description: "dead letter deleted after 2s" });
      expect(Date.now() - deadAt).toBeGreaterThanOrEqual(1_900);
      expect(ok.requests).toHaveLength(2);
      expect((await getObj("whdel", ns, "stays"))?.status?.phase).toBe("Succeeded");
      expect((await op.apiRequests("webhookdeliveries")).delete).toBe(2);
    } finally {
      await op.stop();
      await ok.close();
      await bad.close();
      await deleteNamespace(ns);
    }
  });
});
