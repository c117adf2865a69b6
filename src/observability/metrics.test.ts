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
    expect(await series(m, "webhook_breaker_state")).toEqual([{ labels: { namespace: "shop", subscription: "acme" }, value: 1 }]);
    expect(await series(m, "hookline_leader")).toEqual([{ labels: {}, value: 1 }]);

    m.setLeading(false);
    for (const name of [...LEADER_ONLY, "hookline_workqueue_depth"]) expect(await series(m, name)).toEqual([]);
    expect(await series(m, "hookline_leader")).toEqual([{ labels: {}, value: 0 }]);
    m.setSubscriptionGauges("shop", "acme", { breaker: 0 }); // an attempt that finished while draining
    expect(await series(m, "webhook_breaker_state")).toEqual([]);
  });
});
