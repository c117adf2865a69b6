import { describe, expect, it } from "vitest";
import { deliveryFor, sameJson, selectSubscriptions, type SubscriptionLike } from "./fanout.js";

const sub = (name: string, spec: Record<string, unknown>, extra: { namespace?: string; deletionTimestamp?: string } = {}): SubscriptionLike => ({
  metadata: { name, namespace: extra.namespace ?? "shop", ...(extra.deletionTimestamp ? { deletionTimestamp: extra.deletionTimestamp } : {}) },
  spec: { url: "https://example.com", ...spec },
});

describe("selectSubscriptions", () => {
  const subs = [
    sub("all-omitted", {}),
    sub("all-star", { eventTypes: ["*"] }),
    sub("all-empty", { eventTypes: [] }),
    sub("orders", { eventTypes: ["order.*"] }),
    sub("paid", { eventTypes: ["order.paid"] }),
    sub("invoices", { eventTypes: ["invoice.paid"] }),
    sub("several", { eventTypes: ["invoice.paid", "order.paid"] }),
    sub("prefix-not-word", { eventTypes: ["ord.*"] }),
    sub("paused", { eventTypes: ["order.paid"], paused: true }),
    sub("deleting", { eventTypes: ["order.paid"] }, { deletionTimestamp: "2025-01-01T00:00:00Z" }),
    sub("paused-other", { eventTypes: ["invoice.paid"], paused: true }),
    sub("elsewhere", {}, { namespace: "other" }),
  ];

  it("matches omitted, *, exact and trailing .* types, skips paused and deleting ones, ignores other namespaces", () => {
    expect(selectSubscriptions(subs, "shop", "order.paid")).toEqual({
      matched: ["all-empty", "all-omitted", "all-star", "orders", "paid", "several"],
      skipped: [
        { subscription: "deleting", reason: "Deleting" },
        { subscription: "paused", reason: "Paused" },
      ],
    });
  });

  it.each([
    ["order.paid.v2", ["all-empty", "all-omitted", "all-star", "orders"]],
    ["order", ["all-empty", "all-omitted", "all-star"]],
    ["invoice.paid", ["all-empty", "all-omitted", "all-star", "invoices", "several"]],
    ["Order.paid", ["all-empty", "all-omitted", "all-star"]],
  ])("%s goes to %j", (type, matched) => {
    expect(selectSubscriptions(subs, "shop", type).matched).toEqual(matched);
  });

  it("reads a spec leniently", () => {
    const odd: SubscriptionLike[] = [{ metadata: { name: "no-spec" } }, sub("junk-types", { eventTypes: "order.paid" }), sub("paused-string", { paused: "true" })];
    expect(selectSubscriptions(odd, "shop", "x").matched).toEqual(["junk-types", "no-spec", "paused-string"]);
  });
});

describe("selectSubscriptions with spec.filter", () => {
  const subs = [
    sub("big-eur", { filter: 'data.amount.value > 1000 && data.currency == "EUR"' }),
    sub("missing-field", { filter: "data.nope > 1" }),
    sub("broken", { filter: "data.amount >" }),
    sub("no-filter", {}),
    sub("paused-filtered", { filter: "false", paused: true }),
  ];

  it("one subscription's filter decides for it alone: matched, Filtered, FilterError and InvalidFilter (with why), and counted", () => {
    const seen: Array<[string, string]> = [];
    const r = selectSubscriptions(subs, "shop", "order.paid", { id: "evt-1", data: { amount: { value: 4200 }, currency: "EUR" } }, (s, k) => seen.push([s, k]));
    expect(r.matched).toEqual(["big-eur", "no-filter"]);
    expect(r.skipped).toEqual([
      { subscription: "broken", reason: "InvalidFilter", message: expect.stringMatching(/^spec\.filter does not parse: at 1:\d+/) },
      { subscription: "missing-field", reason: "FilterError", message: expect.stringContaining("nope") },
      { subscription: "paused-filtered", reason: "Paused" },
    ]);
    expect(seen.sort()).toEqual([["big-eur", "matched"], ["broken", "invalid"], ["missing-field", "error"]]);
    const small = selectSubscriptions(subs, "shop", "order.paid", { id: "evt-2", data: { amount: { value: 10 }, currency: "EUR" } });
    expect(small.skipped).toContainEqual({ subscription: "big-eur", reason: "Filtered" });
  });

  it("without the event's data (a caller that only matches types) the filters are not evaluated", () => {
    expect(selectSubscriptions(subs, "shop", "order.paid").matched).toEqual(["big-eur", "broken", "missing-field", "no-filter"]);
  });
});

describe("deliveryFor", () => {
  const event = { namespace: "shop", type: "order.paid", id: "evt-1", data: { order: 1 }, size: 11 };

  it("names, labels and fills the delivery", () => {
    expect(deliveryFor(event, "acme")).toEqual({
      apiVersion: "hookline.dev/v1alpha1",
      kind: "WebhookDelivery",
      metadata: { name: "evt-1.acme", namespace: "shop", labels: { "hookline.dev/subscription": "acme", "hookline.dev/event-id": "evt-1" } },
      spec: { subscriptionRef: { name: "acme" }, eventType: "order.paid", eventId: "evt-1", payload: { order: 1 } },
    });
  });

  it("leaves out a null payload and keeps falsy ones", () => {
    expect(deliveryFor({ ...event, data: null }, "acme").spec).not.toHaveProperty("payload");
    expect(deliveryFor({ ...event, data: 0 }, "acme").spec.payload).toBe(0);
    expect(deliveryFor({ ...event, data: false }, "acme").spec.payload).toBe(false);
  });
});

describe("sameJson", () => {
  it.each([
    [{ a: 1, b: [1, { c: "x" }] }, { b: [1, { c: "x" }], a: 1 }, true],
    [{ a: null }, {}, true],
    [null, undefined, true],
    [{ a: 1 }, { a: 2 }, false],
    [[1, 2], [2, 1], false],
    [[], {}, false],
    [{ a: [] }, { a: {} }, false],
    ["1", 1, false],
    [0, null, false],
  ])("%j vs %j: %s", (a, b, same) => {
    expect(sameJson(a, b)).toBe(same);
  });
});
