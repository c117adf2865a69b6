import { describe, expect, it } from "vitest";
import { Metrics } from "./metrics.js";

const LEADER_ONLY = ["webhook_breaker_state", "webhook_dlq_entries", "webhook_endpoint_health"];

async function series(m: Metrics, name: string): Promise<Array<{ labels: object; value: number }>> {
  return (await m.registry.getSingleMetric(name)!.get()).values.map((v) => ({ labels: v.labels, value: v.value }));
}

describe("Metrics: series only the leader maintains", () => {
  it("a replica that does not lead ignores the per-subscription gauges", async () => {
    const m = new Metrics({ defaultMetrics: false });
    m.setSubscriptionGauges("shop", "acme", { breaker: 1, health: 2, deadLetters: 3 });
    for (const name of LEADER_ONLY) expect(await series(m, name)).toEqual([]);
  });

  it("the leader sets them; when it stops leading they are gone and stay gone", async () => {
    const m = new Metrics({ defaultMetrics: false });
    m.setLeading(true);
    m.setSubscriptionGauges("shop", "acme", { breaker: 1, health: 2, deadLetters: 3 });
    m.setSubscriptionGauges("shop", "globex", { deadLetters: 1 });
    m.queueDepth.set({ controller: "delivery" }, 7);
    expect(await series(m, "webhook_dlq_entries")).toEqual([
      { labels: { namespace: "shop", subscription: "acme" }, value: 3 },
      { labels: { namespace: "shop", subscription: "globex" }, value: 1 },
    ]);
    // provider: generic, as acme has no hookline.dev/provider label (core/provider.ts).
    expect(await series(m, "webhook_breaker_state")).toEqual([{ labels: { namespace: "shop", subscription: "acme", provider: "generic" }, value: 1 }]);
    expect(await series(m, "hookline_leader")).toEqual([{ labels: {}, value: 1 }]);

    m.setLeading(false);
    for (const name of [...LEADER_ONLY, "hookline_workqueue_depth"]) expect(await series(m, name)).toEqual([]);
    expect(await series(m, "hookline_leader")).toEqual([{ labels: {}, value: 0 }]);
    m.setSubscriptionGauges("shop", "acme", { breaker: 0 }); // an attempt that finished while draining
    expect(await series(m, "webhook_breaker_state")).toEqual([]);
  });
});

describe("Metrics: the numbers on-call needs", () => {
  const numbers = { breaker: "Open", health: "Degraded", deadLetters: 2, backlog: 7, oldestPendingCreatedAt: 1_700_000_000_000, lastSuccessAt: 1_700_000_100_000 } as const;

  it("one series per breaker and health state, backlog, oldest pending and last success; leader only", async () => {
    const m = new Metrics({ defaultMetrics: false });
    m.setSubscriptionNumbers("shop", "acme", numbers);
    expect(await series(m, "webhook_breaker_status")).toEqual([]);
    m.setLeading(true);
    m.setSubscriptionNumbers("shop", "acme", numbers);
    const text = await m.registry.metrics();
    for (const line of [
      'webhook_breaker_status{namespace="shop",subscription="acme",state="Closed"} 0',
      'webhook_breaker_status{namespace="shop",subscription="acme",state="Open"} 1',
      'webhook_breaker_status{namespace="shop",subscription="acme",state="HalfOpen"} 0',
      'webhook_endpoint_health_status{namespace="shop",subscription="acme",state="Degraded"} 1',
      'webhook_subscription_backlog{namespace="shop",subscription="acme"} 7',
      'webhook_subscription_oldest_pending_timestamp_seconds{namespace="shop",subscription="acme"} 1700000000',
      'webhook_endpoint_last_success_timestamp_seconds{namespace="shop",subscription="acme"} 1700000100',
    ]) expect(text).toContain(line);
    expect(text).toMatch(/^hookline_build_info\{version="\d+\.\d+\.\d+[^"]*",node_version="v\d+[^"]*"\} 1$/m);
    // Nothing pending: no oldest-pending series (an age of "nothing" would be a lie).
    m.setSubscriptionNumbers("shop", "acme", { ...numbers, backlog: 0, oldestPendingCreatedAt: undefined });
    expect(await series(m, "webhook_subscription_oldest_pending_timestamp_seconds")).toEqual([]);
    m.forgetSubscription("shop", "acme");
    expect(await series(m, "webhook_breaker_status")).toEqual([]);
    expect(await series(m, "webhook_subscription_backlog")).toEqual([]);
  });

  it("create -> delivered latency", async () => {
    const m = new Metrics({ defaultMetrics: false });
    m.delivered("shop", "acme", "2026-01-01T00:00:00Z", Date.parse("2026-01-01T00:00:03Z"));
    const h = (await m.registry.getSingleMetric("webhook_delivery_latency_seconds")!.get()).values;
    expect(h.find((v) => (v as { metricName?: string }).metricName === "webhook_delivery_latency_seconds_sum")?.value).toBe(3);
    expect(h.find((v) => (v as { metricName?: string }).metricName === "webhook_delivery_latency_seconds_bucket" && v.labels.le === 5)?.value).toBe(1);
  });
});

describe("Metrics: the provider label (the specification's dashboards group by provider)", () => {
  it("attempts and the breaker carry the subscription's provider when allowed, else generic; a changed label moves the breaker's one series", async () => {
    const m = new Metrics({ defaultMetrics: false });
    const labels = new Map<string, string>([["shop/acme", "Stripe"], ["shop/globex", "made-up"]]);
    m.setProviders(["stripe", "github", "generic"], (ns, sub) => labels.get(`${ns}/${sub}`));
    m.countAttempt({ namespace: "shop", subscription: "acme" }, "success", "http_2xx");
    m.countAttempt({ namespace: "shop", subscription: "globex" }, "failure", "http_5xx");
    m.countAttempt({ namespace: "shop", subscription: "initech" }, "failure", "timeout");
    expect((await series(m, "webhook_delivery_attempts_total")).map((s) => s.labels)).toEqual([
      { namespace: "shop", subscription: "acme", provider: "stripe", status: "success", reason: "http_2xx" },
      { namespace: "shop", subscription: "globex", provider: "generic", status: "failure", reason: "http_5xx" },
      { namespace: "shop", subscription: "initech", provider: "generic", status: "failure", reason: "timeout" },
    ]);
    m.setLeading(true);
    m.setSubscriptionGauges("shop", "acme", { breaker: 1 });
    labels.set("shop/acme", "github");
    m.setSubscriptionGauges("shop", "acme", { breaker: 0 });
    expect(await series(m, "webhook_breaker_state")).toEqual([{ labels: { namespace: "shop", subscription: "acme", provider: "github" }, value: 0 }]);
    m.forgetSubscription("shop", "acme");
    expect(await series(m, "webhook_breaker_state")).toEqual([]);
  });
});

describe("Metrics: webhook_delivery_attempts_total, counted between reads", () => {
  it("every attempt counted before a read is in it, once, under the provider its subscription had when it was made", async () => {
    const m = new Metrics({ defaultMetrics: false });
    const labels = new Map<string, string>([["shop/acme", "stripe"]]);
    m.setProviders(["stripe", "github", "generic"], (ns, sub) => labels.get(`${ns}/${sub}`));
    m.initSubscription("shop", "acme");
    for (let i = 0; i < 1_000; i++) m.countAttempt({ namespace: "shop", subscription: "acme" }, "success", "http_2xx");
    m.countAttempt({ namespace: "shop", subscription: "acme" }, "failure", "timeout");
    const read = async () => (await series(m, "webhook_delivery_attempts_total")).map((s) => ({ ...(s.labels as Record<string, string>), value: s.value }));
    expect(await read()).toEqual([
      { namespace: "shop", subscription: "acme", provider: "stripe", status: "success", reason: "http_2xx", value: 1_000 },
      { namespace: "shop", subscription: "acme", provider: "stripe", status: "failure", reason: "timeout", value: 1 },
    ]);
    // A second read adds nothing; what comes after it is added to what was there.
    expect((await read())[0]!.value).toBe(1_000);
    labels.set("shop/acme", "github");
    for (let i = 0; i < 5; i++) m.countAttempt({ namespace: "shop", subscription: "acme" }, "success", "http_2xx");
    m.countAttempt({ namespace: "shop", subscription: "acme-2" }, "success", "http_2xx");
    const text = await m.registry.metrics();
    expect(text).toContain('webhook_delivery_attempts_total{namespace="shop",subscription="acme",provider="stripe",status="success",reason="http_2xx"} 1000');
    expect(text).toContain('webhook_delivery_attempts_total{namespace="shop",subscription="acme",provider="github",status="success",reason="http_2xx"} 5');
    expect(text).toContain('webhook_delivery_attempts_total{namespace="shop",subscription="acme-2",provider="generic",status="success",reason="http_2xx"} 1');
  });
});
