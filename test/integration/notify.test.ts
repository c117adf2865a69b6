// spec.notify against the real API server and operator: a subscription whose endpoint fails tells
// its owner, through another subscription, once per change of state: the breaker opening, each
// dead letter. The notifications are signed by the receiving subscription, delivered whatever its
// eventTypes, and never sent to the failing endpoint; a notification's own failure never notifies.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { apply, delivery, secret, subscription, TEST_SECRET, waitForPhase } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";

describe("spec.notify", () => {
  let ns: string;
  let op: TestOperator;
  let failing: Receiver;
  let owner: Receiver;

  beforeAll(async () => {
    ns = await createNamespace("notify");
    failing = await Receiver.start(() => 500);
    owner = await Receiver.start(() => 200);
    await apply(secret(ns, "signing"));
    op = await startOperator({ namespaces: [ns], statusIntervalMs: 500 });
  });
  afterAll(async () => {
    await op?.stop();
    await failing?.close();
    await owner?.close();
    if (ns) await deleteNamespace(ns);
  });

  it("one notification per change of state (the breaker opening, each dead letter), signed, to the owner's subscription only", async () => {
    await apply([
      // The owner's subscription lists other types: Hookline's own events go to it all the same.
      subscription(ns, "alerts", { url: owner.url("/alerts"), secretRef: { name: "signing" }, eventTypes: ["ops.*"] }),
      subscription(ns, "shop", {
        url: failing.url("/shop/s3cret"),
        secretRef: { name: "signing" },
        retry: { maxAttempts: 1 },
        circuitBreaker: { failureThreshold: 2, cooldown: "300s", whenOpen: "Defer" },
        notify: { subscriptionRef: { name: "alerts" } },
      }),
    ]);
    await apply([delivery(ns, "d-1", "shop", { eventId: "evt-d-1" }), delivery(ns, "d-2", "shop", { eventId: "evt-d-2" })]);
    await waitForPhase(ns, ["d-1", "d-2"], "DeadLettered", 30_000);
    const types = () => owner.requests.map((r) => (JSON.parse(r.body) as { type: string }).type).sort();
    await waitFor(() => types().length === 3, { description: "three notifications at the owner's endpoint" });
    expect(types()).toEqual(["hookline.delivery.dead_lettered", "hookline.delivery.dead_lettered", "hookline.endpoint.breaker_opened"]);
    for (const r of owner.requests) expect(() => Receiver.verify(r, TEST_SECRET)).not.toThrow();
    const dead = owner.requests.map((r) => JSON.parse(r.body) as { type: string; data: { subscription: string; delivery?: string; eventId?: string; reason?: string; url: string } }).filter((b) => b.type === "hookline.delivery.dead_lettered");
    expect(dead.map((b) => b.data.delivery).sort()).toEqual(["d-1", "d-2"]);
    expect(dead.every((b) => b.data.subscription === "shop" && b.data.reason === "Exhausted" && !b.data.url.includes("s3cret"))).toBe(true);
    // A third delivery waits behind the open breaker: no new change of state, no new notification.
    await apply(delivery(ns, "d-3", "shop", { eventId: "evt-d-3" }));
    let stable = 0;
    await waitFor(
      async () => {
        stable = owner.requests.length === 3 && (await op.metric("webhook_notifications_total", { subscription: "shop" })) === 3 ? stable + 1 : 0;
        return stable >= 3;
      },
      { description: "still three notifications, three looks in a row", intervalMs: 1_000 },
    );
    expect(await op.metric("webhook_notifications_total", { subscription: "shop", event: "endpoint.breaker_opened" })).toBe(1);
    // Nothing of Hookline's own went to the failing endpoint.
    expect(failing.requests.every((r) => (JSON.parse(r.body) as { type: string }).type === "order.paid")).toBe(true);
  });
});
