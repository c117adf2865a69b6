import { describe, expect, it } from "vitest";
import { Expectations } from "../runtime/expectations.js";
import { Handlers, type Queues } from "./handlers.js";
import type { DeliveryObject, SubscriptionObject } from "./objects.js";

function setup(leading = true) {
  const queued: { deliveries: string[]; subscriptions: Array<[string, number | undefined]> } = { deliveries: [], subscriptions: [] };
  const woken: string[] = [];
  const queues: Queues = {
    addDelivery: (k) => queued.deliveries.push(k),
    addSubscription: (k, after) => queued.subscriptions.push([k, after]),
    addReplay: () => undefined,
  };
  const deliveryExpectations = new Expectations();
  const subscriptionExpectations = new Expectations();
  const handlers = new Handlers({
    queues: () => (leading ? queues : undefined),
    deliveriesOf: (subKey) => (subKey === "shop/acme" ? ["shop/d1", "shop/d2"] : []),
    wakeEndpoint: (subKey) => woken.push(subKey),
    deliveryExpectations,
    subscriptionExpectations,
    statusIntervalMs: 5_000,
  });
  return { handlers, queued, woken, deliveryExpectations, subscriptionExpectations };
}

const sub = (rv: string, generation = 1, annotations?: Record<string, string>): SubscriptionObject => ({
  metadata: { name: "acme", namespace: "shop", resourceVersion: rv, generation, ...(annotations ? { annotations } : {}) },
});
const del = (rv: string, generation = 1): DeliveryObject => ({
  metadata: { name: "d1", namespace: "shop", resourceVersion: rv, generation },
  spec: { subscriptionRef: { name: "acme" }, eventType: "order.paid" },
});

describe("Handlers: subscriptions", () => {
  it("a new subscription is reconciled and wakes its deliveries and its endpoint", () => {
    const { handlers, queued, woken } = setup();
    handlers.subscription.add(sub("1"));
    expect(queued.subscriptions).toEqual([["shop/acme", undefined]]);
    expect(queued.deliveries).toEqual(["shop/d1", "shop/d2"]);
    expect(woken).toEqual(["shop/acme"]);
  });

  it("our own status write is not reconciled again", () => {
    const { handlers, queued, subscriptionExpectations } = setup();
    subscriptionExpectations.expect("shop/acme", "2");
    handlers.subscription.update(sub("1"), sub("2"));
    expect(queued.subscriptions).toEqual([]);
    expect(queued.deliveries).toEqual([]);
  });

  it("someone else's status write is reconciled, without waking deliveries", () => {
    const { handlers, queued, woken } = setup();
    handlers.subscription.update(sub("1"), sub("2"));
    expect(queued.subscriptions).toEqual([["shop/acme", undefined]]);
    expect(queued.deliveries).toEqual([]);
    expect(woken).toEqual([]);
  });

  it("an annotation added to our own write's version is reconciled (replay, reset)", () => {
    const { handlers, queued, subscriptionExpectations } = setup();
    subscriptionExpectations.expect("shop/acme", "2");
    handlers.subscription.update(sub("1"), sub("2", 1, { "hookline.dev/replay-dead-letters": "INC-42 fixed" }));
    expect(queued.subscriptions).toEqual([["shop/acme", undefined]]);
  });

  it("a spec change (generation) wakes the subscription's deliveries", () => {
    const { handlers, queued } = setup();
    handlers.subscription.update(sub("1", 1), sub("2", 2));
    expect(queued.deliveries).toEqual(["shop/d1", "shop/d2"]);
  });

  it("a deleted subscription is reconciled (its endpoint and gauges are forgotten)", () => {
    const { handlers, queued } = setup();
    handlers.subscription.delete(sub("3"));
    expect(queued.subscriptions).toEqual([["shop/acme", undefined]]);
  });

  it("a standby queues nothing, but still tracks its expectations", () => {
    const { handlers, queued, subscriptionExpectations } = setup(false);
    subscriptionExpectations.expect("shop/acme", "2");
    handlers.subscription.update(sub("1"), sub("2"));
    expect(queued).toEqual({ deliveries: [], subscriptions: [] });
    expect(subscriptionExpectations.check("shop/acme", "2")).toBe("ok");
  });
});

describe("Handlers: deliveries", () => {
  it("a new delivery is reconciled and its subscription's counts are rolled up at the bounded rate", () => {
    const { handlers, queued } = setup();
    handlers.delivery.add(del("1"));
    expect(queued.deliveries).toEqual(["shop/d1"]);
    expect(queued.subscriptions).toEqual([["shop/acme", 5_000]]);
  });

  it("our own status write is not reconciled again, nor rolled up", () => {
    const { handlers, queued, deliveryExpectations } = setup();
    deliveryExpectations.expect("shop/d1", "7");
    handlers.delivery.update(del("6", 2), del("7", 2));
    expect(queued).toEqual({ deliveries: [], subscriptions: [] });
  });

  it("a deleted delivery is not reconciled, but its subscription's counts are rolled up", () => {
    const { handlers, queued } = setup();
    handlers.delivery.delete(del("8", 2));
    expect(queued.deliveries).toEqual([]);
    expect(queued.subscriptions).toEqual([["shop/acme", 5_000]]);
  });

  it("a delivery naming no subscription is still reconciled (it is discarded with the reason)", () => {
    const { handlers, queued } = setup();
    handlers.delivery.add({ metadata: { name: "bad", namespace: "shop", resourceVersion: "1", generation: 1 }, spec: {} });
    expect(queued.deliveries).toEqual(["shop/bad"]);
    expect(queued.subscriptions).toEqual([]);
  });

  it("rollUp: urgent at once, otherwise after the status interval", () => {
    const { handlers, queued } = setup();
    handlers.rollUp("shop/acme", true);
    handlers.rollUp("shop/acme", false);
    expect(queued.subscriptions).toEqual([
      ["shop/acme", 0],
      ["shop/acme", 5_000],
    ]);
  });

  it("a relist meets the expectations of writes answered before it started, and queues the keys that waited", () => {
    const { handlers, queued, deliveryExpectations, subscriptionExpectations } = setup();
    deliveryExpectations.expect("shop/d1", "7");
    expect(deliveryExpectations.check("shop/d1", "6")).toBe("wait");
    subscriptionExpectations.expect("shop/acme", "3");
    expect(subscriptionExpectations.check("shop/acme", "2")).toBe("wait");
    handlers.delivery.listed!(Date.now() + 1);
    handlers.subscription.listed!(Date.now() + 1);
    expect(queued.deliveries).toEqual(["shop/d1"]);
    expect(queued.subscriptions).toEqual([["shop/acme", undefined]]);
    expect(deliveryExpectations.check("shop/d1", "9")).toBe("ok");
  });
});
