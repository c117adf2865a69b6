// spec.notify: which notification a change of state makes, where it goes, and what it never does.
import { describe, expect, it } from "vitest";
import pino from "pino";
import { subscriptionSpecSchema } from "../api/subscription.js";
import { ApiError } from "../kube/client.js";
import type { Caches } from "./caches.js";
import { notifyTargetProblem, Notifier } from "./notifier.js";
import type { SubscriptionObject } from "./objects.js";

const sub = (name: string, spec: Record<string, unknown>): SubscriptionObject => ({ apiVersion: "hookline.dev/v1alpha1", kind: "WebhookSubscription", metadata: { name, namespace: "shop", uid: `uid-${name}` }, spec });

function setup(subs: SubscriptionObject[], answer: (body: { metadata: { name: string } }) => Promise<unknown> = () => Promise.resolve({})) {
  const byKey = new Map(subs.map((s) => [`shop/${s.metadata.name}`, s]));
  const caches = {
    subscription: (key: string) => byKey.get(key),
    subscriptionSpec: (s: SubscriptionObject) => ({ ok: true as const, spec: subscriptionSpecSchema.parse(s.spec) }),
  } as unknown as Caches;
  const posted: Array<{ metadata: { name: string; labels: Record<string, string> }; spec: { subscriptionRef: { name: string }; eventType: string; eventId: string; payload: Record<string, unknown> } }> = [];
  const warnings: string[] = [];
  const client = {
    request: (r: { body: never }) => {
      posted.push(r.body);
      return answer(r.body);
    },
  };
  const n = new Notifier({ client: client as never, caches, log: pino({ level: "silent" }), events: { record: (_ref, _type, reason, message) => warnings.push(`${reason}: ${message}`) }, now: () => Date.UTC(2026, 11, 5) });
  return { n, posted, warnings };
}

const flush = () => new Promise((r) => setImmediate(r));

describe("Notifier", () => {
  const shop = sub("shop", { url: "https://hooks.acme.example/orders/s3cret", notify: { subscriptionRef: { name: "alerts" } } });
  const alerts = sub("alerts", { url: "https://ops.example/hook" });

  it("one change of state: one delivery to the named subscription, its type Hookline's, the url redacted; the same change again has the same name", () => {
    const { n, posted } = setup([shop, alerts]);
    n.notify("shop/shop", "endpoint.breaker_opened", "breaker-opened@1", { consecutiveFailures: 5 });
    n.notify("shop/shop", "endpoint.breaker_opened", "breaker-opened@1", { consecutiveFailures: 5 });
    n.notify("shop/shop", "endpoint.breaker_opened", "breaker-opened@2", { consecutiveFailures: 5 });
    expect(posted).toHaveLength(3);
    expect(posted[0]!.metadata.name).toBe(posted[1]!.metadata.name);
    expect(posted[2]!.metadata.name).not.toBe(posted[0]!.metadata.name);
    expect(posted[0]!.metadata.name).toMatch(/^hookline\.endpoint\.breaker-opened\.[0-9a-f]{16}$/);
    expect(posted[0]!.spec).toMatchObject({
      subscriptionRef: { name: "alerts" },
      eventType: "hookline.endpoint.breaker_opened",
      payload: { subscription: "shop", namespace: "shop", url: "https://hooks.acme.example/REDACTED", at: "2026-12-05T00:00:00.000Z", consecutiveFailures: 5 },
    });
    expect(JSON.stringify(posted)).not.toContain("s3cret");
  });

  it("spec.notify.events chooses; a subscription without spec.notify sends nothing", () => {
    const only = sub("only", { url: "https://a.example", notify: { subscriptionRef: { name: "alerts" }, events: ["delivery.dead_lettered"] } });
    const { n, posted } = setup([only, alerts, sub("quiet", { url: "https://q.example" })]);
    n.notify("shop/only", "endpoint.unhealthy", "x", {});
    n.notify("shop/quiet", "delivery.dead_lettered", "x", {});
    expect(posted).toHaveLength(0);
    n.notify("shop/only", "delivery.dead_lettered", "x", {});
    expect(posted.map((p) => p.spec.eventType)).toEqual(["hookline.delivery.dead_lettered"]);
  });

  it("never to the failing endpoint itself: not to this subscription, not to one with its url (a Warning Event says why)", () => {
    const self = sub("self", { url: "https://a.example/h", notify: { subscriptionRef: { name: "self" } } });
    const twin = sub("twin", { url: "https://a.example/h" });
    const viaTwin = sub("via-twin", { url: "https://a.example/h", notify: { subscriptionRef: { name: "twin" } } });
    const { n, posted, warnings } = setup([self, twin, viaTwin]);
    n.notify("shop/self", "endpoint.unhealthy", "x", {});
    n.notify("shop/via-twin", "endpoint.unhealthy", "x", {});
    expect(posted).toHaveLength(0);
    expect(warnings).toEqual([
      "NotificationNotSent: endpoint.unhealthy not sent: spec.notify.subscriptionRef names this subscription: notifications never go to the failing endpoint itself",
      "NotificationNotSent: endpoint.unhealthy not sent: spec.notify.subscriptionRef names twin, which has this subscription's url: notifications never go to the failing endpoint itself",
    ]);
    expect(notifyTargetProblem({ name: "a", url: "u" }, undefined, "b")).toBeUndefined();
  });

  it("an existing notification (another replica, a restart) is no error; Hookline's own events never notify", async () => {
    const { n, posted } = setup([shop, alerts], () => Promise.reject(new ApiError(409, "AlreadyExists", "exists")));
    n.notify("shop/shop", "endpoint.throttled", "t@1", {});
    await flush();
    expect(posted).toHaveLength(1);
    expect(Notifier.notifies("hookline.delivery.dead_lettered")).toBe(false);
    expect(Notifier.notifies("hookline.ping")).toBe(false);
    expect(Notifier.notifies("order.paid")).toBe(true);
  });
});
